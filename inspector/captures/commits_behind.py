"""An upload's steps whose COMMIT is answered while the next is read, on
PostgreSQL.

A step's COMMIT is where PostgreSQL checks the deferred foreign keys of the
step's rows (`captures_frame.capture`: one lookup a row), about 3.5 ms for
500 frames here, while this process did nothing but wait: 0.7 s of a
100k-frame upload's 2.9 s.  So the COMMIT is sent (`CommitsBehind.step`)
and its answer read later (`settle`): the upload's steps read and assemble
the next step's frames in between, while the server commits, and an error
the COMMIT answers (a foreign key that does not hold) is raised then,
failing the upload as any other write does.

Django waits for every COMMIT it sends, and switches autocommit back on
right after it, which psycopg refuses while an answer is pending.  So such a
step is a transaction of its own, outside Django's atomic blocks: BEGIN, its
statements in Django's autocommit mode, and a COMMIT sent through psycopg's
libpq layer (`psycopg.pq`), its answer read the same way (waited for as
psycopg waits, `Connection.wait` with its generators: poll, not select,
which fails on a descriptor past 1,024).  Nothing may use
the connection in between (libpq refuses: "another command is already in
progress"), which the upload's steps keep to: in between they read bytes,
not the database, and they settle before they hand over (`intake.upload_steps`
yields between steps; its caller may query).

Inside an atomic block (a test's transaction, a caller's) and on other
databases a step is `writes.write_step()`.  Either way its rows go to this
process's connection (`fast_rows.IN_PROCESS`): `step_writers.step_writer`
chooses between these steps and a writer process's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import generators, pq
from psycopg.errors import error_from_result

from .fast_rows import IN_PROCESS, RowSink
from .writes import no_disk_wait, write_step


class CommitsBehind:
    """An upload's steps (`step`), each committed behind (see the module's
    docstring), and settled (`settle`) before anything else queries; on an
    error, `abandon()`."""

    def __init__(self) -> None:
        # The connection whose COMMIT's answer is still to be read.
        self._pending: BaseDatabaseWrapper | None = None

    @property
    def pending(self) -> bool:
        """Whether a COMMIT's answer is still to be read."""
        return self._pending is not None

    @contextmanager
    def step(self) -> Iterator[RowSink]:
        """One step: a transaction whose COMMIT is sent, not waited for,
        when the block ends without an error (rolled back, and the error
        raised, when it does not); the last step's is settled first."""
        self.settle()
        database = connections[DEFAULT_DB_ALIAS]  # this thread's: `settle` reads its answer
        if not _can_commit_behind(database):
            with write_step():
                yield IN_PROCESS
            return
        try:
            with database.cursor() as cursor:
                cursor.execute("BEGIN")
                no_disk_wait(cursor)
            yield IN_PROCESS
        except BaseException:
            _roll_back(database)
            raise
        try:
            with database.wrap_database_errors:
                _send_commit(database.connection)
        except BaseException:
            database.close()  # the COMMIT may be half sent: the connection is not reused
            raise
        self._pending = database

    def finish(self) -> None:
        """Every step handed over: the last one's answer read."""
        self.settle()

    def abandon(self) -> None:
        """`settle`, for steps given up on another error: what it raises is
        not (the upload fails all the same; a connection whose answer could
        not be read is closed by then)."""
        try:
            self.settle()
        except Exception:  # noqa: BLE001, S110 - the error being raised is the upload's
            pass

    def settle(self) -> None:
        """Read the answer of the COMMIT sent last, if any; raise what it
        says went wrong (as Django's error: an IntegrityError for a foreign
        key that does not hold).  A connection whose answer could not be
        read (lost, interrupted) is closed, so that nothing sends on it with
        the answer still to come."""
        database, self._pending = self._pending, None
        if database is None:
            return
        psycopg_connection = database.connection
        try:
            with database.wrap_database_errors:
                results = _read_answer(psycopg_connection)
        except BaseException:
            database.close()
            raise
        for result in results:
            if result.status != pq.ExecStatus.COMMAND_OK:
                with database.wrap_database_errors:
                    encoding = psycopg_connection.info.encoding
                    raise error_from_result(result, encoding=encoding)


def _send_commit(psycopg_connection: Any) -> None:
    psycopg_connection.pgconn.send_query(b"COMMIT")
    psycopg_connection.wait(generators.send(psycopg_connection.pgconn))


def _read_answer(psycopg_connection: Any) -> list[Any]:
    return psycopg_connection.wait(generators.fetch_many(psycopg_connection.pgconn))


def _can_commit_behind(database: BaseDatabaseWrapper) -> bool:
    """PostgreSQL, in Django's autocommit mode (no atomic block), with no
    transaction open on the connection (a COMMIT of ours would commit it)."""
    if database.vendor != "postgresql" or not database.get_autocommit():
        return False
    status = database.connection.pgconn.transaction_status
    return status == pq.TransactionStatus.IDLE


def _roll_back(database: BaseDatabaseWrapper) -> None:
    """Roll the step back; a connection that cannot is closed (as Django
    does when an atomic block's rollback fails), so no step is left open."""
    try:
        with database.cursor() as cursor:
            cursor.execute("ROLLBACK")
    except DatabaseError:
        database.close()


__all__ = ["CommitsBehind"]
