"""A process's websocket recordings write in a few threads shared by them
all (`live/recording_threads.py`): INSPECTOR_RECORDING_THREADS for batches
and as many for side lanes, each recording on the least busy; a thread's
connection is closed once no recording uses it, and a recording's close
runs apart, so a long close holds up no other recording's batches.  And
when a batch goes: a read after a quiet spell is one at once."""

from __future__ import annotations

import asyncio
import threading
import time

import orjson
import pytest
from django.db import connection, connections

from inspector.captures import models
from inspector.live import recorder, recording_threads
from inspector.live.recorder import SocketRecording
from inspector.live.recording_threads import SharedThreads
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": "'}}


def chunk(delta: dict) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def until(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return condition()


def frames_of(sent: list[dict], slug: str) -> list[int]:
    return [
        frame["number"]
        for message in sent
        if message["type"] == "capture.frames" and message["slug"] == slug
        for frame in message["frames"]
    ]


@pytest.fixture
def threads(monkeypatch, settings):
    """Fresh shared threads (none lent yet), `settings.INSPECTOR_RECORDING_THREADS` of each."""
    batches, sides = SharedThreads("recorder"), SharedThreads("recorder-side")
    monkeypatch.setattr(recording_threads, "BATCHES", batches)
    monkeypatch.setattr(recording_threads, "SIDE_LANES", sides)
    return batches, sides


@pytest.fixture
def batch_threads(monkeypatch) -> dict[str, set[int]]:
    """The threads each capture's batches ran in (their idents), by slug."""
    seen: dict[str, set[int]] = {}
    append = LiveCapture.append_reads

    def noting(live, reads):
        seen.setdefault(live.capture.slug, set()).add(threading.get_ident())
        return append(live, reads)

    monkeypatch.setattr(LiveCapture, "append_reads", noting)
    return seen


async def opened(count: int) -> list[SocketRecording]:
    recordings = [SocketRecording.open(stream_format="sse", title=f"r{n}") for n in range(count)]
    for recording in recordings:
        assert await recording.ready()
    return recordings


@pytest.mark.asyncio
async def test_recordings_take_the_least_busy_of_the_process_threads(
    settings, threads, sent, batch_threads
):
    settings.INSPECTOR_RECORDING_THREADS = 2
    batches, sides = threads
    recordings = await opened(3)
    assert batches.users() == [2, 1] and sides.users() == [2, 1]
    for recording in recordings:
        recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    for recording in recordings:
        assert await until(lambda r=recording: frames_of(sent, r.slug) == [0])
    names = [batch_threads[recording.slug] for recording in recordings]
    assert all(len(used) == 1 for used in names)  # each recording, one thread
    assert names[0] == names[2] != names[1]  # the first and third share one
    for recording in recordings:
        finished = await recording.finish()
        assert finished is not None and finished["type"] == "capture.finished"
    assert batches.users() == [0, 0] and sides.users() == [0, 0]


@pytest.mark.asyncio
async def test_a_long_close_holds_up_no_batch_of_a_recording_on_its_thread(
    monkeypatch, settings, threads, sent, batch_threads
):
    settings.INSPECTOR_RECORDING_THREADS = 1
    first, second = await opened(2)
    closing, release = threading.Event(), threading.Event()
    close = SocketRecording.close_sync

    def slow_close(recording, meta):
        if recording is first:  # (before SQLite's turn to write, which any close holds)
            closing.set()
            release.wait(10)
        return close(recording, meta)

    monkeypatch.setattr(SocketRecording, "close_sync", slow_close)
    first.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    assert await until(lambda: frames_of(sent, first.slug) == [0])
    finishing = first.finish()
    try:
        assert await until(closing.is_set)
        second.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
        assert await until(lambda: frames_of(sent, second.slug) == [0])
        assert not finishing.done()
    finally:
        release.set()
    assert (await finishing)["type"] == "capture.finished"
    assert (await second.finish())["type"] == "capture.finished"
    assert batch_threads[first.slug] == batch_threads[second.slug]  # one thread for both


@pytest.mark.asyncio
async def test_a_threads_connection_is_closed_once_no_recording_uses_it(
    monkeypatch, settings, threads, sent
):
    settings.INSPECTOR_RECORDING_THREADS = 1
    closed: list[str] = []
    close = recording_threads.close_connection

    def spy() -> None:
        closed.append(threading.current_thread().name.split("_")[0])
        close()

    monkeypatch.setattr(recording_threads, "close_connection", spy)
    monkeypatch.setattr(recorder, "close_connection", spy)
    first, second = await opened(2)
    for recording in (first, second):
        recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    await first.finish()
    # The close's own thread's connection; the batch and side threads serve `second` still.
    assert len(closed) == 1 and closed[0] not in ("recorder", "recorder-side")
    await second.finish()
    assert await until(lambda: len(closed) == 4)
    later = sorted(closed[1:])  # second's close's thread's, then both threads' (any order)
    assert later.count("recorder") == later.count("recorder-side") == 1


@pytest.mark.asyncio
async def test_a_read_after_a_quiet_spell_is_a_batch_at_once(monkeypatch, sent):
    """A batch waits FLUSH_SECONDS for more reads, except for a read that
    comes QUIET_SECONDS after the one before it (the first, or a slow
    stream's): no read is coming to share it."""
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 3.0)
    monkeypatch.setattr(recorder, "QUIET_SECONDS", 0.5)
    recording = SocketRecording.open(stream_format="sse", title="quiet")
    assert await recording.ready()
    first = time.monotonic()
    recording.feed(chunk({"tool_calls": [HEADER]}), first)
    assert await until(lambda: frames_of(sent, recording.slug) == [0], seconds=1.0)  # at once
    recording.feed(chunk({"content": "a"}), first + 0.001)  # right after it: it waits
    assert not await until(lambda: len(frames_of(sent, recording.slug)) > 1, seconds=1.0)
    finished = await recording.finish()  # (the end takes what waits)
    assert finished is not None and frames_of(sent, recording.slug) == [0, 1]
    later = SocketRecording.open(stream_format="sse", title="quiet")
    assert await later.ready()
    now = time.monotonic()
    # Arrival times a second apart (more than QUIET_SECONDS), the second one now.
    for number, (delta, arrived) in enumerate(
        [({"tool_calls": [HEADER]}, now - 1.0), ({"content": "a"}, now)]
    ):
        later.feed(chunk(delta), arrived)
        assert await until(lambda n=number: len(frames_of(sent, later.slug)) == n + 1, seconds=1.0)
    await later.finish()


