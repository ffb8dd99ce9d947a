"""The threads a process's recordings write in, a few shared by all of them.

A websocket recording writes its batches in one thread and its side lane
(fragments, cards) in another (`recorder.Recorder`).  With one thread of
each per recording, 20 captures at 125 frames/s on two processes ran 20
such threads in each process: every batch woke a thread of its own, which
then queued for the interpreter's lock behind the others, and a viewer's
p50 was 100 ms (bench/README.md, issue 13's fifteenth stop).  Now each
process has INSPECTOR_RECORDING_THREADS threads for batches and as many for
side lanes; a recording takes the least busy of each when it opens and
gives it back at its close.  A thread serving several recordings runs
their steps back to back, awake, instead of waking one thread a step.

A recording's steps still run one at a time and in order (its recorder
awaits each).  Django keeps a database connection per thread, so the
recordings that share a thread share its connection, one after another: a
step leaves no transaction open (a batch is autocommitted statements, or
one transaction), and a recording checks the connection when it opens
(`close_if_unusable_or_obsolete`).  It is closed once no recording uses
the thread, and closed before a step when an error left it unusable
(`mend_connection`).  What sharing costs: one recording's long step (a
long call's card) delays the steps of the others on its thread; the
longest, a long stream's close, runs apart (CLOSES).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import connection


class SharedThreads:
    """A process's threads of one kind (each a one-thread executor), lent
    to recordings: `take` the least busy, `give_back` when done."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._threads: list[ThreadPoolExecutor] = []
        self._users: dict[ThreadPoolExecutor, int] = {}

    def take(self) -> ThreadPoolExecutor:
        """The thread serving the fewest recordings now (a new one while
        there are fewer than INSPECTOR_RECORDING_THREADS)."""
        with self._lock:
            if len(self._threads) < max(1, settings.INSPECTOR_RECORDING_THREADS):
                executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._prefix)
                self._threads.append(executor)
                self._users[executor] = 0
            executor = min(self._threads, key=self._users.__getitem__)
            self._users[executor] += 1
            return executor

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        """A recording is done with `executor`'s thread; the thread's
        database connection is closed when no recording uses it (after the
        steps already queued there)."""
        with self._lock:
            self._users[executor] -= 1
            if not self._users[executor]:
                executor.submit(close_connection)

    def users(self) -> list[int]:
        """How many recordings each thread serves now."""
        with self._lock:
            return [self._users[executor] for executor in self._threads]


def close_connection() -> None:
    """Close this thread's database connection."""
    connection.close()


def mend_connection() -> None:
    """Close this thread's connection if an error left it unusable (a
    database restarted, a connection timed out): the next statement opens
    another.  Asked before each step, so a thread that always serves some
    recording does not keep a broken connection; only after an error
    (`errors_occurred`), so a step costs no round trip."""
    if connection.errors_occurred and not connection.is_usable():
        connection.close()


# A recording's batches (its frames' writes, its opening) and its side lane.
BATCHES = SharedThreads("recorder")
SIDE_LANES = SharedThreads("recorder-side")
# The closes of the recordings that wrote in BATCHES, each on its thread's
# connection, closed after it: not the loop's default executor, whose threads
# also read viewers' pages and run minimizations.
CLOSES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recorder-close")
