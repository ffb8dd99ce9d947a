"""The assembler is pure: bytes or frames in, events and a result out; no Django,
no database, no network inside it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
PACKAGE = PROJECT / "inspector" / "assembly"

FORBIDDEN_TOP_LEVEL = {
    "django",
    "channels",
    "channels_redis",
    "daphne",
    "asgiref",
    "twisted",
    "psycopg",
    "psycopg2",
    "redis",
    "dj_database_url",
    "httpx",
    "requests",
    "http",
    "socket",
    "ssl",
    "asyncio",
    "sqlite3",
}
FORBIDDEN_MODULES = {"urllib.request", "inspector.settings"}

PROBE = """
import json, sys
import inspector.assembly
from inspector.assembly import assemble
data = (b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":'
        b'{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\\n\\ndata: [DONE]\\n\\n')
outcome = assemble(data, fmt="sse").to_dict()["outcome"]
# Every dialect's adapter and the JSON-array reader run too.
for body in (b'data: {"type":"response.created"}\\n\\n', b'data: {"type":"message_start"}\\n\\n',
             b'[{"candidates":[{"finishReason":"STOP"}]}]'):
    assemble(body)
print(json.dumps({"outcome": outcome, "modules": sorted(sys.modules)}))
"""


def fresh_import() -> dict:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", "PYTHONSTARTUP")
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        cwd=PROJECT,
        env=env,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


def test_the_assembler_runs_in_a_fresh_interpreter_without_django_settings():
    assert fresh_import()["outcome"] == "ok"


def test_importing_and_running_the_assembler_loads_no_framework_database_or_network_module():
    modules = fresh_import()["modules"]
    top_level = {name.split(".")[0] for name in modules}
    assert top_level & FORBIDDEN_TOP_LEVEL == set()
    assert set(modules) & FORBIDDEN_MODULES == set()


def imported_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


DIALECT_MODULES = {"chat.py", "responses.py", "messages.py", "gemini.py", "dialect.py"}


def test_no_assembly_source_file_imports_a_framework_or_network_module():
    sources = sorted(PACKAGE.glob("*.py"))
    assert len(sources) >= 10
    assert DIALECT_MODULES | {"jsonarray.py", "jsonpath.py"} <= {path.name for path in sources}
    for path in sources:
        for name in imported_names(path):
            assert name.split(".")[0] not in FORBIDDEN_TOP_LEVEL, (path.name, name)
            assert not name.startswith("inspector.") or name.startswith("inspector.assembly"), (
                path.name,
                name,
            )
