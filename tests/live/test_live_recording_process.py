"""The proxy's recordings in a process of their own (`recording_process`,
`recording_worker`): what the relay feeds there is stored, published and
closed as a recording in process would; a viewer on the relay's process
gets its snapshot from there; and when that process is gone, nothing hangs
and new streams are recorded in process.

Most tests run the recording process's side in this process and event loop
(`recording_worker.serve` on the other end of a socket pair): the same code
as the child, without its start-up.  The last one starts daphne with
INSPECTOR_RECORDING_PROCESS, and so a real child (PostgreSQL + Redis only:
the in-memory channel layer reaches no other process)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.exceptions import ImproperlyConfigured
from live_helpers import chat_chunk as chunk

from inspector.asgi import application
from inspector.captures import models
from inspector.live import recording_process
from inspector.live.recorder import Recording, StoredRequest, recording_of
from inspector.live.recording_process import RecordingProcess, RemoteRecording
from inspector.live.recording_worker import serve
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
    assert remote.headers()["X-Inspector-Capture"] == remote.slug
    assert recording_of(remote.slug) is None  # no longer recording


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_here_gets_its_snapshot_from_the_recording_process(monkeypatch):
    def no_page(self):
        raise AssertionError("the snapshot was read from the database")

    pieces = stream()
    async with process_here() as (process, _):
        remote = await process.open(request(), **HOW, started=time.monotonic())
        for piece in pieces[:4]:
            remote.feed(piece, time.monotonic())
        deadline = time.monotonic() + 10
        while not await _stored_frames(remote.slug, 4) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert recording_of(remote.slug) is remote  # (the capture exists there)
        monkeypatch.setattr(SnapshotPager, "next_page", no_page)
        comm = WebsocketCommunicator(application, f"/ws/captures/{remote.slug}/?after=-1")
        assert (await comm.connect(timeout=5))[0]
        snapshot = await comm.receive_json_from(timeout=5)
        assert snapshot["type"] == "snapshot"
        assert [frame["number"] for frame in snapshot["frames"]] == [0, 1, 2, 3]
        assert [call["position"] for call in snapshot["calls"]] == [0]
        for piece in pieces[4:]:
            remote.feed(piece, time.monotonic())
        await remote.finish()
        numbers, message = [], {"type": ""}
        while message["type"] != "finished":
            message = await comm.receive_json_from(timeout=5)
            numbers += [frame["number"] for frame in message["frames"]]
        assert numbers == [4, 5, 6]
        await comm.disconnect()


async def _stored_frames(slug: str, count: int) -> bool:
    capture = await database_sync_to_async(stored)(slug)
    return capture is not None and await database_sync_to_async(capture.frames.count)() >= count


@pytest.mark.django_db(transaction=True)
async def test_when_the_relay_goes_the_recording_process_closes_its_captures():
    async with process_here() as (process, serving):
        remote = await process.open(request(), **HOW, started=time.monotonic())
        for piece in stream()[:3]:
            remote.feed(piece, time.monotonic())
        process.stop()  # as daphne's exit closes its end
        await asyncio.wait_for(serving, 10)
    capture = await database_sync_to_async(stored)(remote.slug)
    assert capture.finished is not None and capture.outcome != "live"
    assert capture.frame_count == 3


@pytest.mark.django_db(transaction=True)
async def test_when_the_recording_process_is_gone_nothing_waits_on_it(monkeypatch):
    async with process_here() as (process, serving):
        remote = await process.open(request(), **HOW, started=time.monotonic())
        remote.feed(stream()[0], time.monotonic())
        serving.cancel()  # the child dies: its end of the socket closes
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        assert await asyncio.wait_for(remote.finish(), 5) is None
        assert process.gone
        remote.feed(stream()[1], time.monotonic())  # a read after that: dropped, no error
        assert await remote.snapshot(-1) is None
        assert await process.open(request(), **HOW, started=time.monotonic()) is None
        # The server's own: new streams are recorded in process.
        monkeypatch.setattr(recording_process, "_process", process)
        assert await recording_process.open_remote(request(), **HOW, started=0.0) is None


def test_the_recording_process_needs_a_channel_layer_across_processes(settings):
    settings.REDIS_URL = ""
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        recording_process.start()
    assert recording_process._process is None


# -- a real child, under daphne ------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def _command(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="needs REDIS_URL: the child tells viewers through it"
)
def test_daphne_records_proxied_streams_in_its_recording_process(daphne_process, transactional_db):
    from live_helpers import SdkStream, Viewer, wait_for, ws_url

    from inspector.live.fake_upstream import FakeUpstream

    fake = FakeUpstream().start()
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

        def proxied(scenario: str) -> tuple[str, SdkStream]:
            client = SdkStream(server.url, scenario, [{"role": "user", "content": "hi"}])
            slug = client.slugs.get(timeout=15)
            assert slug, client.error
            return slug, client

        scenario = "ok-tool-call"
        slug, client = proxied(scenario)
        viewer = Viewer(
            ws_url(server.url, f"/ws/captures/{slug}/?after=-1"), lambda m: m["type"] == "finished"
        )
        viewer.join(30)
        client.join(30)
        assert viewer.error is None and client.error is None, (viewer.error, client.error)
        capture = wait_for(
            lambda: models.Capture.objects.filter(slug=slug).exclude(finished=None).first(),
            10,
            "the close",
        )
        frames = fake.scenario(scenario).frames
        assert capture.source == "proxy" and capture.frame_count == len(frames)
        assert bytes(capture.raw) == fake.scenario(scenario).raw
        assert viewer.messages[-1]["type"] == "finished"
        assert viewer.messages[-1]["frame_count"] == len(frames)
        seen = sorted({f["number"] for m in viewer.messages for f in m["frames"]})
        assert seen == list(range(len(frames)))
        log = server.log.read_text()
        assert "recording process is gone" not in log

        # The child dies: the next stream is relayed and recorded all the same.
        os.kill(child, signal.SIGKILL)
        slug, client = proxied(scenario)
        client.join(30)
        assert client.error is None and client.chunks
        capture = wait_for(
            lambda: models.Capture.objects.filter(slug=slug).exclude(finished=None).first(),
            10,
            "the close in process",
        )
        assert bytes(capture.raw) == fake.scenario(scenario).raw
        assert "recording process is gone" in server.log.read_text()
    finally:
        fake.stop()
