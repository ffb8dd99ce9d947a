"""Chromium against daphne: searching the captures, finding text in one
capture's arguments, the upload's progress bar, revoking a share link
without JavaScript; and screenshots of the list, the upload page and a
capture page at desktop and phone width, light and dark."""

from __future__ import annotations

import re

import pytest
from capture_streams import DONE, chunk, sse, tool
from playwright.sync_api import expect

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 420, "height": 860}


def weather() -> bytes:
    model = "gpt-4o-mini-2024-07-18"
    return sse(
        chunk(tool(0, "call_WX9", "get_weather", '{"city": "Reyk'), model=model),
        chunk(tool(0, args="javík"), model=model),
        chunk(tool(0, args='", "units": "metric"}'), finish="tool_calls", model=model),
        DONE,
    )


def refused() -> bytes:
    return sse(chunk(tool(0, "call_cut", "read_file", '{"path": "/etc/ho'), model="claude-ish"))


@pytest.fixture
def captures(transactional_db) -> dict[str, Capture]:
    return {
        "weather": store_stream(weather(), stream_format="sse", title="forecast run"),
        "cut": store_stream(refused(), stream_format="sse", title="cut short", source="proxy"),
        "chat": store_stream(
            sse(chunk(content="hi", finish="stop", model="gpt-4o"), DONE),
            stream_format="sse",
            title="plain chat",
        ),
    }


OVERFLOWING = """() => [...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
    .slice(0, 8).map((e) => e.tagName + "." + e.className)"""


def overflowing(page) -> list[str]:
    """The first elements reaching past the window's right edge."""
    return page.evaluate(OVERFLOWING)