@pytest.mark.asyncio
async def test_a_batch_threads_broken_connection_is_opened_again(monkeypatch, sent):
    """A thread keeps its connection while any recording uses it: when an
    error left it unusable (a database restart), the next step opens another
    rather than fail every recording on the thread."""
    recording = SocketRecording.open(stream_format="sse", title="broken")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    assert await until(lambda: frames_of(sent, recording.slug) == [0])

    def break_connection() -> None:  # as a database restart leaves it
        connection.connection.close()
        connection.errors_occurred = True

    monkeypatch.setattr(type(connections["default"]), "is_usable", lambda wrapper: False)
    await recording._in_thread(break_connection)()
    recording.feed(chunk({"content": "a"}), time.monotonic())
    assert await until(lambda: frames_of(sent, recording.slug) == [0, 1])
    finished = await recording.finish()
    assert finished is not None and finished["type"] == "capture.finished"


@pytest.mark.asyncio
async def test_a_side_lanes_broken_connection_is_opened_again(monkeypatch, sent):
    """As a batch thread's: the side lane's next step after an error left
    its connection unusable opens another, and the calls' fragments are
    written as the stream goes again (not only by the close)."""
    recording = SocketRecording.open(stream_format="sse", title="broken side")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    assert await until(lambda: stored_fragment_count(recording.slug) == 1)

    def break_connection() -> None:  # as a database restart leaves it
        connection.connection.close()
        connection.errors_occurred = True

    await asyncio.get_running_loop().run_in_executor(recording._side, break_connection)
    with monkeypatch.context() as patched:
        patched.setattr(type(connections["default"]), "is_usable", lambda wrapper: False)
        piece = {"tool_calls": [{"index": 0, "function": {"arguments": "more"}}]}
        recording.feed(chunk(piece), time.monotonic())
        assert await until(lambda: stored_fragment_count(recording.slug) == 2)  # not the close's
    finished = await recording.finish()
    assert finished is not None and finished["type"] == "capture.finished"
    assert stored_fragment_count(recording.slug) == 2


def stored_fragment_count(slug: str) -> int:
    """The capture's fragment rows, read in a thread of its own (the test's
    loop thread must not hold a connection that the side lane waits for)."""
    counted: list[int] = []

    def count() -> None:
        try:
            counted.append(models.Fragment.objects.filter(capture__slug=slug).count())
        finally:
            connections.close_all()

    thread = threading.Thread(target=count)
    thread.start()
    thread.join()
    return counted[0]
