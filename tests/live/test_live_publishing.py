"""A recording's next batch is stored while the message of the one before
it goes out to the viewers (through Redis, with many captures streaming,
a message took 5 ms and more, and the next frames waited for it:
bench/README.md, seventeenth stop); the messages still go out one at a
time, in order, and a card after the frames it shows."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time

import orjson
import pytest
from channels.db import database_sync_to_async

from inspector.captures import models
from inspector.captures.pages import live_cards
from inspector.live import broadcast
from inspector.live.recorder import SocketRecording

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": "'}}


def chunk(delta: dict) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def piece(text: str) -> bytes:
    return chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})


async def until(condition, seconds: float = 5.0) -> bool:
    """Whether `condition()` (a value, or one to await) came true within `seconds`."""

    async def holds() -> bool:
        value = condition()
        return bool(await value if inspect.isawaitable(value) else value)

    deadline = time.monotonic() + seconds
    while not await holds() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return await holds()


@database_sync_to_async
def stored(slug: str) -> int:
    return models.Frame.objects.filter(capture__slug=slug).count()


async def stored_at_least(recording: SocketRecording, count: int) -> bool:
    return await stored(recording.slug) >= count


class HeldViewers:
    """`broadcast.send`, holding back the message of frame `held` (the
    first frame by default) until `release` is set; every message sent, in
    order, in `sent`."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.held = 0
        self.holding = asyncio.Event()
        self.release = asyncio.Event()

    async def send(self, group: str, message: dict) -> None:
        numbers = [frame["number"] for frame in message.get("frames", [])]
        if self.held in numbers and not self.holding.is_set():
            self.holding.set()
            await self.release.wait()
        self.sent.append(message)

    def frames(self) -> list[int]:
        return [frame["number"] for message in self.sent for frame in message.get("frames", [])]


@pytest.fixture
def viewers(monkeypatch) -> HeldViewers:
    held = HeldViewers()
    monkeypatch.setattr(broadcast, "send", held.send)
    return held


@pytest.mark.asyncio
async def test_a_batch_is_stored_while_the_message_before_it_goes_out(viewers):
    recording = SocketRecording.open(stream_format="sse", title="slow viewers")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    assert await until(viewers.holding.is_set)
    try:
        await asyncio.sleep(0.05)  # (a batch of its own)
        recording.feed(piece("x"), time.monotonic())
        assert await until(lambda: stored_at_least(recording, 2))
        assert viewers.frames() == []  # frame 0's message still held back
        await asyncio.sleep(0.05)
        recording.feed(piece("y"), time.monotonic())
        await asyncio.sleep(0.2)
        assert await stored(recording.slug) == 2  # one message out at a time: frame 2 waits
    finally:
        viewers.release.set()
    finished = await recording.finish()
    assert finished is not None and finished["type"] == "capture.finished"
    assert viewers.frames() == [0, 1, 2]
    frames_messages = [m for m in viewers.sent if m["type"] == "capture.frames"]
    assert viewers.sent.index(finished) > viewers.sent.index(frames_messages[-1])


@pytest.mark.asyncio
async def test_a_card_goes_out_after_the_frames_it_shows(monkeypatch, viewers):
    rendered = threading.Event()
    render = live_cards.CardToRender.render

    def noted_render(card):
        try:
            return render(card)
        finally:
            rendered.set()

    monkeypatch.setattr(live_cards.CardToRender, "render", noted_render)
    recording = SocketRecording.open(stream_format="sse", title="a card")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    try:
        # The call's first card is rendered at once, while frame 0's message is held.
        assert await until(rendered.is_set)
        await asyncio.sleep(0.2)  # time enough for the side lane to send it
        assert [m for m in viewers.sent if m["type"] == "capture.frames"] == []
    finally:
        viewers.release.set()
    assert await until(lambda: any(m.get("calls") for m in viewers.sent))
    kinds = [
        "frames" if m.get("frames") else "cards"
        for m in viewers.sent
        if m.get("calls") or m.get("frames")
    ]
    assert kinds[:2] == ["frames", "cards"]
    await recording.finish()


@pytest.mark.asyncio
async def test_the_capture_closes_after_its_last_frames_went_out(viewers):
    viewers.held = 1
    recording = SocketRecording.open(stream_format="sse", title="the last message held")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    assert await until(lambda: viewers.frames() == [0])
    recording.feed(piece("x"), time.monotonic())
    assert await until(viewers.holding.is_set)
    finishing = recording.finish()
    try:
        await asyncio.sleep(0.3)  # time enough to close, were the close not waiting
        assert not finishing.done()
        assert all(message["type"] != "capture.finished" for message in viewers.sent)
    finally:
        viewers.release.set()
    finished = await finishing
    assert finished is not None and viewers.frames() == [0, 1]
    frames_messages = [m for m in viewers.sent if m["type"] == "capture.frames"]
    assert viewers.sent.index(finished) > viewers.sent.index(frames_messages[-1])
