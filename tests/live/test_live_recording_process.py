"""The proxy's and the ingest socket's recordings in a process of their own
(`recording_process`, `recording_worker`): what the relay or the socket feeds
there is stored, published and closed as a recording in process would; a
viewer on the relay's process gets its snapshot from there; and when that
process is gone, nothing hangs and new streams are recorded in process.

Most tests run the recording process's side in this process and event loop
(`recording_worker.serve` on the other end of a socket pair): the same code
as the child, without its start-up.  The last one starts daphne with
INSPECTOR_RECORDING_PROCESS, and so a real child (PostgreSQL + Redis only:
the in-memory channel layer reaches no other process)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.exceptions import ImproperlyConfigured
from live_helpers import chat_chunk as chunk

from inspector.asgi import application
from inspector.assembly import AUTO_DIALECT
from inspector.captures import models
from inspector.live import consumers, recording_process
from inspector.live.recorder import Recording, SocketRecording, StoredRequest, recording_of
from inspector.live.recording_process import (
    RecordingProcess,
    RemoteRecording,
    RemoteSocketRecording,
)
from inspector.live.recording_worker import ChildRecording, serve
from inspector.live.snapshot import SnapshotPager

SECRET = "sk-test-0123456789abcdef"
HEAD = {"index": 0, "id": "call_a", "function": {"name": "grep", "arguments": ""}}


def stream() -> list[bytes]:
    """A call in pieces, one piece quoting the request's secret, a finish, [DONE]."""
    return [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [HEAD]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}),
        chunk({"content": f"your key {SECRET} works"}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


def request() -> StoredRequest:
    return StoredRequest(upstream="fake", model="m", source_url="http://fake/v1", secrets=[SECRET])


HOW = {"stream_format": "sse", "http_status": 200}
SOCKET_HOW = {"stream_format": "sse", "title": "pushed", "dialect": AUTO_DIALECT}


@contextlib.asynccontextmanager
async def process_here():
    """A `RecordingProcess` whose other end is `serve` in this event loop."""
    ours, theirs = socket.socketpair()
    process = RecordingProcess(ours)
    serving = asyncio.create_task(serve(theirs))
    try:
        yield process, serving
    finally:
        process.stop()
        with contextlib.suppress(asyncio.CancelledError):  # (a test that killed it)
            await asyncio.wait_for(serving, 10)


def stored(slug: str) -> models.Capture | None:
    return models.Capture.objects.filter(slug=slug).first()


async def until_stored(slug: str, count: int) -> bool:
    """Wait (10 s at most) until capture `slug` has `count` frames stored."""
    deadline = time.monotonic() + 10
    while not await _stored_frames(slug, count) and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    return await _stored_frames(slug, count)


def no_page(pager):
    raise AssertionError("the snapshot was read from the database")


async def viewer_of(slug: str) -> tuple[WebsocketCommunicator, dict]:
    """A viewer joined on this process, and its first message."""
    viewer = WebsocketCommunicator(application, f"/ws/captures/{slug}/?after=-1")
    assert (await viewer.connect(timeout=5))[0]
    return viewer, await viewer.receive_json_from(timeout=5)


async def frames_until_finished(viewer: WebsocketCommunicator) -> list[int]:
    """The frame numbers of the viewer's messages, up to the closing one."""
    numbers, message = [], {"type": ""}
    while message["type"] != "finished":
        message = await viewer.receive_json_from(timeout=5)
        numbers += [frame["number"] for frame in message["frames"]]
    return numbers


@pytest.mark.django_db(transaction=True)
async def test_a_stream_recorded_there_is_stored_as_one_recorded_here():
    pieces = stream()
    async with process_here() as (process, _):
        remote = await process.open(request(), **HOW, started=time.monotonic())
        assert isinstance(remote, RemoteRecording)
        for piece in pieces:
            remote.feed(piece, time.monotonic())
        closing = await asyncio.wait_for(remote.finish(), 10)
    here = Recording.open(request(), **HOW, started=time.monotonic())
    for piece in pieces:
        here.feed(piece, time.monotonic())
    await asyncio.wait_for(here.finish(), 10)

    there, mine = [await database_sync_to_async(stored)(r.slug) for r in (remote, here)]
    assert closing is not None and closing["slug"] == remote.slug
    assert closing["outcome"] == "ok" == there.outcome
    assert there.source == "proxy" and there.upstream == "fake" and there.finished is not None
    assert there.frame_count == len(pieces) == mine.frame_count
    assert bytes(there.raw) == bytes(mine.raw)
    assert SECRET.encode() not in bytes(there.raw)  # scrubbed there, as here
    assert b"your key " in bytes(there.raw)
    assert recording_of(remote.slug) is None  # no longer recording


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_here_gets_its_snapshot_from_the_recording_process(monkeypatch):
    pieces = stream()
    async with process_here() as (process, _):
        remote = await process.open(request(), **HOW, started=time.monotonic())
        for piece in pieces[:4]:
            remote.feed(piece, time.monotonic())
        assert await until_stored(remote.slug, 4)
        assert recording_of(remote.slug) is remote  # (the capture exists there)
        monkeypatch.setattr(SnapshotPager, "next_page", no_page)
        comm, snapshot = await viewer_of(remote.slug)
        assert snapshot["type"] == "snapshot"
        assert [frame["number"] for frame in snapshot["frames"]] == [0, 1, 2, 3]
        assert [call["position"] for call in snapshot["calls"]] == [0]
        for piece in pieces[4:]:
            remote.feed(piece, time.monotonic())
        await remote.finish()
        assert await frames_until_finished(comm) == [4, 5, 6]
        await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_an_ingest_sockets_stream_recorded_there_is_stored_as_one_recorded_here():
    pieces = [piece.replace(SECRET.encode(), b"a key") for piece in stream()]
    async with process_here() as (process, _):
        remote = await process.open_socket(**SOCKET_HOW)
        assert isinstance(remote, RemoteSocketRecording)
        assert await asyncio.wait_for(remote.ready(), 10)
        assert remote.url.endswith(f"/{remote.slug}/")
        for piece in pieces:
            remote.feed(piece, time.monotonic())
        closing = await asyncio.wait_for(remote.finish(), 10)
    here = SocketRecording.open(**SOCKET_HOW)
    for piece in pieces:
        here.feed(piece, time.monotonic())
    await asyncio.wait_for(here.finish(), 10)

    there, mine = [await database_sync_to_async(stored)(r.slug) for r in (remote, here)]
    assert closing is not None and closing["outcome"] == "ok" == there.outcome
    assert (there.source, there.title) == ("ingest", "pushed") == (mine.source, mine.title)
    assert there.frame_count == len(pieces) == mine.frame_count
    assert bytes(there.raw) == bytes(mine.raw) == b"".join(pieces)
    assert recording_of(remote.slug) is None  # no longer recording


@pytest.mark.django_db(transaction=True)
async def test_the_ingest_socket_records_in_the_recording_process_and_its_viewer_watches(
    monkeypatch,
):
    """With a recording process, `/ws/ingest/` hands its stream there: nothing
    is recorded in daphne's process, and a viewer there gets its snapshot
    from the recording process's memory, then every later frame once."""

    class NotHere:
        @staticmethod
        def open(**how):
            raise AssertionError("recorded in the socket's process")

    pieces = stream()
    async with process_here() as (process, _):
        monkeypatch.setattr(recording_process, "_process", process)
        monkeypatch.setattr(consumers, "SocketRecording", NotHere)
        ingest = WebsocketCommunicator(application, "/ws/ingest/")
        assert (await ingest.connect(timeout=5))[0]
        await ingest.send_json_to({"open": {"format": "sse", "title": "pushed"}})
        opened = await ingest.receive_json_from(timeout=10)
        assert opened["type"] == "opened", opened
        slug = opened["slug"]
        assert isinstance(recording_of(slug), RemoteSocketRecording)
        for piece in pieces[:4]:
            await ingest.send_to(bytes_data=piece)
        assert await until_stored(slug, 4)
        monkeypatch.setattr(SnapshotPager, "next_page", no_page)
        viewer, snapshot = await viewer_of(slug)
        assert snapshot["type"] == "snapshot"
        assert [frame["number"] for frame in snapshot["frames"]] == [0, 1, 2, 3]
        for piece in pieces[4:]:
            await ingest.send_to(bytes_data=piece)
        await ingest.send_json_to({"close": True})
        closed = await ingest.receive_json_from(timeout=10)
        assert (closed["type"], closed["slug"], closed["outcome"]) == ("closed", slug, "ok")
        assert await ingest.receive_nothing(timeout=0.2)  # no error, no 1011 after a close
        assert await frames_until_finished(viewer) == [4, 5, 6]
        await viewer.disconnect()
        await ingest.disconnect()
    capture = await database_sync_to_async(stored)(slug)
    assert capture.source == "ingest" and capture.frame_count == len(pieces)
    assert capture.title == "pushed"
    assert SECRET.encode() in bytes(capture.raw)  # an ingest socket's bytes are its own: kept


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("failing", ["open", "open_capture"])
async def test_an_ingest_socket_whose_capture_fails_to_open_there_is_told(monkeypatch, failing):
    """Told, and nothing of it kept on either side: its tag answered and
    forgotten, its recording there ended (whether it failed to start, or to
    create its capture)."""
    from inspector.live import recording_worker

    def fails(*args, **kwargs):
        raise RuntimeError("no capture")

    monkeypatch.setattr(recording_worker.ChildSocketRecording, failing, fails)
    workers = []
    start_worker = recording_worker.Worker.__init__

    def noting(worker, writer):
        start_worker(worker, writer)
        workers.append(worker)

    monkeypatch.setattr(recording_worker.Worker, "__init__", noting)
    async with process_here() as (process, serving):
        monkeypatch.setattr(recording_process, "_process", process)
        ingest = WebsocketCommunicator(application, "/ws/ingest/")
        assert (await ingest.connect(timeout=5))[0]
        await ingest.send_json_to({"open": {"format": "sse"}})
        answer = await ingest.receive_json_from(timeout=10)
        assert answer == {"type": "error", "error": "the capture could not be stored"}
        assert process._recordings == {} and workers[0]._recordings == {}
        await ingest.disconnect()
        assert not serving.done() and not process.gone
    assert await database_sync_to_async(models.Capture.objects.count)() == 0


async def next_message(sock: socket.socket) -> tuple[int, int, bytes]:
    """The next message the daphne process sent on `sock` (non-blocking)."""
    loop = asyncio.get_running_loop()

    async def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            data += await asyncio.wait_for(loop.sock_recv(sock, size - len(data)), 5)
        return data

    kind, tag, length = recording_process._HEADER.unpack(
        await exactly(recording_process._HEADER.size)
    )
    return kind, tag, await exactly(length)


@pytest.mark.django_db(transaction=True)
async def test_an_ingest_socket_is_told_and_closed_when_the_recording_process_dies(monkeypatch):
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    process = RecordingProcess(ours)
    monkeypatch.setattr(recording_process, "_process", process)
    ingest = WebsocketCommunicator(application, "/ws/ingest/")
    assert (await ingest.connect(timeout=5))[0]
    await ingest.send_json_to({"open": {"format": "jsonl", "title": "pushed"}})
    # The other end: asked to record the socket's stream, it opens the capture.
    kind, tag, body = await next_message(theirs)
    opening = pickle.loads(body)
    assert kind == recording_process.OPEN and opening["kind"] == recording_process.SOCKET
    assert (opening["title"], opening["stream_format"]) == ("pushed", "jsonl")
    theirs.sendall(recording_process.message(recording_process.OPENED, tag, pickle.dumps(True)))
    opened = await ingest.receive_json_from(timeout=5)
    assert (opened["type"], opened["slug"]) == ("opened", opening["slug"])
    await ingest.send_to(bytes_data=b'{"a": 1}\n')
    kind, fed, body = await next_message(theirs)
    assert (kind, fed) == (recording_process.FEED, tag) and body.endswith(b'{"a": 1}\n')
    theirs.close()  # then the process dies
    told = await ingest.receive_json_from(timeout=5)
    assert told == {
        "type": "error",
        "error": "the recording process is gone: the capture holds what it stored",
    }
    assert await ingest.receive_output(timeout=5) == {"type": "websocket.close", "code": 1011}
    assert process.gone
    await ingest.disconnect()


async def _stored_frames(slug: str, count: int) -> bool:
    capture = await database_sync_to_async(stored)(slug)
    return capture is not None and await database_sync_to_async(capture.frames.count)() >= count


@pytest.mark.django_db(transaction=True)
async def test_when_the_relay_goes_the_recording_process_closes_its_captures_first():
    """Daphne's end closes (it stopped, or died): the process ends only once
    every capture is closed, those it was asked to close included."""
    for asked_to_close in (False, True):
        async with process_here() as (process, serving):
            remote = await process.open(request(), **HOW, started=time.monotonic())
            for piece in stream()[:3]:
                remote.feed(piece, time.monotonic())
            if asked_to_close:
                remote.finish()
            process.stop()  # as daphne's exit closes its end (a close under way, or not)
            await asyncio.wait_for(serving, 10)
            capture = await database_sync_to_async(stored)(remote.slug)
            assert capture.finished is not None and capture.outcome != "live"
            assert capture.frame_count == 3


@pytest.mark.django_db(transaction=True)
async def test_each_stream_there_writes_on_its_own_while_another_closes(monkeypatch):
    """One stream's close (a big capture's takes seconds) holds up no other
    stream's frames: each recording writes in a thread of its own."""
    held, release = threading.Event(), threading.Event()
    close_sync = ChildRecording.close_sync

    def slow_close(self, meta):
        held.set()
        release.wait(10)
        return close_sync(self, meta)

    monkeypatch.setattr(ChildRecording, "close_sync", slow_close)
    async with process_here() as (process, _):
        closing = await process.open(request(), **HOW, started=time.monotonic())
        going = await process.open(request(), **HOW, started=time.monotonic())
        closing.feed(stream()[0], time.monotonic())
        finished = closing.finish()
        try:
            assert await asyncio.to_thread(held.wait, 10)
            for piece in stream()[:3]:
                going.feed(piece, time.monotonic())
            assert await until_stored(going.slug, 3)
            assert not finished.done()
        finally:
            release.set()
        assert (await asyncio.wait_for(finished, 10))["outcome"] is not None
        await asyncio.wait_for(going.finish(), 10)


@pytest.mark.django_db(transaction=True)
async def test_when_the_recording_process_dies_nothing_waits_on_it(monkeypatch):
    ours, theirs = socket.socketpair()
    process = RecordingProcess(ours)  # nothing serves the other end
    remote = await process.open(request(), **HOW, started=time.monotonic())
    remote.feed(stream()[0], time.monotonic())
    finishing = remote.finish()
    snapshot = asyncio.ensure_future(remote.snapshot(-1))
    pushed = await process.open_socket(**SOCKET_HOW)
    opening = asyncio.ensure_future(pushed.ready())
    await asyncio.sleep(0.05)
    assert not finishing.done() and not snapshot.done()  # (waiting for answers)
    assert not opening.done()
    theirs.close()  # the process dies
    assert await asyncio.wait_for(finishing, 5) is None
    assert await asyncio.wait_for(snapshot, 5) is None
    assert await asyncio.wait_for(opening, 5) is False  # the socket is told: not stored
    assert process.gone
    remote.feed(stream()[1], time.monotonic())  # a read after that: dropped, no error
    assert await process.open(request(), **HOW, started=time.monotonic()) is None
    assert await process.open_socket(**SOCKET_HOW) is None
    # The server's own: new streams are recorded in process.
    monkeypatch.setattr(recording_process, "_process", process)
    assert await recording_process.open_remote(request(), **HOW, started=0.0) is None
    assert await recording_process.open_remote_socket(**SOCKET_HOW) is None


@pytest.mark.django_db(transaction=True)
async def test_a_snapshot_the_process_does_not_answer_in_time_sends_the_viewer_to_the_database(
    monkeypatch,
):
    monkeypatch.setattr(recording_process, "SNAPSHOT_SECONDS", 0.2)
    ours, theirs = socket.socketpair()
    process = RecordingProcess(ours)  # the other end: alive, busy, silent
    try:
        remote = await process.open(request(), **HOW, started=time.monotonic())
        started = time.monotonic()
        assert await asyncio.wait_for(remote.snapshot(-1), 5) is None
        assert 0.2 <= time.monotonic() - started < 2
        # Its answer, when it comes at last, finds no one waiting; the process is kept.
        late = recording_process.message(recording_process.SNAPSHOT_TAKEN, 2, b"\x80\x04N.")
        theirs.sendall(late)
        await asyncio.sleep(0.05)
        assert not process.gone and recording_of(remote.slug) is remote
    finally:
        process.stop()
        theirs.close()


@pytest.mark.django_db(transaction=True)
async def test_a_stream_that_fails_to_open_there_is_answered_and_the_next_records(monkeypatch):
    real_open = ChildRecording.open
    calls = []

    def open_once_failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("no capture")
        return real_open(*args, **kwargs)

    monkeypatch.setattr(ChildRecording, "open", open_once_failing)
    async with process_here() as (process, serving):
        failed = await process.open(request(), **HOW, started=time.monotonic())
        failed.feed(stream()[0], time.monotonic())
        deadline = time.monotonic() + 5
        while recording_of(failed.slug) is failed and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert recording_of(failed.slug) is None  # told it failed: no viewer asks there
        assert await asyncio.wait_for(failed.finish(), 5) is None
        remote = await process.open(request(), **HOW, started=time.monotonic())
        for piece in stream():
            remote.feed(piece, time.monotonic())
        closing = await asyncio.wait_for(remote.finish(), 10)
        assert closing is not None and closing["outcome"] == "ok"
        assert not serving.done() and not process.gone
    assert await database_sync_to_async(stored)(failed.slug) is None


def test_the_recording_process_needs_redis_and_postgresql(settings, monkeypatch):
    settings.REDIS_URL = ""
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        recording_process.start()
    settings.REDIS_URL = "redis://127.0.0.1:6379/9"
    monkeypatch.setattr(recording_process, "connection", type("C", (), {"vendor": "sqlite"}))
    with pytest.raises(ImproperlyConfigured, match="PostgreSQL"):
        recording_process.start()
    assert recording_process._process is None


# -- a real child, under daphne ------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def _command(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


ON_POSTGRESQL_AND_REDIS = bool(os.environ.get("REDIS_URL")) and os.environ.get(
    "DATABASE_URL", ""
).startswith("postgres")


@pytest.mark.skipif(not ON_POSTGRESQL_AND_REDIS, reason="needs PostgreSQL and REDIS_URL")
def test_daphne_records_proxied_and_pushed_streams_in_its_recording_process(
    daphne_process, transactional_db
):
    from live_helpers import SdkStream, Viewer, wait_for, ws_url

    from inspector.live.fake_upstream import FakeUpstream

    fake = FakeUpstream().start()
    scenario = "ok-tool-call"  # 120 ms between frames
    expected = fake.scenario(scenario)
    try:
        server = daphne_process(
            {"INSPECTOR_UPSTREAMS": f"fake={fake.url}", "INSPECTOR_RECORDING_PROCESS": "1"}
        )
        children = wait_for(
            lambda: [c for c in _children(server.proc.pid) if "record_relays" in _command(c)],
            20,
            "the recording process",
        )
        assert len(children) == 1
        child = children[0]

        def proxied() -> tuple[str, SdkStream]:
            client = SdkStream(server.url, scenario, [{"role": "user", "content": "hi"}])
            slug = client.slugs.get(timeout=15)
            assert slug, client.error
            return slug, client

        def closed(slug: str) -> models.Capture:
            return wait_for(
                lambda: models.Capture.objects.filter(slug=slug).exclude(finished=None).first(),
                15,
                f"the close of {slug}",
            )

        # The child records: while it is stopped, no capture appears, and once it goes
        # on, the capture is written whole.
        os.kill(child, signal.SIGSTOP)
        try:
            slug, client = proxied()
            time.sleep(1.5)  # (the stream's frames all relayed meanwhile)
            assert not models.Capture.objects.filter(slug=slug).exists()
        finally:
            os.kill(child, signal.SIGCONT)
        client.join(30)
        assert client.error is None and client.chunks
        capture = closed(slug)
        assert capture.source == "proxy" and capture.frame_count == len(expected.frames)
        assert bytes(capture.raw) == expected.raw

        # A viewer on daphne's process watches a stream the child records.
        slug, client = proxied()
        viewer = Viewer(
            ws_url(server.url, f"/ws/captures/{slug}/?after=-1"), lambda m: m["type"] == "finished"
        )
        viewer.join(30)
        client.join(30)
        assert viewer.error is None and client.error is None, (viewer.error, client.error)
        assert viewer.messages[0]["type"] == "snapshot"
        assert viewer.messages[-1]["type"] == "finished"
        assert viewer.messages[-1]["frame_count"] == len(expected.frames)
        numbers = [f["number"] for m in viewer.messages for f in m["frames"]]
        assert sorted(set(numbers)) == list(range(len(expected.frames)))
        assert bytes(closed(slug).raw) == expected.raw
        assert "recording process is gone" not in server.log.read_text()

        # An ingest socket's stream is recorded by the child too: while it is stopped,
        # none of the stream's frames is stored; once it goes on, the capture is whole.
        from websockets.sync.client import connect

        pushed = expected.raw
        with connect(ws_url(server.url, "/ws/ingest/"), open_timeout=10) as ingest:
            ingest.send('{"open": {"format": "sse", "title": "pushed"}}')
            opened = json.loads(ingest.recv(timeout=15))
            assert opened["type"] == "opened", opened
            os.kill(child, signal.SIGSTOP)
            try:
                ingest.send(pushed)
                ingest.send('{"close": true}')
                time.sleep(1.0)
                capture = models.Capture.objects.get(slug=opened["slug"])
                assert capture.frames.count() == 0 and capture.finished is None
            finally:
                os.kill(child, signal.SIGCONT)
            answer = json.loads(ingest.recv(timeout=15))
        assert (answer["type"], answer["outcome"]) == ("closed", "ok"), answer
        capture = closed(opened["slug"])
        assert capture.source == "ingest" and bytes(capture.raw) == pushed

        # The child dies: the next stream is relayed and recorded in process.
        os.kill(child, signal.SIGKILL)
        wait_for(lambda: "exited with code -9" in server.log.read_text(), 15, "the death noticed")
        slug, client = proxied()
        client.join(30)
        assert client.error is None and client.chunks
        assert bytes(closed(slug).raw) == expected.raw
    finally:
        fake.stop()
