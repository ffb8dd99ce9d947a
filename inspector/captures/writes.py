"""Taking turns at writing, on SQLite.

SQLite lets one connection write at a time.  Each request has a thread and
connection of its own, so in one process the writers (live recordings,
uploads, ingest) take turns here rather than in SQLite's busy handler, which
sleeps and polls: a writer that commits and at once begins again (an upload
storing batch after batch) would win every time against one asleep in the
handler, and live frames would wait for the whole upload.  This lock is
first come, first served: a live write waits for at most the one batch being
written.  It is reentrant (closing a live capture writes in several
transactions under the recorder's turn).  Other databases lock rows, not
the database: there it is a no-op.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


class FairLock:
    """A reentrant lock granted in the order it was asked for (tickets)."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._next_ticket = 0
        self._serving = 0
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        me = threading.get_ident()
        with self._condition:
            if self._owner == me:
                self._depth += 1
                return
            ticket = self._next_ticket
            self._next_ticket += 1
            while self._serving != ticket:
                self._condition.wait()
            self._owner, self._depth = me, 1

    def release(self) -> None:
        with self._condition:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._serving += 1
                self._condition.notify_all()


_sqlite_writes = FairLock()


@contextmanager
def writing() -> Iterator[None]:
    """Hold this process's turn to write (SQLite only)."""
    if connection.vendor != "sqlite":
        yield
        return
    _sqlite_writes.acquire()
    try:
        yield
    finally:
        _sqlite_writes.release()
