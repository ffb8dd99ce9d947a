"""A child process that writes an upload's steps into a SQLite file, while
the upload's own process reads and assembles the next step.

On SQLite an upload is CPU-bound in one interpreter: reading and assembling
the frames, then SQLite's inserts of their rows, one after the other (a
thread cannot overlap them: `executemany` takes the interpreter's lock back
at every row, bench/README.md).  Here the rows of each step go to a child
process as plain values (`marshal`, through a pipe), and the child inserts
them in a transaction of its own with its own connection; the parent meanwhile
reads the next step.  The child is a bare interpreter with `sqlite3` only
(no Django: it starts in tens of milliseconds).

One thread of the parent (the courier) hands the steps over one at a time
and reads each answer: it holds the process's turn to write (`turn`,
`writes.writing`'s lock) from a step's sending to its answer, so a live
recording in the same process waits for at most one step, as it does for an
upload written in-process.  At most `IN_FLIGHT` steps wait for the courier:
the parent never runs more than that far ahead of the child.

An error the child meets (a constraint, a locked database) fails the step,
whose transaction it rolls back, and every step after it is dropped; the
parent is told at its next `send` or `settle`, as `WriteFailed`.

Run as `python -I writer_process.py DATABASE` it is the child.
"""

from __future__ import annotations

import marshal
import os
import queue
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import IO, Any

# One statement and its rows (plain values: numbers, text, None, booleans).
Statement = tuple[str, list[tuple[Any, ...]]]

# Steps handed over but not yet written, at most, before `send` waits.
IN_FLIGHT = 2

# How long the child waits for SQLite's write lock, unless told (Django's `timeout`, settings.py).
BUSY_SECONDS = 20.0

# How long a child has to open its database and say it is ready, and to end once told.
START_SECONDS = 10.0
STOP_SECONDS = 30.0

_LENGTH = struct.Struct("<Q")
_STOP = None


class WriteFailed(Exception):
    """The child could not write a step: `kind` is the sqlite3 error's class
    name ("IntegrityError", "OperationalError", ...), "ProcessLost", or
    "Unsendable" (a value `marshal` does not take)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class WriterProcess:
    """A child writing steps into the SQLite file `path` (see the module's
    docstring); `turn()` is the process's turn to write, held around each
    step.  `send` a step's statements, `settle` to wait until every step sent
    is written, `close` once (it settles first unless told not to)."""

    def __init__(
        self,
        path: str,
        turn: Callable[[], AbstractContextManager[Any]],
        busy_seconds: float = BUSY_SECONDS,
    ) -> None:
        """Start the child; raises OSError when it does not start or does
        not open the database within START_SECONDS (the caller then writes
        in-process)."""
        self._child = subprocess.Popen(
            # -I: isolated, with nothing but the standard library on its path.
            [sys.executable, "-I", __file__, path, str(busy_seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_child_environment(),
        )
        self._await_ready()
        self._closed = False
        self._turn = turn
        self._steps: queue.Queue[list[Statement] | None] = queue.Queue(maxsize=IN_FLIGHT)
        self._failed: WriteFailed | None = None
        self._courier = threading.Thread(target=self._hand_over, name="upload-writer", daemon=True)
        self._courier.start()

    def send(self, statements: list[Statement]) -> None:
        """Hand a step over (waits while IN_FLIGHT steps are still to be
        written); raises `WriteFailed` if a step before it failed."""
        self.raise_failure()
        if statements:
            self._steps.put(statements)

    def settle(self) -> None:
        """Wait until every step sent is written; raise `WriteFailed` if one failed."""
        self._steps.join()
        self.raise_failure()

    def close(self, *, settle: bool = True) -> None:
        """Stop the child, after the steps sent are written (`settle`), or
        as soon as the step in hand is (`settle=False`: the upload is being
        given up; the steps still waiting are dropped).  Once closed, a
        no-op."""
        if self._closed:
            return
        self._closed = True
        try:
            if settle:
                self.settle()
        finally:
            if not settle:
                self._drop_waiting()
            self._steps.put(_STOP)
            self._courier.join()
            self._stop_child()

    def _await_ready(self) -> None:
        """The child's first answer, None once its database is open; else
        it is stopped and OSError raised."""
        child_out = self._child.stdout
        assert child_out is not None
        try:
            ready, _, _ = select.select([child_out], [], [], START_SECONDS)
            answer = _get(child_out) if ready else "no answer"
        except (OSError, EOFError, ValueError) as error:
            answer = str(error) or type(error).__name__
        if answer is not None:
            self._stop_child()
            raise OSError(f"the writer process did not start: {answer}")

    def _stop_child(self) -> None:
        try:
            self._child.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:  # the child is gone already (its step said so)
            pass
        try:
            self._child.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._child.stdout.close()  # type: ignore[union-attr]

    def raise_failure(self) -> None:
        """Raise `WriteFailed` if a step handed over failed (waits for nothing)."""
        if self._failed is not None:
            raise self._failed

    def _drop_waiting(self) -> None:
        while True:
            try:
                self._steps.get_nowait()
            except queue.Empty:
                return
            self._steps.task_done()

    def _hand_over(self) -> None:
        """The courier: each step sent to the child and its answer read,
        under the process's turn to write."""
        child_in, child_out = self._child.stdin, self._child.stdout
        while True:
            statements = self._steps.get()
            try:
                if statements is _STOP:
                    return
                if self._failed is None:
                    self._failed = self._write(child_in, child_out, statements)
            except BaseException as error:  # noqa: BLE001 - the courier must go on taking steps
                self._failed = WriteFailed("ProcessLost", repr(error))
            finally:
                self._steps.task_done()

    def _write(
        self, child_in: IO[bytes] | None, child_out: IO[bytes] | None, statements: list[Statement]
    ) -> WriteFailed | None:
        """One step written by the child, under the turn; what went wrong, or None."""
        try:
            message = marshal.dumps(statements)  # before the turn: it is held for the writing only
        except ValueError as error:
            return WriteFailed("Unsendable", str(error))
        with self._turn():
            return _write_step(child_in, child_out, message)


