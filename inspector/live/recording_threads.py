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

The steps the recordings of a thread hand it meanwhile go over together
(`HandOver`): one wake of the thread for all those waiting, and one of the
event loop for their results, not one of each a step.  On a virtual
machine such a wake costs tens of microseconds of CPU (`bench/batch_costs.py`),
and with 20 captures streaming, each batch of a frame or two paid two.

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

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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


class HandOver:
    """Steps for one shared thread, handed over together: a step that
    comes while the thread is busy waits with the others that came, and
    the thread runs them all in one pass, back to back (each recording's in
    the order it gave them), then sets their results in one call to each
    event loop.  A pass that finds more steps waiting after it goes to the
    back of the thread's queue, behind what else was submitted to the
    thread (an opening, a connection's close).  What it costs: a step's
    result comes when its whole pass is done, after the steps behind it.
    Unlike `sync_to_async`, a step runs in the thread's own context, which
    the steps of every recording on the thread share: they set no context
    variable (nor need asgiref's thread-locals: none calls `async_to_sync`)."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self._executor = executor
        self._lock = threading.Lock()
        self._waiting: list[tuple[Callable[[], Any], asyncio.Future]] = []
        self._passing = False  # a pass is queued or running

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)` run in the thread: its result, or its error raised."""
        future = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiting.append((functools.partial(function, *args), future))
            if not self._passing:
                self._passing = True
                self._queue_pass()
        return await future

    def _queue_pass(self) -> None:
        """Queue a pass in the thread (under the lock); when the thread
        takes no more work (its executor was shut down), the steps waiting
        fail with that error, and the next step tries again."""
        try:
            self._executor.submit(self._pass)
        except RuntimeError as error:
            failed, self._waiting, self._passing = self._waiting, [], False
            _tell([(future, None, error) for _, future in failed])

    def _pass(self) -> None:
        with self._lock:
            steps, self._waiting = self._waiting, []
        outcomes = []
        for step, future in steps:
            try:
                outcomes.append((future, step(), None))
            except StopIteration as error:  # (a future can't hold it: as asyncio does)
                outcomes.append((future, None, RuntimeError(repr(error))))
            except BaseException as error:  # noqa: BLE001 - raised in the awaiting task
                outcomes.append((future, None, error))
        _tell(outcomes)
        with self._lock:
            if self._waiting:
                self._queue_pass()
            else:
                self._passing = False


def _tell(outcomes: list[tuple[asyncio.Future, Any, Any]]) -> None:
    """Hand steps' outcomes (future, result, error) to their event loops,
    one call to each."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, Any, Any]]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].get_loop(), []).append(outcome)
    for loop, told in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, told)
        except RuntimeError:  # its loop closed: nobody waits
            pass


def _settle(outcomes: list[tuple[asyncio.Future, Any, Any]]) -> None:
    """The results of a pass's steps, in the loop that awaits them."""
    for future, result, error in outcomes:
        if future.cancelled():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def hand_over(executor: ThreadPoolExecutor) -> HandOver:
    """The `HandOver` of one of BATCHES' threads (made once)."""
    with _HAND_OVERS_LOCK:
        if executor not in _HAND_OVERS:
            _HAND_OVERS[executor] = HandOver(executor)
        return _HAND_OVERS[executor]


_HAND_OVERS: dict[ThreadPoolExecutor, HandOver] = {}
_HAND_OVERS_LOCK = threading.Lock()


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
