"""A card the throttle held back while fragments streamed goes out when the
stream pauses: a viewer never waits for the next frame (or the close) to
see the newest state of a call."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from inspector.live import broadcast
from inspector.live.recorder import SocketRecording

pytestmark = pytest.mark.django_db(transaction=True)


def chunk(delta: dict) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


@pytest.mark.asyncio
async def test_a_held_back_card_is_sent_when_the_stream_pauses(monkeypatch):
    sent: list[dict] = []

    async def spy(group: str, message: dict) -> None:
        sent.append(message)

    monkeypatch.setattr(broadcast, "send", spy)
    recording = SocketRecording.open(stream_format="sse", title="held")
    assert await recording.ready()
    header = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a":'}}
    recording.feed(chunk({"tool_calls": [header]}), time.monotonic())
    await asyncio.sleep(0.05)  # stored and sent: the card's first render
    more = chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]})
    recording.feed(more, time.monotonic())  # within the interval: its card is held back

    def last_card() -> str:
        cards = [call["html"] for m in sent if m["type"] == "capture.frames" for call in m["calls"]]
        return cards[-1] if cards else ""

    deadline = time.monotonic() + 5
    while 'id="frag-0-1"' not in last_card() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    batches = [m for m in sent if m["type"] == "capture.frames"]
    frames = [f["number"] for m in batches for f in m["frames"]]
    assert frames == [0, 1]  # the frame went out at once, its card after the pause
    # Each batch's frames go first, the card its throttle lets out in a message after them.
    assert [(len(m["frames"]), len(m["calls"])) for m in batches] == [
        (1, 0),
        (0, 1),
        (1, 0),
        (0, 1),
    ]
    assert 'id="frag-0-1"' in last_card() and ">complete<" in last_card()
    assert not any(m["type"] == "capture.finished" for m in sent)
    await recording.finish()
