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
    # Arrival times: 10 s of frames, a minute's pause halfway through.
    arrived = [n * 0.1 + (60_000 if n > 50_000 else 0) for n in range(len(items))]
    capture = store_stream(sse(*items), stream_format="sse", title="100k", arrived_ms=arrived)
    assert capture.frame_count > 100_000
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(daphne_url + capture.get_absolute_url())
    timeline = page.locator("svg.tl-picture")
    expect(timeline).to_be_visible()
    # One bar per lane across the whole stream: readable, not 100k marks.
    assert timeline.locator(".tl-frag").count() == calls
    assert timeline.locator(".tl-settle").count() == calls
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_100k.png")
    # By arrival time the pause splits each lane's bar in two.
    page.get_by_role("link", name="arrival time").click()
    expect(timeline).to_have_attribute("data-axis", "time")
    assert timeline.locator(".tl-frag").count() == 2 * calls
    assert timeline.locator(".tl-settle").count() == calls
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_100k_time.png")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 420])
def test_the_text_lane_and_the_arrival_time_axis(
    page, browser, daphne_url, transactional_db, output_path, width, scheme
):
    from page_helpers import DEMO

    from inspector.captures.store import store_stream

    data = (DEMO / "messages_parallel_calls_ok.sse").read_bytes()
    frames = data.count(b"\n\n") + 1
    # The reasoning and text come at once, the calls after a 1.5 s pause.
    arrived = [i * 20.0 if i < 9 else 1500 + i * 20.0 for i in range(frames)]
    capture = store_stream(data, stream_format="sse", arrived_ms=arrived, title="timed")
    page.emulate_media(color_scheme=scheme)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(daphne_url + capture.get_absolute_url())
    timeline = page.locator("svg.tl-picture")
    expect(timeline).to_have_attribute("data-axis", "frames")
    expect(timeline.locator(".tl-prose-label")).to_have_text("text / reasoning")
    expect(timeline.locator(".tl-reasoning")).to_have_count(1)
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_frames_{scheme}_{width}.png")

    page.get_by_role("link", name="arrival time").click()
    expect(page).to_have_url(re.compile(r"\?timeline=time#timeline$"))
    expect(timeline).to_have_attribute("data-axis", "time")
    expect(page.locator(".tl-switch a[aria-current]")).to_have_text("arrival time")
    # The calls start after the pause: the first call's identity is right of the middle.
    start = timeline.locator("a", has=page.locator(".tl-start")).first.bounding_box()
    svg_box = timeline.bounding_box()
    assert start["x"] > svg_box["x"] + svg_box["width"] * 0.6
    page.locator("#timeline").screenshot(path=f"{output_path}/timeline_time_{scheme}_{width}.png")

    text = timeline.locator("a", has=page.locator(".tl-text")).first
    frame = int(re.search(r"(\d+)/#f-", text.get_attribute("href")).group(1))
    text.click()
    expect(page).to_have_url(re.compile(rf"/frames/{frame}/#f-{frame}$"))
    expect(page.locator(f"#f-{frame}")).to_have_class(re.compile(r"\bis-focus\b"))


def test_the_axis_switch_works_without_javascript(browser, daphne_url, transactional_db):
    from page_helpers import DEMO

    from inspector.captures.store import store_stream

    data = (DEMO / "parallel_calls_ok.sse").read_bytes()
    arrived = [float(i) for i in range(data.count(b"\n\n") + 1)]
    capture = store_stream(data, stream_format="sse", arrived_ms=arrived)
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(daphne_url + capture.get_absolute_url())
        page.get_by_role("link", name="arrival time").click()
        expect(page.locator("svg.tl-picture")).to_have_attribute("data-axis", "time")
        page.get_by_role("link", name="frame number").click()
        expect(page.locator("svg.tl-picture")).to_have_attribute("data-axis", "frames")
    finally:
        context.close()
