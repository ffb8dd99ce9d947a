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

Checkpoints, on SQLite, run in a thread of their own (`WalCheckpointer`):
the connections never checkpoint the write-ahead log themselves
(`wal_autocheckpoint=0`, settings.py), since SQLite's automatic checkpoint
runs in whichever writer's commit pushes the log past 1,000 pages: copying
4 MB or more into the database file in the middle of a live batch, or in a
capture's close (22 of its 30 ms of commit for 25,000 frames).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

logger = logging.getLogger(__name__)

# How often the checkpointer looks at the log, and the size past which it checkpoints
# (SQLite's own automatic checkpoint: 1,000 pages of 4 KB).
CHECKPOINT_SECONDS = 0.25
CHECKPOINT_BYTES = 4 << 20
# The size past which it checkpoints while an upload is being written (`uploading`).
UPLOADING_CHECKPOINT_BYTES = 256 << 20


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

    def held_here(self) -> bool:
        """Whether the calling thread holds the lock."""
        return self._owner == threading.get_ident()

    def release(self) -> None:
        with self._condition:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._serving += 1
                self._condition.notify_all()


_sqlite_writes = FairLock()


class WalCheckpointer:
    """Checkpoints one SQLite database's write-ahead log from a daemon thread
    with its own connection: every CHECKPOINT_SECONDS, when the log holds
    more than CHECKPOINT_BYTES, a PASSIVE checkpoint, which never waits for
    nor blocks a writer or a reader (SQLite releases the GIL while it
    copies).  The next writer then starts the log again from its beginning,
    cut short (`journal_size_limit=0`, settings.py): its size is what it
    holds."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.wal = f"{path}-wal"
        self.checkpoints = 0
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        database: sqlite3.Connection | None = None
        while True:
            time.sleep(CHECKPOINT_SECONDS)
            try:
                if os.path.getsize(self.wal) <= _checkpoint_bytes():
                    continue
                if database is None:
                    database = sqlite3.connect(self.path, timeout=20, check_same_thread=False)
                database.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                self.checkpoints += 1
            except FileNotFoundError:  # no log yet, or the database is gone
                continue
            except sqlite3.Error:
                logger.exception("checkpointing %s failed", self.path)


_uploads = 0  # uploads of this process being written (`uploading`)
_uploads_lock = threading.Lock()


def _checkpoint_bytes() -> int:
    return UPLOADING_CHECKPOINT_BYTES if _uploads else CHECKPOINT_BYTES


@contextmanager
def uploading() -> Iterator[None]:
    """An upload's steps are being written: the checkpointer leaves the log
    until it holds UPLOADING_CHECKPOINT_BYTES (it copies it once the upload
    is written).  A checkpoint copies what the upload's steps just wrote
    into the database file while they write more: on two cores, beside an
    upload's reading and its writer process (`step_writers.py`), about a
    seventh of its time (0.2-0.4 s of a 100k-frame upload, bench/README.md,
    tenth stop).  Readers meanwhile find the pages in the log's index.  It
    holds for every write of the process meanwhile (a live recording's too)."""
    global _uploads
    with _uploads_lock:
        _uploads += 1
    try:
        yield
    finally:
        with _uploads_lock:
            _uploads -= 1


_checkpointers: dict[tuple[int, str], WalCheckpointer] = {}
_checkpointers_lock = threading.Lock()


def database_file(database: BaseDatabaseWrapper) -> str | None:
    """The SQLite database file a connection uses; None in memory (or a URI)."""
    path = str(database.settings_dict["NAME"])
    return None if _in_memory(path) else path


def _in_memory(path: str) -> bool:
    return not path or path == ":memory:" or path.startswith("file:")


def checkpointer(path: str) -> WalCheckpointer | None:
    """This process's checkpointer of the SQLite database file at `path`,
    started once; None for an in-memory database."""
    if _in_memory(path):
        return None
    key = (os.getpid(), path)  # a forked child starts its own
    found = _checkpointers.get(key)
    if found is None:
        with _checkpointers_lock:
            found = _checkpointers.get(key) or WalCheckpointer(path)
            _checkpointers[key] = found
    return found


def start_checkpoints(sender: object, connection: BaseDatabaseWrapper, **kwargs: object) -> None:
    """`connection_created`'s receiver (captures/apps.py): every process
    that opens a SQLite connection checkpoints its database's log."""
    if connection.vendor == "sqlite":
        checkpointer(str(connection.settings_dict["NAME"]))


def commit_without_waiting_for_disk() -> None:
    """This transaction's commit does not wait for the server to flush its
    log to disk (PostgreSQL's `synchronous_commit = off`, for this
    transaction only; a no-op elsewhere).

    For the intermediate steps of a long write: an upload's batches, a live
    recording's batches, the close's frame marks.  A live batch's message
    goes out after its commit: at 5,000 frames/s through the ingest
    websocket (PostgreSQL + Redis) the viewers' p99 went from 14.1-18.3 to
    11.6-13.4 ms, on a disk that flushes in 0.15 ms (a small commit 0.45-0.49
    ms waiting, 0.29-0.31 not; bench/README.md, seventh stop).  An upload's
    commits cost something else: the deferred foreign-key checks of its
    rows.  Nothing is lost that was promised: a commit that
    waits flushes the whole log before it, so the write's last transaction
    (an upload's or a close's, which stay as they are) makes every step
    before it durable.  A crash of the database server may lose the last
    steps of a write still in progress (at most about 0.6 s of them), which
    an upload then lacks as a whole and a live capture as one interrupted:
    never a half-written step (the transaction is atomic all the same).
    SQLite's `synchronous=NORMAL` (settings.py) makes the same trade for
    every commit.

    Only for a transaction of its own: in a block nested in another
    (recovery closes a capture inside its own transaction) the setting would
    hold for the outer transaction, whose commit is the write's last."""
    if connection.vendor == "postgresql" and len(connection.atomic_blocks) == 1:
        with connection.cursor() as cursor:
            no_disk_wait(cursor)


def no_disk_wait(cursor: CursorWrapper) -> None:
    """PostgreSQL: the open transaction's commit does not wait for the disk
    (see `commit_without_waiting_for_disk`; `commits_behind.py` opens its
    own transactions, outside Django's atomic blocks)."""
    cursor.execute("SET LOCAL synchronous_commit = off")


@contextmanager
def write_step() -> Iterator[None]:
    """One intermediate step of a long write: the process's turn to write,
    a transaction, and a commit that does not wait for the disk
    (`commit_without_waiting_for_disk`: the write's last commit does)."""
    with writing(), transaction.atomic():
        commit_without_waiting_for_disk()
        yield


# PostgreSQL connections whose session does not wait for the disk at commit
# (`own_connection_step`): psycopg's own connection objects, so one that Django
# opened again (its session's settings gone) is not among them.
_not_waiting: weakref.WeakSet[Any] = weakref.WeakSet()


@contextmanager
def own_connection_step() -> Iterator[None]:
    """A live recording's batch, on its writing thread's connection: a batch
    thread's (`live.recording_threads`: shared by websocket recordings, each
    step one after another, none leaving a transaction open), or a proxied
    request's (which opens the capture before the first batch and closes it
    after `own_connection_done`; nothing else writes through it meanwhile),
    or a side-lane thread's, which writes the calls' fragments
    (`recorder.Recorder._side_work`).  A recording that wrote in a batch
    thread closes on another connection (`recorder.Recorder._close`).

    On PostgreSQL the batch's statements run in autocommit, each atomic and
    committed by itself, in a session whose commits do not wait for the disk
    (`synchronous_commit = off`, set once): a batch of frames is one COPY,
    without `write_step`'s BEGIN, SET LOCAL and COMMIT, three round trips on
    which the viewers' messages wait (and, at thousands of frames a second,
    the interpreter's lock after each: bench/README.md, eleventh stop).  The
    calls' fragments are a step of their own (`LiveCapture.store_fragments`),
    and a batch's statements (its frames, the dialect once known) commit one
    by one: when one fails, as when any batch fails, the caller calls
    `CaptureWriter.lost_writes` and the close writes every call's fragments
    again.  The close's last commit waits for the disk (`own_connection_done`
    before it, or a connection of its own that never stopped waiting), and
    so makes every batch before it durable (the side lane's too: it has
    stopped, its last COPY committed, before the close begins).  Elsewhere (SQLite, inside a
    transaction, or with Django's pool of connections, which would hand the
    session's setting on to another request): `write_step`."""
    if connection.vendor != "postgresql" or connection.in_atomic_block or pooled():
        with write_step():
            yield
        return
    connection.ensure_connection()
    if connection.connection not in _not_waiting:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit = off")
        _not_waiting.add(connection.connection)
    yield


def pooled() -> bool:
    """Whether Django pools this database's connections (`OPTIONS["pool"]`,
    which needs psycopg_pool: not a dependency here, but a deployment may add it)."""
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def own_connection_done() -> None:
    """This thread's connection waits for the disk at commit again (after
    `own_connection_step`: a recording about to close)."""
    raw = connection.connection
    if raw is not None and raw in _not_waiting:
        with connection.cursor() as cursor:
            cursor.execute("RESET synchronous_commit")
        _not_waiting.discard(raw)


@contextmanager
def writing() -> Iterator[None]:
    """Hold this process's turn to write (SQLite only)."""
    if connection.vendor != "sqlite":
        yield
        return
    with writing_turn():
        yield


def holds_turn() -> bool:
    """Whether this thread holds this process's turn to write (SQLite)."""
    return _sqlite_writes.held_here()


@contextmanager
def writing_turn() -> Iterator[None]:
    """Hold this process's turn to write on SQLite, from a thread that does
    not write itself (an upload's writer process's courier, which writes
    through another process, `step_writers.ByProcess`)."""
    _sqlite_writes.acquire()
    try:
        yield
    finally:
        _sqlite_writes.release()
