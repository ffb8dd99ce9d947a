"""Shared pytest fixtures: system Chromium for pytest-playwright and a real daphne server.

Pitfall references (pN) are to /work/shared/notes/toolchain.md §7.

Live server choice: pytest-django's ``live_server`` is Django's WSGI thread and serves no
websockets (p5). Use ``daphne_url`` below (a ``python -m daphne`` subprocess pointed at the
*test* database), or subclass ``channels.testing.ChannelsLiveServerTestCase`` (it forks a
DaphneProcess on the test DB; the file-based SQLite test DB in settings and the at-fork
executor reset below make that work, p5/p6). To get pytest-playwright's ``page`` into such a
class::

    class MyLiveTests(ChannelsLiveServerTestCase):
        host = "127.0.0.1"

        @pytest.fixture(autouse=True)
        def _inject_page(self, page):
            self.page = page

Rows written by a test are only visible to the server process when the test commits them:
use ``transactional_db`` / ``django_db(transaction=True)`` together with ``daphne_url``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# --- the suite's servers run with login on, DEBUG on and the dev key, on purpose ----------

# inspector/deploy.py refuses INSPECTOR_REQUIRE_LOGIN=1 with DEBUG on or the development
# SECRET_KEY; daphne subprocesses and `python -c` children inherit this and may start.
os.environ.setdefault("INSPECTOR_ALLOW_INSECURE", "1")


# --- pytest-playwright with Debian's chromium (never `playwright install`, p8) -------------


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


def pytest_collection_modifyitems(config, items):
    """Run browser tests last: pytest-playwright's session loop breaks later async tests (p3)."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture(scope="session")
def playwright(playwright):
    """Allow sync ORM calls under Playwright's running loop, only once browser tests start (p4)."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield playwright


# --- the flush that ends a transactional test, tried again after a deadlock -------------


def pytest_configure(config):
    """See tests/db_flush.py: a daphne server still at work must not leave its rows behind."""
    from db_flush import retrying_deadlocks
    from django.test import TransactionTestCase

    teardown = TransactionTestCase._fixture_teardown
    TransactionTestCase._fixture_teardown = retrying_deadlocks(teardown)


# --- forked live servers (ChannelsLiveServerTestCase) after async tests (p6) --------------


def _reset_asgiref_executor_after_fork() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from asgiref.sync import SyncToAsync

    SyncToAsync.single_thread_executor = ThreadPoolExecutor(max_workers=1)


os.register_at_fork(after_in_child=_reset_asgiref_executor_after_fork)


# --- real daphne server on the test database ---------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url(settings_dict: dict) -> str:
    """DATABASE_URL for the test database pytest-django has just created."""
    engine = settings_dict["ENGINE"]
    name = str(settings_dict["NAME"])
    if engine == "django.db.backends.sqlite3":
        return f"sqlite:///{name}"
    if engine == "django.db.backends.postgresql":
        user = urllib.parse.quote(settings_dict.get("USER") or "", safe="")
        password = urllib.parse.quote(settings_dict.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = settings_dict.get("HOST") or "127.0.0.1"
        port = settings_dict.get("PORT") or 5432
        return f"postgres://{auth}{host}:{port}/{urllib.parse.quote(name, safe='')}"
    raise RuntimeError(f"daphne_url: unsupported database engine {engine}")


@contextlib.contextmanager
def _daphne(
    db_url: str,
    log_path: Path,
    extra_env: dict[str, str] | None = None,
    procs: list[subprocess.Popen] | None = None,
):
    """A `python -m daphne` subprocess on a free port; yields its base URL once /health answers
    (and appends the process to `procs` when given)."""
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "inspector.settings", "DATABASE_URL": db_url}
    env.update(extra_env or {})
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the server keeps Django's async-safety checks
    cmd = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    cmd.append("inspector.asgi:application")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)
    if procs is not None:
        procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"daphne exited ({proc.returncode}):\n{log_path.read_text()}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"daphne not healthy after 20 s:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def daphne_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """Start `python -m daphne` on a free port against the test DB; yield its base URL."""
    from django.db import connections

    with django_db_blocker.unblock():
        db_url = _database_url(connections["default"].settings_dict)
    log_path = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with _daphne(db_url, log_path) as url:
        yield url


@pytest.fixture(scope="session")
def daphne_factory(django_db_setup, django_db_blocker, tmp_path_factory):
    """`daphne_factory({"INSPECTOR_UPSTREAMS": ...})` -> the base URL of a daphne subprocess on
    the test DB with that extra environment.  One server per distinct environment, kept for the
    session; the log is at `daphne_factory.logs[url]`."""
    from django.db import connections

    with django_db_blocker.unblock():
        db_url = _database_url(connections["default"].settings_dict)
    servers: dict[tuple, str] = {}
    logs: dict[str, Path] = {}
    with contextlib.ExitStack() as stack:

        def start(extra_env: dict[str, str] | None = None) -> str:
            key = tuple(sorted((extra_env or {}).items()))
            if key not in servers:
                log_path = tmp_path_factory.mktemp("daphne") / "daphne.log"
                servers[key] = stack.enter_context(_daphne(db_url, log_path, extra_env))
                logs[servers[key]] = log_path
            return servers[key]

        start.logs = logs
        yield start


class DaphneProcess(NamedTuple):
    url: str
    proc: subprocess.Popen
    log: Path


@pytest.fixture
def daphne_process(django_db_setup, django_db_blocker, tmp_path):
    """`daphne_process(extra_env)` -> DaphneProcess(url, proc, log): a daphne subprocess on the
    test DB of this test's own (each call starts one), for tests that kill it or read its
    memory through `proc.pid`.  Stopped at the end of the test if it still runs."""
    from django.db import connections

    with django_db_blocker.unblock():
        db_url = _database_url(connections["default"].settings_dict)
    started: list[subprocess.Popen] = []
    with contextlib.ExitStack() as stack:

        def start(extra_env: dict[str, str] | None = None) -> DaphneProcess:
            procs: list[subprocess.Popen] = []
            log_path = tmp_path / f"daphne-{len(started)}.log"
            url = stack.enter_context(_daphne(db_url, log_path, extra_env, procs))
            started.extend(procs)
            return DaphneProcess(url, procs[0], log_path)

        yield start


@pytest.fixture(autouse=True)
def _lens_results_awaited(settings):
    """In-process requests wait for their lens runs as long as they take (as a
    reader would reload until they are done): how busy the machine is must not
    decide what a page shows.  The "computing…" state is exercised through
    daphne by the browser tests."""
    settings.INSPECTOR_LENS_WAIT_SECONDS = 60
