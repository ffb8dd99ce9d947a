"""The suite's flush survives being PostgreSQL's deadlock victim (tests/db_flush.py)."""

from __future__ import annotations

import re
import threading
import time

import pytest
from db_flush import retrying_deadlocks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import OperationalError, connection, connections, transaction

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's deadlocks"),
]


def flush() -> None:
    call_command("flush", interactive=False, verbosity=0)


def last_table_the_flush_takes() -> str:
    """The flush's TRUNCATE takes its tables in the order it names them (an order of
    Django's that changes from one process to the next)."""
    truncate = next(s for s in sql_flush(no_style(), connection) if s.startswith("TRUNCATE"))
    return re.findall(r'"([^"]+)"', truncate)[-1]


class ServerAtWork(threading.Thread):
    """What a daphne server may do as a test ends (a lens run updating its `LensRun` row and
    reading its `Capture`): hold one table in a transaction, then read another, one that a
    flush begun meanwhile has already taken.  It gives its table back once its read went
    through."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.held = last_table_the_flush_takes()
        self.holding = threading.Event()
        self.error: BaseException | None = None
        self.start()
        assert self.holding.wait(10), self.error

    def run(self) -> None:
        other = connections.create_connection("default")
        try:
            other.set_autocommit(False)
            with other.cursor() as cursor:
                cursor.execute(f'LOCK TABLE "{self.held}" IN ROW EXCLUSIVE MODE')
                self.holding.set()
                taken = self.a_table_a_waiting_truncate_holds(cursor)
                cursor.execute(f'SELECT count(*) FROM "{taken}"')
            other.rollback()
        except BaseException as error:  # reported by the test
            self.error = error
        finally:
            other.close()

    @staticmethod
    def a_table_a_waiting_truncate_holds(cursor) -> str:
        for _ in range(500):
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # (else read once a transaction)
            cursor.execute(
                "SELECT c.relname FROM pg_locks l"
                " JOIN pg_class c ON c.oid = l.relation"
                " JOIN pg_stat_activity a ON a.pid = l.pid"
                " WHERE a.wait_event_type = 'Lock' AND a.query LIKE 'TRUNCATE%%'"
                " AND a.datname = current_database()"
                " AND l.database = (SELECT oid FROM pg_database"
                " WHERE datname = current_database())"
                " AND l.granted AND l.mode = 'AccessExclusiveLock' AND c.relkind = 'r'"
                " LIMIT 1"
            )
            row = cursor.fetchone()
            if row:
                return row[0]
            time.sleep(0.02)
        raise TimeoutError("no TRUNCATE came to wait")


def test_without_a_retry_the_flush_is_the_victim():
    at_work = ServerAtWork()
    with pytest.raises(CommandError) as raised:
        flush()
    at_work.join(10)
    assert at_work.error is None, at_work.error
    assert "deadlock" in str(raised.value.__cause__)


def test_the_retried_flush_goes_through():
    tries = []

    def counted_flush() -> None:
        tries.append(1)
        flush()

    at_work = ServerAtWork()
    retrying_deadlocks(counted_flush)()
    at_work.join(10)
    assert not at_work.is_alive() and at_work.error is None, at_work.error
    assert len(tries) == 2  # the deadlock's victim, then the flush that went through


def test_a_flush_that_fails_otherwise_is_not_tried_again():
    """An OperationalError that is no deadlock (a statement cancelled by its
    timeout, SQLSTATE 57014) is the flush's own failure."""
    tries = []

    def failing_flush() -> None:
        tries.append(1)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET LOCAL statement_timeout = '1ms'")
                cursor.execute("SELECT pg_sleep(1)")
        except OperationalError as error:
            raise CommandError("flush failed") from error

    with pytest.raises(CommandError):
        retrying_deadlocks(failing_flush)()
    assert len(tries) == 1
