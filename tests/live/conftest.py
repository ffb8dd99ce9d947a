"""Fixtures of the live-capture tests: a fake upstream in a thread of the test process and
a daphne subprocess (on the test database) whose INSPECTOR_UPSTREAMS points at it.

`fake` is the fake upstream with its fail counters and request log cleared for each test.
Tests that talk to daphne must use `transactional_db` (the server's rows are committed by
another process; plain `db` would hide nothing but leak rows between tests).
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from live_helpers import SECRET_MARK, text_stream, wait_for

from inspector.live import broadcast
from inspector.live.fake_upstream import DEFAULT_SCENARIOS, FakeUpstream


@pytest.fixture(scope="session")
def scenarios_dir(tmp_path_factory) -> Path:
    """The demo scenarios at full speed, plus a few the tests need."""
    out = tmp_path_factory.mktemp("scenarios")
    for path in DEFAULT_SCENARIOS.iterdir():
        shutil.copy(path, out / path.name)
    for sidecar in out.glob("*.json"):
        options = json.loads(sidecar.read_text())
        options.pop("pace_ms", None)
        sidecar.write_text(json.dumps(options))
    ok = (out / "ok-tool-call.sse").read_text()
    (out / "slow.sse").write_text(text_stream(30))
    (out / "slow.json").write_text(json.dumps({"pace_ms": 150}))
    (out / "always-500.sse").write_text(ok)
    (out / "always-500.json").write_text(json.dumps({"fail_times": 1000, "fail_status": 500}))
    (out / "bad-request.sse").write_text(ok)
    (out / "bad-request.json").write_text(json.dumps({"fail_times": 1000, "fail_status": 400}))
    shutil.copy(out / "weather-jsonl.jsonl", out / "raw-jsonl.jsonl")
    (out / "raw-jsonl.json").write_text(json.dumps({"serve_as": "jsonl"}))
    return out


@pytest.fixture
def sent(monkeypatch) -> list[dict]:
    """Every message a recording publishes to its viewers (`broadcast.send`), in order."""
    messages: list[dict] = []

    async def spy(group: str, message: dict) -> None:
        messages.append(message)

    monkeypatch.setattr(broadcast, "send", spy)
    return messages


@pytest.fixture(scope="session")
def fake_upstream(scenarios_dir):
    fake = FakeUpstream(scenarios_dir).start()
    yield fake
    fake.stop()


@pytest.fixture
def fake(fake_upstream) -> FakeUpstream:
    fake_upstream.reset()
    return fake_upstream


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def inspector_url(daphne_factory, fake_upstream) -> str:
    """daphne with upstreams `fake` (the fake upstream) and `dead` (nothing listens)."""
    env = {
        "INSPECTOR_UPSTREAMS": (
            f"fake={fake_upstream.url},dead=http://127.0.0.1:{_closed_port()}/v1"
        ),
        "INSPECTOR_GUARD_RETRIES": "2",
        "INSPECTOR_GUARD_BACKOFF_SECONDS": "0.01",
        "INSPECTOR_UPSTREAM_CONNECT_TIMEOUT": "5",
        "INSPECTOR_UPSTREAM_READ_TIMEOUT": "20",
    }
    return daphne_factory(env)


@pytest.fixture
def closed_capture():
    """`closed_capture(slug)`: the capture once the server has closed it."""
    from inspector.captures.models import Capture

    def get(slug: str, timeout: float = 10.0) -> Capture:
        def closed():
            capture = Capture.objects.filter(slug=slug).first()
            return capture if capture is not None and capture.finished is not None else None

        return wait_for(closed, timeout, f"capture {slug} to close")

    return get


@pytest.fixture
def secret_count():
    """`secret_count()`: how many times the canary's secret part is stored, in any
    column of any table of the database (not only the captures' text columns)."""
    from django.db import connection

    def cell_count(value: object) -> int:
        if isinstance(value, memoryview):
            value = bytes(value)
        if isinstance(value, bytes):
            return value.count(SECRET_MARK.encode())
        return 0 if value is None else str(value).count(SECRET_MARK)

    def count() -> int:
        total = 0
        with connection.cursor() as cursor:
            for table in connection.introspection.table_names(cursor):
                cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
                total += sum(cell_count(v) for row in cursor.fetchall() for v in row)
        return total

    return count
