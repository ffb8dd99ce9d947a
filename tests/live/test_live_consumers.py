"""Websocket consumers over the real ASGI routing and the configured channel
layer (in-memory, or Redis when REDIS_URL is set)."""

import asyncio
import time

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from live_helpers import chat_chunk as chunk

from inspector.asgi import application
from inspector.captures import models
from inspector.live import broadcast
from inspector.live.recorder import SocketRecording
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db(transaction=True)


def text_stream(words):
    return [chunk({"content": w}) for w in words] + [chunk({}, "stop"), b"data: [DONE]\n\n"]


async def connect(path):
    comm = WebsocketCommunicator(application, path)
    connected, _ = await comm.connect(timeout=5)
    assert connected
    return comm


async def receive_frames_until_finished(comm):
    numbers, finished = [], None
    while finished is None:
        message = await comm.receive_json_from(timeout=5)
        numbers += [f["number"] for f in message.get("frames", [])]
        if message["type"] == "finished":
            finished = message
    return numbers, finished


async def recording() -> SocketRecording:
    """The recorder every streaming intake uses, with its capture created."""
    recording = SocketRecording.open(stream_format="sse", title="t")
    assert await recording.ready()
    return recording


async def fed(recording: SocketRecording, piece: bytes) -> None:
    """Feed a piece and wait until the recorder assembled it; it may not be
    stored or published yet (see `no_frames_for`)."""
    recording.feed(piece, time.monotonic())
    while recording.live.strict.frames == 0 or recording._queue.qsize():
        await asyncio.sleep(0.005)


async def no_frames_for(comm, seconds: float) -> bool:
    """Whether no frame reached the viewer for `seconds`.  `fed` returns once
    the piece is assembled, maybe before its message went out: if that
    message comes after the viewer's snapshot showed its frame, the viewer
    gets only its notes (the dialect, decided by that frame), no frame."""
    while not await comm.receive_nothing(timeout=seconds):
        if (await comm.receive_json_from())["frames"]:
            return False
    return True


def losing(send, which):
    """`broadcast.send` that loses the messages `which` picks, as a layer may."""

    async def lossy(group, message):
        if not which(message):
            await send(group, message)

    return lossy


def delaying(send, seconds: float, which):
    """`broadcast.send` holding back the messages `which` picks by `seconds`."""

    async def delayed(group, message):
        if which(message):
            await asyncio.sleep(seconds)
        await send(group, message)

    return delayed


def with_frames(low: int, high: int):
    """Picks the messages carrying a frame numbered from `low` to `high`."""
    return lambda message: any(low <= f["number"] <= high for f in message.get("frames", []))


async def stored(recorder: SocketRecording, count: int) -> None:
    """Wait until the recorder's capture holds `count` frames."""
    frames = database_sync_to_async(lambda: recorder.live.capture.frames.count())
    while await frames() < count:
        await asyncio.sleep(0.005)


async def finish_with(recorder: SocketRecording, comm, pieces: list[bytes]) -> list[dict]:
    """Feed the rest of the stream, close the capture, and read the viewer's
    messages up to its closing."""
    for piece in pieces:
        recorder.feed(piece, time.monotonic())
    await recorder.finish()
    return await messages_until_finished(comm)


def frame_numbers(messages: list[dict]) -> list[int]:
    return [frame["number"] for message in messages for frame in message["frames"]]


async def messages_until_finished(comm) -> list[dict]:
    messages: list[dict] = []
    while not messages or messages[-1]["type"] != "finished":
        messages.append(await comm.receive_json_from(timeout=5))
    return messages


async def test_a_viewer_gets_a_snapshot_then_live_frames_then_the_outcome():
    recorder = await recording()
    pieces = text_stream(["a", "b", "c"])
    await fed(recorder, pieces[0])

    comm = await connect(f"/ws/captures/{recorder.slug}/")
    first = await comm.receive_json_from(timeout=5)
    assert first["type"] == "snapshot" and first["outcome"] == "live"
    assert [f["number"] for f in first["frames"]] == [0]

    for piece in pieces[1:]:
        recorder.feed(piece, time.monotonic())
    await recorder.finish()
    numbers, finished = await receive_frames_until_finished(comm)
    assert numbers == [1, 2, 3, 4]
    assert finished["outcome"] == "ok"
    await comm.disconnect()


async def test_a_late_joiner_misses_nothing_and_sees_nothing_twice():
    recorder = await recording()
    pieces = text_stream([str(n) for n in range(40)])

    async def produce():
        for piece in pieces:
            recorder.feed(piece, time.monotonic())
            await asyncio.sleep(0.001)
        await recorder.finish()

    producing = asyncio.ensure_future(produce())
    await asyncio.sleep(0.01)
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    snapshot = await comm.receive_json_from(timeout=5)
    seen = [f["number"] for f in snapshot["frames"]]
    numbers, _ = await receive_frames_until_finished(comm)
    await producing
    shown = seen + [n for n in numbers if n > (seen[-1] if seen else -1)]
    assert shown == list(range(len(pieces)))
    await comm.disconnect()


