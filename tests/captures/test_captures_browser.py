"""Real Chromium against a real daphne server: upload a refused stream through
the form, see the refusal and its frame, copy and open its permalink in a
fresh browser context; stream content never runs as script."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from playwright.sync_api import expect

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
XSS_SCRIPT = "<script>window.__xss=1</script>"
XSS_IMG = '<img src=x onerror="window.__xss=1">'
VIEWPORT = {"width": 1280, "height": 900}


def test_upload_a_refused_stream_and_open_its_frame_permalink(
    page, context, browser, daphne_url, transactional_db, output_path
):
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=daphne_url)
    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + "/upload/")
    page.set_input_files("input[type=file]", str(DEMO / "ambiguous_continuation.sse"))
    page.fill("input[name=title]", "uploaded through the form")
    page.screenshot(path=f"{output_path}/upload_form.png", full_page=True)
    page.click("button[type=submit]")

    expect(page).to_have_url(re.compile(r"/c/[\w-]+/$"))
    expect(page.locator(".refusal-code")).to_have_text("AMBIGUOUS_CONTINUATION")
    expect(page.locator(".disagree")).to_contain_text("Strict and lenient disagree")
    failing = page.locator("#f-3")
    expect(failing).to_have_class(re.compile(r"\bis-refusal\b"))
    expect(failing.locator(".mark-refusal")).to_have_text("AMBIGUOUS_CONTINUATION")
    expect(failing).to_be_visible()
    page.screenshot(path=f"{output_path}/capture_refused.png", full_page=True)

    # The copy-link control of the failing frame puts its permalink on the clipboard.
    copy = failing.locator("button.copy-link")
    expect(copy).to_be_visible()
    copy.click()
    expect(copy).to_have_text("copied")
    permalink = page.evaluate("navigator.clipboard.readText()")
    slug = Capture.objects.get().slug
    assert permalink == f"{daphne_url}/c/{slug}/frames/3/#f-3"

    # A fresh browser (no cookies, no history) opens the page at that frame.
    fresh = browser.new_context(viewport=VIEWPORT)
    try:
        other = fresh.new_page()
        other.goto(permalink)
        row = other.locator("#f-3")
        expect(row).to_have_class(re.compile(r"\bis-focus\b"))
        expect(row).to_be_visible()
        expect(row).to_be_in_viewport()
        expect(other.locator("aside.state h2")).to_have_text("State at frame 3")
        expect(other.locator("aside.state")).to_contain_text("call_read")
        other.screenshot(path=f"{output_path}/frame_permalink.png")
        other.screenshot(path=f"{output_path}/frame_permalink_full.png", full_page=True)
    finally:
        fresh.close()

    # Without JavaScript and without the #fragment the permalink still works.
    no_js = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    try:
        bare = no_js.new_page()
        bare.goto(f"{daphne_url}/c/{slug}/frames/3/")
        expect(bare.locator("#f-3")).to_have_class(re.compile(r"\bis-focus\b"))
        expect(bare.locator("aside.state")).to_contain_text("State at frame 3")
        expect(bare.locator("#f-3 button.copy-link")).to_be_hidden()  # nothing to click
    finally:
        no_js.close()


def test_bad_input_shows_an_error_on_the_form(page, daphne_url, transactional_db, output_path):
    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + "/upload/")
    page.fill("textarea[name=text]", "this is not a stream")
    page.click("button[type=submit]")
    expect(page.locator(".form-errors")).to_contain_text("can't tell the format")
    expect(page.locator("textarea[name=text]")).to_have_value("this is not a stream")
    page.screenshot(path=f"{output_path}/upload_error.png", full_page=True)
    assert Capture.objects.count() == 0


def chunk(delta: dict, finish: str | None = None) -> str:
    payload = {
        "model": "xss-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return "data: " + orjson.dumps(payload).decode() + "\n\n"


def test_script_in_a_stream_stays_text(page, daphne_url, transactional_db, output_path):
    hostile = XSS_SCRIPT + XSS_IMG
    arguments = orjson.dumps({"html": hostile}).decode()
    stream = "".join(
        [
            chunk({"content": hostile}),
            chunk({"tool_calls": [{"index": 0, "id": hostile, "function": {"name": hostile}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:20]}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[20:]}}]}),
            chunk({}, finish="tool_calls"),
            "data: [DONE]\n\n",
        ]
    ).encode()
    capture = store_stream(stream, stream_format="sse", title=hostile)
    page.set_viewport_size(VIEWPORT)

    for url, shot in (
        (capture.get_absolute_url(), "xss_capture.png"),
        (f"/c/{capture.slug}/frames/3/#f-3", "xss_frame.png"),
        ("/", "xss_list.png"),
    ):
        page.goto(daphne_url + url)
        expect(page.get_by_text(XSS_SCRIPT).first).to_be_visible()
        assert page.evaluate("window.__xss") is None
        assert page.locator("img[src=x]").count() == 0
        page.screenshot(path=f"{output_path}/{shot}", full_page=True)
    expect(page.locator("h1")).to_have_text("Captures")
