"""Running `manage.py` commands as a user would, in a subprocess (imported by
module name: tests/ is on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def manage(command: str, *args: str, stdin: bytes = b"", timeout: float = 60):
    """`python manage.py COMMAND ARGS` from the project root, without the
    test run's DJANGO_SETTINGS_MODULE: the completed process."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "manage.py", command, *args],
        input=stdin,
        capture_output=True,
        cwd=PROJECT,
        env=env,
        timeout=timeout,
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """Exit 2, nothing on stdout, one line (no traceback) on stderr: that line."""
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]
