"""Real Chromium against a real daphne server: the frames panel's parsed
rows, its filters (links, the call form, also without JavaScript), the raw
toggle, and j/k over the new rows; at desktop width and at 420 px."""

from __future__ import annotations

import re

import pytest
from capture_streams import DONE, chunk, sse, tool
from playwright.sync_api import expect

from inspector.captures.intake import store_upload

pytestmark = pytest.mark.browser

HOSTILE = '<img src=x onerror="window.__xss=1">'


def stream() -> bytes:
    items = [
        chunk(tool(0, "call_A", "read_file", '{"path": "'), tool(1, "call_B", HOSTILE, '{"q": "'))
    ]
    for i in range(30):
        items.append(chunk(tool(i % 2, args=f"part{i} ")))
        if i % 10 == 0:
            items.append(chunk(content=f"Thinking out loud {i}"))
    items.insert(5, chunk(tool(4)))  # dropped: empty_delta
    items += [chunk(tool(0, args='"}'), tool(1, args='"}'), finish="tool_calls"), DONE]
    return sse(*items)


def shown(page) -> list[str]:
    return page.locator("#frames-body tr[id^='f-']").evaluate_all("rows => rows.map(r => r.id)")


@pytest.mark.parametrize("width", [1280, 420])
def test_filters_and_the_raw_toggle(
    page, browser, daphne_url, transactional_db, output_path, width
):
    (capture,) = store_upload(stream(), name="frames.sse", title="frames panel")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(daphne_url + capture.get_absolute_url())
    first = page.locator("#f-0 td.did")
    expect(first).to_contain_text("#0 read_file")
    expect(first).to_contain_text("function.arguments")
    expect(page.locator("#f-0 details.raw-fold pre")).to_be_hidden()  # the envelope, folded
    page.locator("#frames").screenshot(path=f"{output_path}/frames_parsed_{width}.png")

    # The raw toggle unfolds every row in place and the address says so.
    page.click("a[data-raw-toggle]")
    expect(page.locator("#f-0 details.raw-fold pre")).to_be_visible()
    expect(page).to_have_url(re.compile(r"\?raw=1#?"))
    expect(page.locator("a[data-raw-toggle]")).to_have_text("fold raw frames")
    page.click("a[data-raw-toggle]")
    expect(page.locator("#f-0 details.raw-fold pre")).to_be_hidden()

    # Text only: the server's filtered page; j/k still walk the rows shown.
    page.click("a[data-filter=text]")
    expect(page).to_have_url(re.compile(r"frames=text"))
    expect(page.locator("[data-filtered-count]").first).to_contain_text("3 of")
    assert all("content" in text for text in page.locator("#frames-body td.did").all_inner_texts())
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator("#frames-body tr.is-kbd")).to_have_id(shown(page)[1])

    # Touching call #1 through the form; the hostile name stays text.
    page.select_option("#frames-call", "call-1")
    page.click(".frame-filter-call button[type=submit]")
    expect(page).to_have_url(re.compile(r"frames=call-1"))
    rows = shown(page)
    assert rows and all(
        "#1" in text for text in page.locator("#frames-body td.calls").all_inner_texts()
    )
    expect(page.locator(f"#{rows[0]} a.did-call[href='#call-1']")).to_contain_text(HOSTILE)
    assert page.evaluate("window.__xss") is None
    page.locator("#frames").screenshot(path=f"{output_path}/frames_call_filter_{width}.png")

    # Anomalies, drops and the refusal, with the raw text open from the server (?raw=1).
    page.goto(daphne_url + capture.get_absolute_url() + "?frames=anomalies&raw=1")
    marked = shown(page)
    assert marked and all(
        page.locator(f"#{row}").get_attribute("class").count("is-") for row in marked
    )
    expect(page.locator(f"#{marked[0]} details.raw-fold pre")).to_be_visible()
    page.keyboard.press("n")
    expect(page.locator("#frames-body tr.is-kbd")).to_have_id(marked[0])
    page.locator("#frames").screenshot(path=f"{output_path}/frames_anomalies_raw_{width}.png")


def test_the_filters_work_without_javascript(browser, daphne_url, transactional_db):
    (capture,) = store_upload(stream(), name="frames.sse")
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(daphne_url + capture.get_absolute_url())
        page.click("a[data-filter=text]")
        expect(page.locator("[data-filtered-count]").first).to_contain_text("3 of")
        page.select_option("#frames-call", "call-0")
        page.click(".frame-filter-call button[type=submit]")
        expect(page).to_have_url(re.compile(r"frames=call-0"))
        page.click("a[data-raw-toggle]")
        expect(page).to_have_url(re.compile(r"frames=call-0&raw=1"))
        expect(page.locator("#frames-body details.raw-fold pre").first).to_be_visible()
    finally:
        context.close()
