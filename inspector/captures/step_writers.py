"""How an upload's steps are written (`intake.upload_steps`): chosen per
capture by `step_writer`.

- On PostgreSQL, by this process, each step's COMMIT answered behind
  (`commits_behind.CommitsBehind`; elsewhere, when there is no writer
  process, it is a plain transaction a step, `writes.write_step`).
- On SQLite, a large upload's steps by a writer process
  (`writer_process.WriterProcess`), while this process reads and assembles
  the next: `ByProcess`.  An upload stores its frames, and with them the
  started calls' fragments, at about the pace of SQLite's inserts instead of
  after them (bench/README.md, tenth stop).

Each is used the same way: `with steps.step() as rows:` (`rows`: the
`fast_rows.RowSink` the step's rows go to), `settle()` before the caller may
query, `finish()` once every step is handed over (every step is written when
it returns), `abandon()` when the upload is given up.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from django.conf import settings
from django.db import DatabaseError, IntegrityError, OperationalError, connection, models

from .commits_behind import CommitsBehind
from .fast_rows import RowSink, sqlite_insert, sqlite_update
from .writer_process import Statement, WriteFailed, WriterProcess
from .writes import database_file, holds_turn, writing_turn

logger = logging.getLogger(__name__)


class StepWriter(Protocol):
    def step(self) -> Any: ...  # a context manager giving the step's RowSink
    def settle(self) -> None: ...
    def finish(self) -> None: ...
    def abandon(self) -> None: ...


def step_writer(size: int) -> StepWriter:
    """How the steps of a capture of `size` bytes are written: by a writer
    process on SQLite, for an upload of at least
    INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES (negative: never) into a database
    file, outside any transaction (a caller's open transaction holds rows,
    the capture's own among them, that another connection cannot see);
    committed behind otherwise (on PostgreSQL; in this process elsewhere)."""
    threshold = settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES
    if 0 <= threshold <= size and connection.vendor == "sqlite" and connection.get_autocommit():
        path = database_file(connection)
        # A thread holding the turn to write would wait for the child's steps, which wait for it.
        if path is not None and not holds_turn():
            busy_seconds = float(connection.settings_dict["OPTIONS"].get("timeout", 5))
            try:
                return ByProcess(WriterProcess(path, writing_turn, busy_seconds))
            except OSError:  # no process (a limit reached, no Python to start): write in-process
                logger.exception("the upload's writer process did not start")
    return CommitsBehind()


class Statements(RowSink):
    """A step's rows as the SQLite statements a writer process runs."""

    behind = True

    def __init__(self) -> None:
        self.statements: list[Statement] = []

    def insert(
        self,
        model: type[models.Model],
        fields: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        one_statement: bool = False,  # noqa: ARG002 - another process's inserts: no thread here waits
    ) -> None:
        batch = list(rows)  # the rows as made: tuples of plain values, as `marshal` takes them
        if batch:
            self.statements.append((sqlite_insert(model, fields), batch))

    def update(self, model: type[models.Model], pk: Any, **values: Any) -> None:
        sql = sqlite_update(model, list(values))
        self.statements.append((sql, [(*values.values(), pk)]))


class ByProcess:
    """Steps written by a writer process (see the module's docstring).  Its
    errors come out as Django's: an `IntegrityError` for a constraint, an
    `OperationalError` for a locked database, a `DatabaseError` otherwise."""

    def __init__(self, process: WriterProcess) -> None:
        self._process = process

    @contextmanager
    def step(self) -> Iterator[RowSink]:
        statements = Statements()
        yield statements
        with _as_django_error():
            self._process.send(statements.statements)

    def settle(self) -> None:
        """Nothing to wait for (the caller's connection is not the writer's);
        a step that failed already is raised."""
        with _as_django_error():
            self._process.raise_failure()

    def finish(self) -> None:
        """Every step written, and the process stopped."""
        with _as_django_error():
            self._process.close()

    def abandon(self) -> None:
        """The step being written finishes, the rest are dropped, the
        process stops (if `finish` did not); its error (if any) is not
        raised (the upload's is)."""
        self._process.close(settle=False)


@contextmanager
def _as_django_error() -> Iterator[None]:
    try:
        yield
    except WriteFailed as failed:
        error = {"IntegrityError": IntegrityError, "OperationalError": OperationalError}
        raise error.get(failed.kind, DatabaseError)(failed.message) from failed


__all__ = ["ByProcess", "StepWriter", "Statements", "step_writer"]
