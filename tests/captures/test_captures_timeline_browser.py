"""Real Chromium: the timeline picture on a refused and a parallel capture,
at desktop width and at 420 px (screenshots), and a click on a mark opens
its frame."""

from __future__ import annotations

import re

import pytest
from page_helpers import demo
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [1280, 420])
def test_the_timeline_is_drawn_and_a_mark_opens_its_frame(
    page, daphne_url, transactional_db, output_path, width
):
    refused = demo("ambiguous_continuation.sse")
    parallel = demo("messages_parallel_calls_ok.sse")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(daphne_url + parallel.get_absolute_url())
    timeline = page.locator("svg.tl-picture")
    expect(timeline).to_be_visible()
    # Narrow screens scroll the picture in its box instead of shrinking it.
    box = page.locator(".timeline-scroll")
    assert box.bounding_box()["width"] <= width
    assert timeline.bounding_box()["width"] >= min(720, width - 60)
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_messages_{width}.png")

    page.goto(daphne_url + refused.get_absolute_url())
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_refused_{width}.png")
    strict = refused.assemblies.get(policy="strict")
    frame = strict.refusal_frame
    page.locator("svg.tl-picture a").filter(has=page.locator(".tl-refusal")).click()
    expect(page).to_have_url(re.compile(rf"/frames/{frame}/#f-{frame}$"))
    expect(page.locator(f"#f-{frame}")).to_have_class(re.compile(r"\bis-focus\b"))


def test_the_timeline_at_100k_frames_stays_readable(
    page, daphne_url, transactional_db, output_path
):
    from capture_streams import DONE, chunk, sse, tool

    from inspector.captures.store import store_stream

    calls, rounds = 4, 25_000  # 100,000 argument frames, interleaved
    items = [chunk(tool(k, f"call_{k}", f"tool_{k}", '{"v": "')) for k in range(calls)]
    items += [chunk(tool(r % calls, args="x")) for r in range(calls * rounds)]
    items += [chunk(*(tool(k, args='"}') for k in range(calls)), finish="tool_calls"), DONE]
    capture = store_stream(sse(*items), stream_format="sse", title="100k")
    assert capture.frame_count > 100_000
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(daphne_url + capture.get_absolute_url())
    timeline = page.locator("svg.tl-picture")
    expect(timeline).to_be_visible()
    # One bar per lane across the whole stream: readable, not 100k marks.
    assert timeline.locator(".tl-frag").count() == calls
    assert timeline.locator(".tl-settle").count() == calls
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_100k.png")