def shoot(page, path: str, name: str) -> None:
    """The page at desktop and phone width, light and dark: eight screenshots."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for label, size in (("desktop", DESKTOP), ("420", PHONE)):
            page.set_viewport_size(size)
            page.screenshot(path=f"{path}/{name}_{label}_{scheme}.png", full_page=True)
            # Nothing wider than the window: the header and the links wrap.
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= size["width"], f"{name} {label}: {wide} px wide: {overflowing(page)}"


def test_search_the_captures_in_a_browser(page, daphne_url, captures, output_path):
    page.set_viewport_size(DESKTOP)
    page.goto(daphne_url + "/")
    page.fill("input[name=q]", "REYKJAV")
    page.click("form.filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"\?q=REYKJAV"))
    expect(page.locator("td.title a")).to_have_text(["forecast run"])
    expect(page.locator(".search-summary")).to_contain_text("1 capture holding")
    page.fill("input[name=q]", "call_")
    page.select_option("select[name=source]", "proxy")
    page.click("form.filters button[type=submit]")
    expect(page.locator("td.title a")).to_have_text(["cut short"])
    page.fill("input[name=q]", "")
    page.select_option("select[name=source]", "")
    page.fill("input[name=model]", "gpt-4o")  # a part of the name
    page.click("form.filters button[type=submit]")
    expect(page.locator("td.title a")).to_have_text(["plain chat", "forecast run"])
    page.goto(daphne_url + "/?q=call")
    expect(page.locator("td.title a")).to_have_count(2)
    shoot(page, output_path, "list_search")


def test_find_in_arguments_opens_the_fragment_without_javascript(
    browser, daphne_url, captures, output_path
):
    slug = captures["weather"].slug
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{daphne_url}/c/{slug}/")
        page.fill("form.find-args input[name=text]", "units")
        page.click("form.find-args button[type=submit]")
        expect(page).to_have_url(f"{daphne_url}/c/{slug}/frames/2/#frag-0-2")
        row = page.locator("#frag-0-2")
        expect(row).to_have_class(re.compile(r"\bis-focus\b"))
        expect(row).to_be_in_viewport()
        page.screenshot(path=f"{output_path}/find_found.png")
        page.fill("form.find-args input[name=text]", "oslo")
        page.click("form.find-args button[type=submit]")
        expect(page.locator(".find-missing")).to_have_text(
            "Not found: no call's arguments hold “oslo”."
        )
        expect(page.locator("form.find-args input[name=text]")).to_have_value("oslo")
        expect(page.locator(".find-missing")).to_be_in_viewport()
        page.screenshot(path=f"{output_path}/find_not_found.png")
    finally:
        context.close()


def test_the_capture_page_at_both_widths_and_schemes(page, daphne_url, captures, output_path):
    page.goto(f"{daphne_url}/c/{captures['cut'].slug}/")
    expect(page.locator(".refusal-code")).to_have_text("INCOMPLETE_STREAM")
    expect(page.locator("p.export")).to_be_visible()
    shoot(page, output_path, "capture")


def test_the_upload_shows_its_progress_and_disables_the_button(
    page, daphne_url, transactional_db, output_path, tmp_path
):
    # ~1.5 MB of argument fragments: storing them takes the server a moment.
    pieces = [chunk(tool(0, "call_big", "write_file", '{"text": "'))]
    pieces += [chunk(tool(0, args="x" * 180)) for _ in range(5000)]
    pieces += [chunk(tool(0, args='"}'), finish="tool_calls"), DONE]
    big = tmp_path / "big.sse"
    big.write_bytes(sse(*pieces))
    page.set_viewport_size(DESKTOP)
    page.goto(daphne_url + "/upload/")
    progress = page.locator("[data-upload-progress]")
    expect(progress).to_be_hidden()
    shoot(page, output_path, "upload")
    page.set_viewport_size(DESKTOP)
    page.emulate_media(color_scheme="light")
    page.set_input_files("input[type=file]", str(big))
    page.click("form.upload button[type=submit]")
    expect(page.locator("form.upload button[type=submit]")).to_be_disabled()
    expect(progress).to_be_visible()
    expect(progress).to_contain_text(re.compile(r"sending|assembling"))
    page.screenshot(path=f"{output_path}/upload_progress.png")
    expect(page).to_have_url(re.compile(r"/c/[\w-]+/$"), timeout=60_000)
    expect(page.locator("h1")).to_have_text("big.sse")


def test_a_failed_upload_shows_the_form_again_with_the_reason(page, daphne_url, transactional_db):
    page.goto(daphne_url + "/upload/")
    page.fill("textarea[name=text]", "hello world")
    page.click("form.upload button[type=submit]")
    expect(page.locator(".form-errors")).to_contain_text("choose it in the Format field")
    expect(page).to_have_url(daphne_url + "/upload/")
    expect(page.locator("form.upload button[type=submit]")).to_be_enabled()


def test_revoking_a_link_asks_first_without_javascript(browser, daphne_url, captures, output_path):
    capture = captures["cut"]
    old = capture.slug
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{daphne_url}/c/{old}/")
        page.click("[data-rotate-button]")
        expect(page.locator("h1")).to_have_text("Revoke this capture's link?")
        page.screenshot(path=f"{output_path}/revoke_confirm.png")
        page.click("text=Cancel")
        expect(page).to_have_url(f"{daphne_url}/c/{old}/")
        assert Capture.objects.get(pk=capture.pk).slug == old
        page.click("[data-rotate-button]")
        page.click("form.rotate-confirm button[type=submit]")
        expect(page.locator(".message-success")).to_contain_text("Share link revoked")
        new = Capture.objects.get(pk=capture.pk).slug
        assert new != old
        expect(page).to_have_url(f"{daphne_url}/c/{new}/")
        assert page.goto(f"{daphne_url}/c/{old}/").status == 404
    finally:
        context.close()


def test_the_favicon_is_served(page, daphne_url, transactional_db):
    response = page.request.get(daphne_url + "/static/inspector/favicon.svg")
    assert response.status == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert b"<svg" in response.body()
