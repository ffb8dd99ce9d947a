"""A live recording's batches as viewers get them."""

from __future__ import annotations

import orjson
import pytest

from inspector.captures.pages.live_cards import RENDER_INTERVAL
from inspector.live.broadcast import frames_message, split_batch
from inspector.live.session import LiveCapture


def chunk(delta: dict) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def test_a_large_batch_goes_out_in_messages_a_socket_can_carry():
    """A backlog's batch (hundreds of rows) is split: daphne closes a viewer's
    socket (1011) rather than send a message over 1 MiB."""
    rows = [{"number": n, "html": "x" * 3000} for n in range(500)]
    card = [{"position": 0, "html": "<card>"}]
    message = frames_message("s", rows, card, None, "<refusal>", "<note>")
    parts = split_batch(message, limit=100_000)
    assert [f for part in parts for f in part["frames"]] == rows
    assert all(sum(len(f["html"]) for f in part["frames"]) <= 100_000 for part in parts)
    assert [part["calls"] for part in parts] == [[]] * (len(parts) - 1) + [card]
    assert parts[-1]["refusal_html"] == "<refusal>" and not parts[0]["refusal_html"]
    assert split_batch(frames_message("s", rows[:2], card, None)) == [
        frames_message("s", rows[:2], card, None)
    ]


@pytest.mark.django_db
def test_after_a_throttled_card_the_next_waits_for_the_spacing():
    """Cards take a bounded share of the recorder's time: right after one was
    rendered (at the stream's pace), the next due card waits; then it comes."""
    now = [0.0]
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = lambda: now[0]
    headers = [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "f"}}
        for i in range(2)
    ]
    first = live.append(chunk({"tool_calls": headers}))
    assert [card["position"] for card in first["calls"]] == [0]
    now[0] = 1e-6  # call 1's card is due, but the last render was just now
    piece = {"index": 1, "function": {"arguments": "{"}}
    assert live.append(chunk({"tool_calls": [piece]}))["calls"] == []
    now[0] = 10 * RENDER_INTERVAL
    assert [card["position"] for card in live.due_cards()["calls"]] == [1]
