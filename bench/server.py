"""A daphne subprocess for the benchmarks: on a free loopback port, healthy
before it is used, stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"daphne exited ({proc.returncode}):\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"daphne not healthy after {seconds} s:\n{log.read_text()}")
        time.sleep(0.1)


def cpu_seconds(process: subprocess.Popen) -> float:
    """The process's CPU time so far (user + system; Linux's /proc), its live
    children's with it (a daphne's recording process), or NaN."""
    return _cpu_of(process.pid)


def has_recording_process(process: subprocess.Popen) -> bool:
    """Whether the daphne `process` runs a recording process
    (INSPECTOR_RECORDING_PROCESS: a child `manage.py record_relays`, alive)."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
    kids = children.read_text().split() if children.exists() else []
    for kid in kids:
        try:
            command = Path(f"/proc/{kid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"record_relays" in command:
            return True
    return False


def _cpu_of(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = children.read_text().split() if children.exists() else []
    return own + sum(_cpu_of(int(kid)) for kid in kids)


def scratch_site(prefix: str, database_url: str = "", redis_url: str = "") -> tuple[Path, dict]:
    """A scratch folder and a migrated database (a SQLite file in the folder
    unless `database_url`), set up for this process (Django configured) and
    returned as the environment for its daphne."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "inspector.settings"}
    # As deployed (README, "more than one process"): with DEBUG on, Django keeps
    # every query with its parameters quoted, 7% of a proxy taking 5,000 frames a
    # second (py-spy); a bench that wants it on says INSPECTOR_DEBUG=1.
    env.setdefault("INSPECTOR_DEBUG", "0")
    env["DATABASE_URL"] = database_url or f"sqlite:///{scratch / 'bench.sqlite3'}"
    env.pop("REDIS_URL", None)
    if redis_url:
        env["REDIS_URL"] = redis_url
    os.environ.update({key: env[key] for key in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")})
    os.environ.pop("REDIS_URL", None)  # this process publishes nothing
    manage = [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0", "--noinput"]
    subprocess.run(manage, env=env, cwd=ROOT, check=True)
    import django

    django.setup()
    return scratch, env


@contextlib.contextmanager
def daphne(
    env: dict[str, str], log: Path, *, backlog: int = 0, seconds: float = 30
) -> Iterator[tuple[str, subprocess.Popen]]:
    """(base URL, process) of a daphne serving the inspector with `env`;
    `backlog` > 0 sets its listen backlog (Twisted's default is 50)."""
    port = free_port()
    if backlog:
        where = ["-e", f"tcp:port={port}:interface=127.0.0.1:backlog={backlog}"]
    else:
        where = ["-b", "127.0.0.1", "-p", str(port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", *where, "inspector.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log, seconds)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
