"""One HTTP ingest capture's appends, one at a time, whichever process takes them.

Behind a plain balancer two server processes can get appends of one capture
at once.  Each append (and the close) holds the capture's turn from reading
the capture's offset to publishing the frames it stored: on PostgreSQL a
session advisory lock on the slug, so the appends are stored in offset
order and their messages reach the channel layer (Redis) in that order too;
the row lock the append's transaction takes (`recorder.append_sync`) only
checks that nothing went past the lock.  SQLite serves one process: there
the turn is this process's turn to write (`captures.writes.writing`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from inspector.captures.writes import writing

# The first key of pg_advisory_lock(int, int): the ingest turns' own space.
LOCK_SPACE = 0x1A6E


@contextmanager
def capture_turn(slug: str) -> Iterator[None]:
    """Hold the capture's turn (see the module's docstring)."""
    with writing():
        if connection.vendor != "postgresql":
            yield
        else:
            _advisory("pg_advisory_lock", slug)
            try:
                yield
            finally:
                _advisory("pg_advisory_unlock", slug)


def _advisory(function: str, slug: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, hashtext(%s))", [LOCK_SPACE, slug])


__all__ = ["LOCK_SPACE", "capture_turn"]
