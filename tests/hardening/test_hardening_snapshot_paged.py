"""Issue 12, item 7: a live view's snapshot (`/ws/captures/<slug>/?after=-1`) is paged and
bounded like the page: at most INSPECTOR_SNAPSHOT_FRAMES frames per message (`"more"` until
the last), each page one bounded query; a late joiner still misses nothing and sees nothing
twice; the paging stops when the socket closes."""

from __future__ import annotations

import asyncio
import threading
import time

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from inspector.asgi import application
from inspector.captures.store import store_stream
from inspector.live import consumers, snapshot
from inspector.live.recorder import SocketRecording

pytestmark = pytest.mark.django_db(transaction=True)


def chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    body["choices"][0]["finish_reason"] = finish
    return b"data: " + orjson.dumps(body) + b"\n\n"


def words(count: int) -> list[bytes]:
    return [chunk({"content": f"w{n} "}) for n in range(count)]


async def connect(path: str) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(application, path)
    assert (await comm.connect(timeout=5))[0]
    return comm


async def test_a_big_capture_s_snapshot_comes_in_bounded_pages(settings):
    settings.INSPECTOR_SNAPSHOT_FRAMES = 100
    data = b"".join(words(250)) + chunk({}, "stop") + b"data: [DONE]\n\n"
    capture = await database_sync_to_async(store_stream)(data, stream_format="sse")
    comm = await connect(f"/ws/captures/{capture.slug}/?after=-1")
    pages = []
    while not pages or pages[-1]["more"]:
        pages.append(await comm.receive_json_from(timeout=5))
    assert [page["type"] for page in pages] == ["snapshot"] * 3
    assert [len(page["frames"]) for page in pages] == [100, 100, 52]
    numbers = [frame["number"] for page in pages for frame in page["frames"]]
    assert numbers == list(range(252))
    assert all(page["outcome"] == "ok" for page in pages)
    later = await connect(f"/ws/captures/{capture.slug}/?after=180")
    page = await later.receive_json_from(timeout=5)
    assert [f["number"] for f in page["frames"]] == list(range(181, 252))
    assert page["more"] is False
    await comm.disconnect()
    await later.disconnect()


@pytest.mark.parametrize("snapshot_from", ["database", "memory"])
async def test_a_late_joiner_of_a_live_capture_gets_every_frame_once_in_order(
    settings, monkeypatch, snapshot_from
):
    """Pages of 7 frames while frames keep arriving: the live messages that arrive during
    the paging are held and forwarded without the frames a page already gave, so the
    viewer needs no deduplication of its own.  So too when the snapshot comes whole from
    the recording's memory (this process records it: `LiveCapture.snapshot`); "database"
    is a viewer on another process."""
    settings.INSPECTOR_SNAPSHOT_FRAMES = 7
    if snapshot_from == "database":
        monkeypatch.setattr(consumers, "recording_of", lambda slug: None)
    else:

        def no_page(pager):
            raise AssertionError("the snapshot was read from the database")

        monkeypatch.setattr(snapshot.SnapshotPager, "next_page", no_page)
    recording = SocketRecording.open(stream_format="sse", title="t")
    assert await recording.ready()
    header = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a":'}}
    pieces = [chunk({"tool_calls": [header]}), *words(60), chunk({}, "stop")]
    pieces.append(b"data: [DONE]\n\n")

    async def produce():
        for piece in pieces:
            recording.feed(piece, time.monotonic())
            await asyncio.sleep(0.002)
        await recording.finish()

    producing = asyncio.ensure_future(produce())
    await asyncio.sleep(0.03)
    comm = await connect(f"/ws/captures/{recording.slug}/?after=-1")
    numbers, calls, message = [], [], {"type": "snapshot"}
    while message["type"] != "finished":
        message = await comm.receive_json_from(timeout=5)
        numbers += [frame["number"] for frame in message["frames"]]
        calls += message["calls"]
    await producing
    assert numbers == list(range(len(pieces)))
    assert any("call_1" in call["html"] for call in calls)
    await comm.disconnect()


async def test_the_snapshot_stops_when_the_socket_closes(settings, monkeypatch):
    settings.INSPECTOR_SNAPSHOT_FRAMES = 10
    capture = await database_sync_to_async(store_stream)(b"".join(words(500)), stream_format="sse")
    pages_read, gate = [], threading.Event()
    next_page = snapshot.SnapshotPager.next_page

    def gated(self):
        pages_read.append(1)
        if len(pages_read) == 3:
            gate.wait(10)  # the third page is being read when the viewer leaves
        return next_page(self)

    monkeypatch.setattr(snapshot.SnapshotPager, "next_page", gated)
    comm = await connect(f"/ws/captures/{capture.slug}/?after=-1")
    assert len((await comm.receive_json_from(timeout=5))["frames"]) == 10
    await comm.receive_json_from(timeout=5)
    await comm.disconnect()
    read_when_it_left = len(pages_read)  # 2 or 3: the third may or may not have begun
    gate.set()
    await asyncio.sleep(0.3)
    # Of 50 pages: none begun after the viewer left (the one in hand may end).
    assert read_when_it_left <= len(pages_read) <= 3


@pytest.mark.parametrize("live", [True, False], ids=["live", "closed"])
def test_each_snapshot_page_reads_its_frames_in_one_query(live):
    """Whatever the page's size: rows read through `capture.frames` with `only()` each
    read their deferred `capture_id` back, one query a frame (36 -> 18 ms for 100 frames)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from inspector.live.session import LiveCapture

    recording = LiveCapture.open(stream_format="sse")
    for piece in words(120):
        recording.append(piece)
    if not live:
        recording.close()
    capture = recording.capture
    for size in (10, 100):
        pager = snapshot.SnapshotPager(capture, -1, size=size)
        with CaptureQueriesContext(connection) as queries:
            page = pager.next_page()
        assert len(page["frames"]) == size
        assert len(queries) == 1, [query["sql"] for query in queries]
    with CaptureQueriesContext(connection) as queries:
        missed = snapshot.missed_message(capture, 4, 100, limit=1000)
    assert [frame["number"] for frame in missed["frames"]] == list(range(5, 100))
    assert len(queries) == 2  # the capture's dialect now, and the frames


async def test_a_snapshot_page_of_long_rows_goes_in_messages_daphne_will_send(settings):
    """daphne closes a socket told to send more than 1 MiB at once: a page of rows of long
    frames goes in parts of at most MESSAGE_HTML characters of rows, `more` until the last."""
    from inspector.live.broadcast import MESSAGE_HTML

    long_word = "x" * 3000
    data = b"".join(chunk({"content": f"{n}{long_word}"}) for n in range(300))
    capture = await database_sync_to_async(store_stream)(data, stream_format="sse")
    comm = await connect(f"/ws/captures/{capture.slug}/?after=-1")
    messages = []
    while not messages or messages[-1]["more"]:
        messages.append(await comm.receive_json_from(timeout=5))
    assert len(messages) > 1
    assert [m["more"] for m in messages] == [True] * (len(messages) - 1) + [False]
    numbers = [frame["number"] for m in messages for frame in m["frames"]]
    assert numbers == list(range(300))
    for message in messages:
        assert sum(len(frame["html"]) for frame in message["frames"]) <= MESSAGE_HTML
    await comm.disconnect()
