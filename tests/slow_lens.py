"""A lens run made slow on purpose, for the tests of runs nobody waits for.

    monkeypatch.setattr(runner, "_child", slow_lens.never_ending)

`runner.bounded_run` hands its child function to the fork server by name
(pickled by reference), so the forked child imports this file (the fork
server was started with the tests' `sys.path`) and runs it in place of
`runner._child`: the lens `SLOW` sleeps first, every other lens runs as it
does.  In the child, `runner._child` is the real one.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any

from inspector.lenses import runner

SLOW = "vercel"
# Longer than the tests' INSPECTOR_LENS_ABANDON_SECONDS: a run this slow ends
# only if someone keeps asking for it.
A_WHILE_SECONDS = 5.0


def never_ending(conn: Connection, job: dict[str, Any], memory_mb: int) -> None:
    """The lens `SLOW` never answers (until its process is killed)."""
    if job["lens"] == SLOW:
        time.sleep(3600)
    runner._child(conn, job, memory_mb)


def slow_for_a_while(conn: Connection, job: dict[str, Any], memory_mb: int) -> None:
    """The lens `SLOW` answers after A_WHILE_SECONDS, as it would have."""
    if job["lens"] == SLOW:
        time.sleep(A_WHILE_SECONDS)
    runner._child(conn, job, memory_mb)