async def test_a_snapshot_of_a_live_capture_carries_its_calls_state():
    live = await database_sync_to_async(LiveCapture.open)(stream_format="sse")
    header = {"index": 0, "id": "call_9", "function": {"name": "grep", "arguments": '{"q":'}}
    await database_sync_to_async(live.append)(chunk({"tool_calls": [header]}))
    comm = await connect(f"/ws/captures/{live.slug}/?after=-1")
    snapshot = await comm.receive_json_from(timeout=5)
    (call,) = snapshot["calls"]
    assert call["position"] == 0 and "call_9" in call["html"] and ">grep<" in call["html"]
    assert "<pre>{&quot;q&quot;:</pre>" in call["html"]
    assert '<span class="chip muted">depth 1</span>' in call["html"]
    await comm.disconnect()


async def test_a_snapshot_carries_a_refusal_decided_before_the_viewer_joined():
    live = await database_sync_to_async(LiveCapture.open)(stream_format="sse")
    for index, call_id in ((0, "call_a"), (0, "call_b")):  # two unsettled calls on index 0
        header = {"index": index, "id": call_id, "function": {"name": "grep", "arguments": ""}}
        await database_sync_to_async(live.append)(chunk({"tool_calls": [header]}))
    fragment = {"index": 0, "function": {"arguments": '{"q": 1}'}}  # which one? refused
    await database_sync_to_async(live.append)(chunk({"tool_calls": [fragment]}))
    comm = await connect(f"/ws/captures/{live.slug}/?after=-1")
    snapshot = await comm.receive_json_from(timeout=5)
    assert snapshot["outcome"] == "live"
    assert snapshot["refusal"]["code"] == "AMBIGUOUS_CONTINUATION"
    assert snapshot["refusal"]["frame"] == 2
    await comm.disconnect()


async def test_an_unknown_capture_is_refused():
    comm = WebsocketCommunicator(application, "/ws/captures/nope/")
    connected, code = await comm.connect(timeout=5)
    assert not connected and code == 4404


async def test_the_ingest_socket_records_a_stream_and_viewers_see_it():
    lister = await connect("/ws/captures/")
    ingest = await connect("/ws/ingest/")
    await ingest.send_json_to({"open": {"title": "from a script", "format": "sse"}})
    opened = await ingest.receive_json_from(timeout=5)
    assert opened["type"] == "opened" and opened["url"] == f"/c/{opened['slug']}/"
    assert (await lister.receive_json_from(timeout=5))["outcome"] == "live"

    data = b"".join(text_stream(["hello", " world"]))
    for start in range(0, len(data), 7):  # cut anywhere, even mid-frame
        await ingest.send_to(bytes_data=data[start : start + 7])
    await ingest.send_json_to({"close": True})
    closed = await ingest.receive_json_from(timeout=5)
    assert closed == {"type": "closed", "slug": opened["slug"], "outcome": "ok", "refusal": None}
    assert (await lister.receive_json_from(timeout=5))["outcome"] == "ok"

    capture = await database_sync_to_async(models.Capture.objects.get)(slug=opened["slug"])
    assert bytes(capture.raw) == data
    assert (capture.source, capture.title, capture.frame_count) == ("ingest", "from a script", 4)
    await ingest.disconnect()
    await lister.disconnect()


async def test_an_ingest_socket_that_drops_keeps_its_capture_refused_incomplete():
    ingest = await connect("/ws/ingest/")
    await ingest.send_json_to({"open": {"format": "sse"}})
    slug = (await ingest.receive_json_from(timeout=5))["slug"]
    await ingest.send_to(bytes_data=text_stream(["partial"])[0])
    await ingest.disconnect()
    capture = await database_sync_to_async(models.Capture.objects.get)(slug=slug)
    assert (capture.outcome, capture.refusal_code, capture.frame_count) == (
        "refused",
        "INCOMPLETE_STREAM",
        1,
    )