def _child_environment() -> dict[str, str]:
    """What the child needs of the environment, and nothing more: the server's
    may hold secrets (a database URL, keys) that a writer of rows has no use for."""
    keep = ("PATH", "LD_LIBRARY_PATH", "TMPDIR", "SQLITE_TMPDIR")
    return {name: os.environ[name] for name in keep if name in os.environ}


def _write_step(
    child_in: IO[bytes] | None, child_out: IO[bytes] | None, message: bytes
) -> WriteFailed | None:
    """One step (its statements, marshalled) written by the child; what went
    wrong, or None."""
    assert child_in is not None and child_out is not None
    try:
        _send(child_in, message)
        answer = _get(child_out)
    except (OSError, EOFError, ValueError) as error:
        return WriteFailed("ProcessLost", str(error) or type(error).__name__)
    if answer is None:
        return None
    kind, text = answer
    return WriteFailed(kind, text)


def _put(stream: IO[bytes], value: Any) -> None:
    _send(stream, marshal.dumps(value))


def _send(stream: IO[bytes], data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _get(stream: IO[bytes]) -> Any:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the writer process ended")
    (length,) = _LENGTH.unpack(header)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError("the writer process ended mid-message")
    return marshal.loads(data)


def connect(path: str, busy_seconds: float = BUSY_SECONDS) -> sqlite3.Connection:
    """The child's connection, set as the project's are (settings.py): WAL,
    synchronous=NORMAL, no checkpoint of its own (the parent's checkpointer
    does), foreign keys on (Django's are deferred: checked at COMMIT)."""
    database = sqlite3.connect(path, timeout=busy_seconds, isolation_level=None)
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "wal_autocheckpoint=0",
        "journal_size_limit=0",
        "foreign_keys=ON",
    ):
        database.execute(f"PRAGMA {pragma}").fetchall()
    return database


def write_statements(database: sqlite3.Connection, statements: list[Statement]) -> None:
    """One step in one transaction (BEGIN IMMEDIATE, as the project's
    connections: the write lock first); rolled back on an error."""
    database.execute("BEGIN IMMEDIATE")
    try:
        for sql, rows in statements:
            database.executemany(sql, rows)
        database.execute("COMMIT")
    except BaseException:
        if database.in_transaction:  # SQLite rolls some errors back itself (a full disk)
            database.execute("ROLLBACK")
        raise


def serve(
    path: str, requests: IO[bytes], answers: IO[bytes], busy_seconds: float = BUSY_SECONDS
) -> None:
    """The child's loop: ready once the database is open (None; its error
    else), then a step read, written, answered (None, or the error's class
    name and message), until the parent closes the pipe."""
    try:
        database = connect(path, busy_seconds)
    except sqlite3.Error as error:
        _put(answers, f"{type(error).__name__}: {error}")
        return
    _put(answers, None)
    while True:
        try:
            statements = _get(requests)
        except EOFError:
            break
        try:
            write_statements(database, statements)
        except sqlite3.Error as error:
            _put(answers, (type(error).__name__, str(error)))
        else:
            _put(answers, None)
    database.close()


if __name__ == "__main__":
    # A Ctrl-C in the server's terminal reaches its whole process group: the child
    # ends when its parent closes the pipe (or dies), not halfway through a step.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer, float(sys.argv[2]))
