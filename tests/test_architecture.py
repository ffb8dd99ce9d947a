"""The shape of the code: packages depend one way, no two files import each
other, and no function is too long or too branchy to read.

Read from the source with `ast` (nothing is imported), so a deferred import
inside a function counts as much as one at the top of a file.

The floors, lowest first (a module may import its own floor and those below):

    assembly    the pure assembler (its purity: tests/assembly/test_assembly_purity.py)
    http_json   inspector/http_json.py: the JSON endpoints' answers and errors (neutral:
                imports only the assembler's JSON writer)
    lenses      what client libraries would assemble (pure)
    minimize    the minimizer and the regression export (pure)
    captures    storage, pages and the JSON API
    live        the recorder: proxy, guard, websockets, ingest

The wiring modules at the top of the package (settings, urls, asgi, wsgi,
access, apps, deploy, health, static_files) and the management commands may
import any floor; no floor imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from radon.complexity import cc_visit

PROJECT = Path(__file__).resolve().parents[1]
PACKAGE = PROJECT / "inspector"
FLOORS = ("assembly", "http_json", "lenses", "minimize", "captures", "live")

# Import cycles between files still to be undone, each pair once (sorted).
ALLOWED_CYCLES: set[frozenset[str]] = set()

# The length and complexity check reads every module (not migrations: generated).
# The assembler's hot loop, written flat on purpose: one function per frame or
# delta, since every call costs on each of a stream's frames (bench/README.md).
# Each entry says which per-frame step it is; nothing else may go over the limits.
HOT_LOOP: dict[str, str] = {
    "inspector.assembly.chat:_tool_delta": "every chat tool-call delta",
    "inspector.assembly.responses:chunk": "every Responses event's dispatch",
}
MAX_LINES = 60
MAX_COMPLEXITY = 20  # radon's grade C ends at 20

# Functions over the limits still to be split, as "module:function".  The test
# fails when one of them is fixed and still listed, so this list only shrinks.
TO_SPLIT: set[str] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts
    }


def _absolute(module: str, path: Path, level: int, target: str | None) -> str:
    """The absolute name of a relative import's base."""
    if not level:
        return target or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The inspector modules `module` imports (a `from X import Y` of a
    submodule Y counts as importing X.Y)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node.level, node.module)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return {name for name in found if name in known and name != module}


def import_graph() -> dict[str, set[str]]:
    files = source_files()
    known = set(files)
    return {module: imports(module, path, known) for module, path in files.items()}


def floor(module: str) -> int | None:
    """The rank of a module's floor; None for the wiring at the top."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FLOORS:
        return FLOORS.index(parts[1])
    return None


def test_floors_import_only_their_own_and_lower_floors():
    wrong = []
    for module, targets in import_graph().items():
        rank = floor(module)
        if rank is None:
            continue  # the wiring may import anything
        for target in sorted(targets):
            other = floor(target)
            if other is None or other > rank:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_files_import_each_other():
    cycles = [
        cycle
        for cycle in _cycles(import_graph())
        if not (len(cycle) == 2 and frozenset(cycle) in ALLOWED_CYCLES)
    ]
    assert cycles == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def oversized() -> dict[str, str]:
    """ "module:function" -> why, for every function over the limits."""
    out: dict[str, str] = {}
    for module, path in source_files().items():
        text = path.read_text()
        for node in _functions(ast.parse(text)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_LINES:
                out[f"{module}:{node.name}"] = f"{lines} lines"
        for block in cc_visit(text):
            if block.complexity > MAX_COMPLEXITY:
                name = getattr(block, "fullname", block.name)
                key = f"{module}:{name.rsplit('.', 1)[-1]}"
                out[key] = f"complexity {block.complexity}"
    return out


def test_no_function_over_sixty_lines_or_complexity_c():
    found = oversized()
    allowed = TO_SPLIT | set(HOT_LOOP)
    assert {key: why for key, why in found.items() if key not in allowed} == {}
    assert sorted(TO_SPLIT - set(found)) == [], "split already: drop from TO_SPLIT"
    assert sorted(set(HOT_LOOP) - set(found)) == [], "within the limits now: drop from HOT_LOOP"
