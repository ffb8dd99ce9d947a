"""One renderer: the same frames fed live (HTTP ingest, watched in Chromium)
and stored as an upload give the same rows, row by row: each frame row
(kind, event and type, calls, marks, raw), each fragment row (JSON state
included) and, once the live capture closed and its page became the finished
page in place, each call card and the refusal.  In the dialect's terms
(Anthropic Messages), with dropped and refusal marks (chat)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from test_live_browser import VIEWPORT, chunk, open_ingest, post

from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"

# id -> the text of each cell but the arrival time (an upload has none), whitespace folded.
ROWS_JS = """selector => Array.from(document.querySelectorAll(selector)).map(row => [
  row.id,
  Array.from(row.children).filter(cell => !cell.classList.contains("time"))
    .map(cell => cell.innerText.replace(/\\s+/g, " ").trim()).join(" | "),
])"""
FRAME_ROWS = "#frames-body tr[id^='f-']"
FRAGMENT_ROWS = "table.fragments tr[id^='frag-']"
CARDS = "#calls article.call"


def tool(**fields) -> dict:
    function = {key: fields.pop(key) for key in ("name", "arguments") if key in fields}
    return {"tool_calls": [{**fields, "function": function}]}


def chat_with_marks() -> list[bytes]:
    """`{"a":1` then `} x` (invalid from offset 8, after the object closed),
    a settled call, an empty delta and an orphan continuation (dropped), an
    index reused (anomaly), then AMBIGUOUS_CONTINUATION at frame 9."""
    return [
        chunk({"role": "assistant", "content": None}),
        chunk(tool(index=0, id="call_f", type="function", name="f", arguments='{"a":1')),
        chunk(tool(index=0, arguments="} x")),
        chunk(tool(index=1, id="call_g", type="function", name="g", arguments='{"b":')),
        chunk(tool(index=1, arguments="2}")),
        chunk(tool(index=1, arguments="")),
        chunk(tool(arguments="")),
        chunk(tool(index=2, id="call_a", type="function", name="h", arguments="")),
        chunk(tool(index=2, id="call_b", type="function", name="h", arguments="")),
        chunk(tool(index=2, arguments="{}")),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


def demo_frames(name: str) -> list[bytes]:
    text = (DEMO / name).read_bytes()
    return [block + b"\n\n" for block in text.split(b"\n\n") if block.strip()]


STREAMS = {
    "chat": (chat_with_marks, 10),  # frames shown mid-stream: up to the refusal
    "messages": (lambda: demo_frames("messages_parallel_calls_ok.sse"), 14),
}


def rows(page, selector: str) -> dict[str, str]:
    found = page.evaluate(ROWS_JS, selector)
    assert len({key for key, _ in found}) == len(found), "a row shown twice"
    return dict(found)


def same_rows(live: dict[str, str], stored: dict[str, str]) -> None:
    assert live, "no rows"
    for key, text in live.items():
        assert text == stored.get(key), key


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_live_rows_are_the_stored_rows_row_by_row(
    page, daphne_url, transactional_db, output_path, name
):
    make, shown = STREAMS[name]
    frames = make()
    page.set_viewport_size(VIEWPORT)
    upload = store_stream(b"".join(frames), stream_format="sse", title=f"stored {name}")
    page.goto(daphne_url + upload.get_absolute_url())
    stored = {part: rows(page, part) for part in (FRAME_ROWS, FRAGMENT_ROWS)}
    stored_cards = rows(page, CARDS)
    stored_refusal = page.locator(".refusal").all_inner_texts()

    opened = open_ingest(daphne_url, f"live {name}")
    page.goto(opened["url"])
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    for frame in frames[:shown]:
        post(opened["append_url"], frame)
    expect(page.locator(f"#f-{shown - 1}")).to_be_attached(timeout=10_000)

    # Mid-stream: every row present is the stored row.
    live_frames = rows(page, FRAME_ROWS)
    assert list(live_frames) == [f"f-{n}" for n in range(shown)]
    same_rows(live_frames, stored[FRAME_ROWS])
    same_rows(rows(page, FRAGMENT_ROWS), stored[FRAGMENT_ROWS])
    if name == "chat":
        assert "empty_delta" in live_frames["f-5"] and "orphan_continuation" in live_frames["f-6"]
        assert "index_reused" in live_frames["f-8"]
        assert "AMBIGUOUS_CONTINUATION" in live_frames["f-9"]
        state = page.locator("#frag-0-1 td.state")
        expect(state).to_have_text(re.compile(r"^invalid from offset 8\s+complete\s*$"))
        assert page.locator("[data-live-refusal] .refusal").all_inner_texts() == stored_refusal
    else:
        terms = page.locator("#call-0 .chip.term").all_inner_texts()
        assert terms[0].startswith("content block") and "tool_use id" in terms[1]
        assert "content_block_start" in live_frames["f-2"]
        expect(page.locator("#dialect-note")).to_contain_text("Anthropic Messages (messages)")
    page.screenshot(path=f"{output_path}/live_{name}_mid_stream.png", full_page=True)

    post(opened["append_url"], b"".join(frames[shown:]))
    post(opened["close_url"])
    # The finished page takes the live one's place: every row and card as stored.
    expect(page.locator("[data-live-capture]")).to_have_count(0, timeout=10_000)
    for part in (FRAME_ROWS, FRAGMENT_ROWS):
        assert rows(page, part) == stored[part], part
    assert rows(page, CARDS) == stored_cards
    assert page.locator(".refusal").all_inner_texts() == stored_refusal
    page.screenshot(path=f"{output_path}/live_{name}_closed.png", full_page=True)
