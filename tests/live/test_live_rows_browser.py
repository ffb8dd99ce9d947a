"""Real Chromium watching a Responses and a Messages capture grow: frames that
arrive after the page loaded get the same row as the server renders, the
event name and JSON type label included (the server renders the row, the
browser only inserts it)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import orjson
import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 900}
DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
STREAMS = {
    "responses": "responses_parallel_calls_ok.sse",
    "messages": "messages_parallel_calls_ok.sse",
}


def post(url: str, data: bytes = b"", content_type: str = "application/octet-stream") -> dict:
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=10) as response:
        return orjson.loads(response.read())


def blocks(name: str) -> list[bytes]:
    data = (DEMO / name).read_bytes()
    return [block + b"\n\n" for block in data.split(b"\n\n") if block.strip()]


def label_cell(page, number: int):
    return page.locator(f"#f-{number} td:nth-child(3)")


@pytest.mark.parametrize("dialect", sorted(STREAMS))
def test_frames_added_live_carry_their_event_and_type(
    page, daphne_url, transactional_db, output_path, dialect
):
    frames = blocks(STREAMS[dialect])
    body = orjson.dumps({"title": f"{dialect} live rows", "dialect": dialect})
    opened = post(daphne_url + "/api/ingest", body, "application/json")
    post(opened["append_url"], b"".join(frames[:2]))  # stored before the page opens

    page.set_viewport_size(VIEWPORT)
    page.goto(opened["url"])
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    expect(page.locator("#frames-body tr[id^='f-']")).to_have_count(2)

    post(opened["append_url"], b"".join(frames[2:]))  # after the page loaded
    last = len(frames) - 1
    expect(page.locator(f"#f-{last}")).to_be_visible(timeout=10_000)
    expect(page.locator(f"#f-{last}")).to_have_class(re.compile(r"\bis-new\b"))
    live_labels = {}
    for number in range(2, len(frames)):
        event = frames[number].split(b"\n", 1)[0].removeprefix(b"event: ").decode()
        cell = label_cell(page, number)
        expect(cell.locator(".frame-event")).to_have_text(event)
        live_labels[number] = cell.inner_html()
    expect(page.locator(f"#f-{last} button.copy-link")).to_be_visible()
    page.locator("#frames").screenshot(path=f"{output_path}/live_rows_{dialect}.png")

    # The same rows as the server renders them, the capture still live.
    page.reload()
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    for number, cell in live_labels.items():
        assert label_cell(page, number).inner_html() == cell, number
    # Closed with no page watching: a watching page fetches the finished page (and its
    # lenses) as the close answers, queries still running when the test database is
    # emptied; on PostgreSQL one deadlocked the teardown's TRUNCATE.
    page.goto("about:blank")
    post(opened["close_url"])