async def test_the_ingest_socket_takes_no_channel_of_the_layer(monkeypatch):
    """Nothing is ever sent to an ingest socket's channel: its consumer reads
    only its socket (no channel of the layer, no second task waited on with
    every frame), yet handles every message in order."""
    layer = get_channel_layer()
    made = []
    original = layer.new_channel

    async def new_channel(*args, **kwargs):
        name = await original(*args, **kwargs)
        made.append(name)
        return name

    monkeypatch.setattr(layer, "new_channel", new_channel)
    viewer_channels = len(made)
    ingest = await connect("/ws/ingest/")
    await ingest.send_json_to({"open": {"format": "sse"}})
    slug = (await ingest.receive_json_from(timeout=5))["slug"]
    data = b"".join(text_stream(["one", " two", " three"]))
    for start in range(0, len(data), 5):
        await ingest.send_to(bytes_data=data[start : start + 5])
    await ingest.send_json_to({"close": True})
    assert (await ingest.receive_json_from(timeout=5))["outcome"] == "ok"
    await ingest.disconnect()
    assert len(made) == viewer_channels  # the ingest socket made none
    viewer = await connect(f"/ws/captures/{slug}/")
    assert len(made) == viewer_channels + 1  # a viewer does: it is sent batches
    await viewer.disconnect()
    capture = await database_sync_to_async(models.Capture.objects.get)(slug=slug)
    assert bytes(capture.raw) == data and capture.frame_count == 5


async def test_the_ingest_socket_explains_bad_messages():
    ingest = await connect("/ws/ingest/")
    await ingest.send_to(bytes_data=b"data: early\n\n")
    assert (await ingest.receive_json_from(timeout=5))["error"] == "open a capture first"
    await ingest.send_to(text_data="not json")
    assert "JSON" in (await ingest.receive_json_from(timeout=5))["error"]
    await ingest.send_json_to({"open": {"format": "har"}})
    assert (await ingest.receive_json_from(timeout=5))["error"] == "format is sse or jsonl"
    await ingest.disconnect()


async def test_reads_held_back_for_a_quiet_moment_are_sent_when_the_stream_pauses():
    recorder = await recording()
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    await comm.receive_json_from(timeout=5)  # the snapshot
    pieces = text_stream(["a", "b"])
    for piece in pieces[:2]:  # back to back: the recorder waits for a quiet moment...
        recorder.feed(piece, time.monotonic())
    numbers = []
    while numbers != [0, 1]:  # ...and still sends them, with no further read to push them out
        numbers += [f["number"] for f in (await comm.receive_json_from(timeout=2))["frames"]]
    assert recorder.live.strict.frames == 2 and not recorder.live.closed
    await recorder.finish()
    await comm.disconnect()


async def test_frames_whose_live_messages_the_layer_dropped_are_read_back(monkeypatch):
    """A channel layer may drop a group send (channels' in-memory and list-based Redis
    layers discard one to a full channel): the viewer still gets every frame once, in
    order, the lost ones read back from the database before the next message's."""
    recorder = await recording()
    pieces = text_stream(["a", "b", "c", "d", "e"])
    await fed(recorder, pieces[0])
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    assert [f["number"] for f in (await comm.receive_json_from(timeout=5))["frames"]] == [0]

    monkeypatch.setattr(broadcast, "send", losing(broadcast.send, with_frames(1, 3)))
    for piece in pieces[1:4]:
        recorder.feed(piece, time.monotonic())
    await stored(recorder, 4)
    assert await no_frames_for(comm, 0.2)  # their messages never came

    messages = await finish_with(recorder, comm, pieces[4:])
    numbers = frame_numbers(messages)
    assert numbers == list(range(1, len(pieces)))
    missed = messages[0]
    assert missed["type"] == "frames" and [f["number"] for f in missed["frames"]] == [1, 2, 3]
    for frame, word in zip(missed["frames"], "bcd", strict=True):
        assert f"/frames/{frame['number']}" in frame["html"]
        assert f"&quot;content&quot;:&quot;{word}&quot;" in frame["html"]
    await comm.disconnect()


async def test_a_late_message_s_older_cards_do_not_replace_newer_ones():
    """A message may come after a later one (another process's append published late):
    its frames the viewer has are dropped, and so is its card of a call whose later card
    was sent; its card of a call not shown yet still goes."""
    recorder = await recording()
    pieces = text_stream(["a", "b", "c"])
    await fed(recorder, pieces[0])
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    assert [f["number"] for f in (await comm.receive_json_from(timeout=5))["frames"]] == [0]
    for piece in pieces[1:3]:
        await fed(recorder, piece)
    while True:  # a message may come with no frame the viewer lacks (see `no_frames_for`)
        frames = (await comm.receive_json_from(timeout=5))["frames"]
        if frames and frames[-1]["number"] >= 2:
            break
    group, layer = broadcast.capture_group(recorder.slug), get_channel_layer()
    quiet = {"type": "capture.frames", "slug": recorder.slug, "refusal": None}
    card = {"position": 0, "html": "<article>as of frame 2</article>"}
    await layer.group_send(group, {**quiet, "frames": [], "calls": [card]})
    stale = {"position": 0, "html": "<article>stale</article>"}
    other = {"position": 1, "html": "<article>not shown yet</article>"}
    await layer.group_send(
        group, {**quiet, "frames": [{"number": 1, "html": ""}], "calls": [stale, other]}
    )
    messages = await finish_with(recorder, comm, pieces[3:])
    text = orjson.dumps(messages).decode()
    assert "as of frame 2" in text and "not shown yet" in text and "stale" not in text
    numbers = frame_numbers(messages)
    assert numbers == list(range(3, len(pieces)))
    await comm.disconnect()


