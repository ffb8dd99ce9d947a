"""The steps a shared batch thread's recordings hand it while it is busy go
over together (`recording_threads.HandOver`): one wake of the thread for
all of them, their results set in one call to the event loop; each step's
result or error reaches its own awaiter, in the order the steps came; and
what else was submitted to the thread meanwhile is not kept waiting."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from inspector.live import recording_threads
from inspector.live.recording_threads import HandOver


class CountedThread(ThreadPoolExecutor):
    """A one-thread executor counting what is submitted to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def thread():
    executor = CountedThread()
    yield executor
    executor.shutdown(wait=True)


async def held_first_step(
    hand_over: HandOver, ran: list[str]
) -> tuple[asyncio.Task, threading.Event]:
    """A first step, running in the thread until the event is set."""
    started, release = threading.Event(), threading.Event()

    def first() -> str:
        started.set()
        release.wait(5)
        ran.append("first")
        return "first"

    task = asyncio.create_task(hand_over.run(first))
    for _ in range(400):
        if started.is_set():
            return task, release
        await asyncio.sleep(0.005)
    raise AssertionError("the first step never ran")


def soon(awaitable):
    """`awaitable`, failing rather than hanging if it takes over 2 s."""
    return asyncio.wait_for(awaitable, 2)


async def idle(thread: CountedThread) -> None:
    """Until what the thread was given before now has run (one submit more)."""
    await soon(asyncio.wrap_future(thread.submit(lambda: None)))


def count_settles(monkeypatch) -> list[int]:
    """How many steps' outcomes each call from the thread to the running
    loop carries, from now on."""
    calls: list[int] = []
    loop = asyncio.get_running_loop()
    call_soon_threadsafe = loop.call_soon_threadsafe

    def counted(callback, *args, **kwargs):
        if callback is recording_threads._settle:
            calls.append(len(args[0]))
        return call_soon_threadsafe(callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    return calls


@pytest.mark.asyncio
async def test_steps_that_wait_for_a_busy_thread_go_over_together(thread, monkeypatch):
    settles = count_settles(monkeypatch)
    hand_over, ran = HandOver(thread), []
    first, release = await held_first_step(hand_over, ran)

    def step(name: str) -> str:
        ran.append(name)
        return name.upper()

    waiting = [asyncio.create_task(hand_over.run(step, name)) for name in "abc"]
    await asyncio.sleep(0.05)
    assert thread.submitted == 1  # the three wait: no wake of the thread each
    release.set()
    assert await soon(first) == "first"
    assert await soon(asyncio.gather(*waiting)) == ["A", "B", "C"]
    assert ran == ["first", "a", "b", "c"]
    await idle(thread)
    assert thread.submitted == 3  # one pass for the three (and `idle`'s)
    assert settles == [1, 3]  # their results in one call to the loop


@pytest.mark.asyncio
async def test_each_step_gets_its_own_result_or_error(thread):
    hand_over, ran = HandOver(thread), []
    first, release = await held_first_step(hand_over, ran)

    def fails() -> None:
        raise ValueError("this step's")

    def stops() -> None:
        raise StopIteration  # (no future can hold it)

    failing = asyncio.create_task(hand_over.run(fails))
    cancelled = asyncio.create_task(hand_over.run(lambda: "nobody waits"))
    stopping = asyncio.create_task(hand_over.run(stops))
    fine = asyncio.create_task(hand_over.run(lambda: "fine"))
    await asyncio.sleep(0.05)
    cancelled.cancel()
    release.set()
    await soon(first)
    with pytest.raises(ValueError, match="this step's"):
        await soon(failing)
    with pytest.raises(RuntimeError, match="StopIteration"):
        await soon(stopping)
    assert await soon(fine) == "fine"  # (after a step nobody awaits, and one that stopped)
    assert cancelled.cancelled()
    assert await soon(hand_over.run(lambda: "after")) == "after"  # the thread still serves


@pytest.mark.asyncio
async def test_a_pass_does_not_keep_other_work_of_the_thread_waiting(thread):
    """Steps that came during a pass go over in a pass queued behind what
    else was submitted to the thread meanwhile (a recording's opening, a
    connection's close), not in the same pass."""
    hand_over, ran = HandOver(thread), []
    first, release = await held_first_step(hand_over, ran)
    step = asyncio.create_task(hand_over.run(ran.append, "step"))
    await asyncio.sleep(0.05)
    other = asyncio.wrap_future(thread.submit(ran.append, "other"))
    release.set()
    await soon(asyncio.gather(first, step, other))
    assert ran == ["first", "other", "step"]


@pytest.mark.asyncio
async def test_a_thread_that_takes_no_more_work_fails_each_step_given_it(thread):
    hand_over = HandOver(thread)
    assert await hand_over.run(lambda: "before") == "before"
    thread.shutdown(wait=True)
    for _ in range(2):  # not only the first: none waits for a pass that never comes
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(hand_over.run(lambda: "after"), 2)
