"""A frame's row as a live viewer gets it is the row the capture page shows
once the capture closed: rendered by the server with the page's own
template, event name and JSON type, touched calls and marks included, in
every dialect, whether it came in a live batch or in the snapshot a late
viewer gets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from page_helpers import html

from inspector.live.session import LiveCapture
from inspector.live.snapshot import DONE, SnapshotPager

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
STREAMS = {
    "chat": ("sse", "parallel_calls_ok.sse"),
    "responses": ("sse", "responses_parallel_calls_ok.sse"),
    "messages": ("sse", "messages_parallel_calls_ok.sse"),
    "gemini": ("sse", "gemini_parallel_calls_ok.sse"),
}


def page_rows(client, capture) -> dict[int, str]:
    page = html(client.get(capture.get_absolute_url()))
    rows = re.findall(r'(<tr id="f-(\d+)".*?</tr>)', page, re.S)
    return {int(number): row for row, number in rows}


def recorded(dialect: str, *, close: bool = False) -> tuple[LiveCapture, dict[int, str]]:
    """The demo stream of `dialect` appended in reads of 300 bytes (then
    closed, with `close`): the live capture and each frame's row as the live
    messages carried it."""
    fmt, name = STREAMS[dialect]
    data = (DEMO / name).read_bytes()
    live = LiveCapture.open(stream_format=fmt, title=dialect)
    batches = [live.append(data[start : start + 300]) for start in range(0, len(data), 300)]
    if close:
        batches.append(live.close())
    sent: dict[int, str] = {}
    for batch in batches:
        for frame in batch["frames"] if batch else []:
            sent[frame["number"]] = frame["html"]
    return live, sent


@pytest.mark.parametrize("dialect", sorted(STREAMS))
def test_live_rows_are_the_rows_the_page_shows(client, dialect):
    live, sent = recorded(dialect, close=True)
    shown = page_rows(client, live.capture)
    assert sent and sorted(sent) == sorted(shown)
    for number, row in sent.items():
        assert row.strip() == shown[number], number
    joined = "".join(sent.values())
    if dialect in ("responses", "messages"):  # their SSE event names and JSON types
        event = "response.output_item.added" if dialect == "responses" else "content_block_start"
        assert '<code class="frame-event" title="the SSE event name and the JSON type' in joined
        assert f">{event}</code>" in joined
    else:  # no event lines
        assert "frame-event" not in joined


@pytest.mark.parametrize("dialect", sorted(STREAMS))
def test_a_late_viewers_snapshot_carries_the_same_rows(client, dialect):
    live, sent = recorded(dialect)
    pager = SnapshotPager(live.capture, after=-1, size=5)
    snapshot: dict[int, str] = {}
    while (message := pager.next_page()) is not DONE:
        for frame in message["frames"] if message else []:
            snapshot[frame["number"]] = frame["html"]
    assert snapshot == sent


def test_a_frame_of_another_type_than_its_event_shows_both():
    live = LiveCapture.open(stream_format="sse")
    batch = live.append(b'event: message_start\ndata: {"type":"ping"}\n\n')
    row = batch["frames"][0]["html"]
    assert "event <code>message_start</code>" in row and "type <code>ping</code>" in row


def test_stream_text_is_escaped_in_the_row():
    live = LiveCapture.open(stream_format="jsonl")
    batch = live.append(b'{"choices":[{"index":0,"delta":{"content":"<b>x</b>\\u0000"}}]}\n')
    row = batch["frames"][0]["html"]
    assert "<b>" not in row and "&lt;b&gt;x&lt;/b&gt;" in row