async def test_a_viewer_whose_last_messages_were_lost_asks_the_database(monkeypatch, settings):
    """No later message shows the gap when the last ones are lost (a Redis connection
    re-made, processes on layers that don't hear each other): after
    INSPECTOR_VIEWER_CHECK_SECONDS of silence the viewer gets the frames stored since,
    then the capture's closing."""
    settings.INSPECTOR_VIEWER_CHECK_SECONDS = 0.2
    recorder = await recording()
    pieces = text_stream(["a", "b", "c"])
    await fed(recorder, pieces[0])
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    assert [f["number"] for f in (await comm.receive_json_from(timeout=5))["frames"]] == [0]

    monkeypatch.setattr(broadcast, "send", losing(broadcast.send, lambda message: True))
    messages = await finish_with(recorder, comm, pieces[1:])
    numbers = frame_numbers(messages)
    assert numbers == list(range(1, len(pieces)))
    assert (messages[-1]["outcome"], messages[-1]["frame_count"]) == ("ok", len(pieces))
    assert await comm.receive_nothing(timeout=0.5)  # and nothing after the closing
    await comm.disconnect()


async def test_a_message_delayed_past_its_frames_read_back_still_brings_the_rest(
    monkeypatch, settings
):
    """The check reads back frames whose message is only slow; when it comes, what it
    carries besides them (here the dialect note the first frames tell) still goes."""
    settings.INSPECTOR_VIEWER_CHECK_SECONDS = 0.2
    recorder = await recording()
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    assert (await comm.receive_json_from(timeout=5))["frames"] == []
    monkeypatch.setattr(broadcast, "send", delaying(broadcast.send, 0.8, with_frames(0, 0)))
    recorder.feed(text_stream(["a"])[0], time.monotonic())
    read_back = await comm.receive_json_from(timeout=5)
    assert [f["number"] for f in read_back["frames"]] == [0] and not read_back["dialect_html"]
    late = await comm.receive_json_from(timeout=5)
    assert late["frames"] == [] and "dialect-note" in late["dialect_html"]
    await recorder.finish()
    await comm.disconnect()


async def test_the_closing_goes_once_when_the_check_announced_it_first(monkeypatch, settings):
    settings.INSPECTOR_VIEWER_CHECK_SECONDS = 0.2
    recorder = await recording()
    pieces = text_stream(["a"])
    await fed(recorder, pieces[0])
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    await comm.receive_json_from(timeout=5)
    closing = lambda message: message["type"] == "capture.finished"  # noqa: E731
    monkeypatch.setattr(broadcast, "send", delaying(broadcast.send, 1.0, closing))
    for piece in pieces[1:]:
        recorder.feed(piece, time.monotonic())
    finishing = asyncio.ensure_future(recorder.finish())
    messages = await messages_until_finished(comm)
    await finishing  # the real closing was published, 1 s late
    assert await comm.receive_nothing(timeout=0.5)
    assert [m["type"] for m in messages].count("finished") == 1
    await comm.disconnect()


async def test_frames_read_back_go_in_messages_daphne_will_send(monkeypatch):
    from inspector.live.broadcast import MESSAGE_HTML

    recorder = await recording()
    long_words = [f"{n}" + "x" * 3000 for n in range(120)]
    pieces = text_stream(long_words)
    await fed(recorder, pieces[0])
    await stored(recorder, 1)  # the snapshot holds frame 0: it never comes as a live frame
    comm = await connect(f"/ws/captures/{recorder.slug}/")
    await comm.receive_json_from(timeout=5)
    monkeypatch.setattr(broadcast, "send", losing(broadcast.send, with_frames(1, 100)))
    for piece in pieces[1:101]:
        recorder.feed(piece, time.monotonic())
    await stored(recorder, 101)
    messages = await finish_with(recorder, comm, pieces[101:])
    numbers = frame_numbers(messages)
    assert numbers == list(range(1, len(pieces)))
    read_back = [m for m in messages if m["frames"] and m["frames"][0]["number"] <= 100]
    assert len(read_back) > 1
    for message in messages:
        assert sum(len(frame["html"]) for frame in message["frames"]) <= MESSAGE_HTML
    await comm.disconnect()
