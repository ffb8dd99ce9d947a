"""The test database's flush, tried again when PostgreSQL picks it as a deadlock's victim.

A transactional test ends with a flush: one `TRUNCATE` of every table, which takes its
locks table by table.  A daphne server of the suite may still be at work on the test
database when a browser test ends: a lens run asking for its row every second
(`LensRun` joined to `Capture`), a recorder closing.  Such a statement holds one table and
waits for another the `TRUNCATE` already holds; PostgreSQL ends the deadlock by failing
the statement that waited first, the flush, and the next test then starts on the last
one's rows.  The other statement goes through, so trying the flush again a moment later
succeeds.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TypeVar

from django.core.management.base import CommandError
from django.db import OperationalError

T = TypeVar("T")

FLUSH_ATTEMPTS = 5


DEADLOCK_DETECTED = "40P01"  # PostgreSQL's SQLSTATE


def retrying_deadlocks(flush: Callable[..., T]) -> Callable[..., T]:
    """`flush` that is tried up to FLUSH_ATTEMPTS times while it fails as a deadlock's
    victim: Django's `flush` command raises CommandError from Django's OperationalError,
    raised from psycopg's `DeadlockDetected`."""

    @functools.wraps(flush)
    def flushed(*args, **kwargs) -> T:
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return flush(*args, **kwargs)
            except CommandError as error:
                if attempt == FLUSH_ATTEMPTS or not deadlocked(error):
                    raise
                time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    return flushed


def deadlocked(error: CommandError) -> bool:
    cause = error.__cause__
    driver_error = cause.__cause__ if isinstance(cause, OperationalError) else None
    return getattr(driver_error, "sqlstate", None) == DEADLOCK_DETECTED
