"""Stream content is untrusted everywhere it is shown: a corpus of XSS payloads
in a capture's title, model, tool-call ids, names and arguments, its text and
its raw frames (and a frame that is no JSON at all) runs 0 times in Chromium
on the capture page, a frame permalink, the lens page, the compare page and
the list -- and on a live capture page, where live.js adds frames and calls as
they arrive.  No dialog opens, the Content-Security-Policy reports no
violation, and every payload reads literally on the page."""

from __future__ import annotations

import urllib.request
from urllib.parse import urlencode

import orjson
import pytest
from access_helpers import DONE, chunk
from playwright.sync_api import expect

from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1400, "height": 950}
BIG = ("<img src=x onerror=window.__xss=1>" * 320)[:10240]  # a 10 KB payload
PAYLOADS = [
    "<script>window.__xss=1</script>",
    "<img src=x onerror=window.__xss=1>",
    "<svg onload=window.__xss=1>",
    '"><script>window.__xss=1</script>',
    "'><svg/onload=alert(1)>",
    "javascript:window.__xss=1",
    "</pre><script>window.__xss=1</script>",
    '<iframe srcdoc="<script>parent.__xss=1</script>"></iframe>',
    '<a href="javascript:window.__xss=1',  # broken markup: never closed
    "&lt;script&gt;window.__xss=1&lt;/script&gt;",
    "\u202etxt.exe<script>window.__xss=1</script>",  # right-to-left override
    "<scr\u200dipt>window.__xss=1</scr\u200dipt>java\u200bscript:alert(1)",  # zero-width
    "{{ 7*7 }}",
    "${7*7}",
    "</textarea><script>alert(document.domain)</script>",
    "<details open ontoggle=alert(1)>",
    "</script><body onload=alert(1)>",
]
TITLE = '<img src=x onerror=alert(1)>"><script>window.__xss=1</script>'
MODEL = "<svg onload=window.__xss=1>"
BAD_FRAME = b"data: <script>window.__xss=1</script><img src=x onerror=alert(1)>\n\n"
# Listens for CSP violations before any script of the page runs (init scripts
# are not subject to the page's policy).
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__violations.push({
    directive: event.effectiveDirective, blocked: event.blockedURI, sample: event.sample
  });
}, true);
"""
INJECTED = (
    "script:not([src]), iframe, object, embed, img[src='x'], [onerror], [onload], "
    "[ontoggle], [onclick], [style], a[href^='javascript' i]"
)


def hostile_frames(calls: list[str]) -> list[bytes]:
    """Frames whose ids, names, arguments and text hold `calls` (one call each)."""
    frames = [chunk({"role": "assistant", "content": "\n".join(PAYLOADS)}, model=MODEL)]
    for index, payload in enumerate(calls):
        call = {"index": index, "id": payload, "function": {"name": payload, "arguments": ""}}
        frames.append(chunk({"tool_calls": [call]}, model=MODEL))
        args = orjson.dumps({"payload": payload, "n": index}).decode()
        half = len(args) // 2
        for part in (args[:half], args[half:]):
            piece = {"index": index, "function": {"arguments": part}}
            frames.append(chunk({"tool_calls": [piece]}, model=MODEL))
    return frames


def hostile_stream(*, bad_frame: bool) -> bytes:
    frames = hostile_frames(PAYLOADS + [BIG])
    if bad_frame:
        frames.insert(3, BAD_FRAME)
    return b"".join([*frames, chunk({}, finish="tool_calls", model=MODEL), DONE])


@pytest.fixture
def watched(page):
    """The page, with dialogs and CSP violations recorded."""
    dialogs: list[str] = []

    def on_dialog(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.add_init_script(WATCH)
    page.set_viewport_size(VIEWPORT)
    page.dialogs = dialogs
    return page


def assert_inert(page, where: str) -> None:
    page.wait_for_timeout(300)  # onerror/onload of anything injected would have run
    assert page.evaluate("typeof window.__xss") == "undefined", where
    assert page.dialogs == [], where
    assert page.evaluate("window.__violations") == [], where
    assert page.locator("main").locator(INJECTED).count() == 0, where
    assert page.locator("script:not([src])").count() == 0, where


def body_text(page) -> str:
    return page.locator("main").inner_text()


def test_the_payload_corpus_never_runs(watched, daphne_url, transactional_db, output_path):
    page = watched
    clean = store_stream(
        hostile_stream(bad_frame=False), stream_format="sse", title=TITLE, source_url=PAYLOADS[5]
    )
    broken = store_stream(hostile_stream(bad_frame=True), stream_format="sse", title=PAYLOADS[2])

    # The listener sees violations: an inline script added to the page is blocked and reported.
    page.goto(daphne_url + clean.get_absolute_url())
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.__inline = 1'; document.body.appendChild(s); }"
    )
    page.wait_for_function("window.__violations.length > 0")
    assert page.evaluate("typeof window.__inline") == "undefined"
    assert page.evaluate("window.__violations[0].directive").startswith("script-src")
    page.reload()

    # The capture page: title, model, text, every call card, frames, the lens matrix loaded in.
    # The lens runs are computed in the background at the first visit: give them time.
    expect(page.locator("#lenses")).to_have_attribute("data-state", "loaded", timeout=60_000)
    expect(page.locator("h1")).to_have_text(TITLE)
    text = page.locator("pre.stream-text").inner_text()
    for payload in PAYLOADS:
        assert payload in text, payload
    assert "49" not in text
    expect(page.locator(".facts dd.mono").filter(has_text=MODEL).first).to_be_visible()
    expect(page.locator(".facts dd.wrap")).to_have_text(PAYLOADS[5])  # the source url
    cards = page.locator("#calls").inner_text()
    for payload in PAYLOADS[:10]:  # the first page of call cards
        assert payload in cards, payload
    assert PAYLOADS[0] in page.locator("#lens-matrix").inner_text()
    assert_inert(page, "capture page")
    page.screenshot(path=f"{output_path}/xss_capture.png", full_page=True)
    page.locator("#text").scroll_into_view_if_needed()
    page.screenshot(path=f"{output_path}/xss_capture_text.png")

    # The second page of calls holds the 10 KB one.
    page.goto(daphne_url + clean.get_absolute_url() + "?calls=2#calls")
    assert BIG[:200] in page.locator("#calls").inner_text()
    assert_inert(page, "second call page")

    # A frame permalink: the state panel names every call; the raw frame is shown as text.
    page.goto(daphne_url + f"/c/{clean.slug}/frames/31/")
    state = page.locator("aside.state").inner_text()
    assert PAYLOADS[0] in state and PAYLOADS[9] in state
    focus = page.locator("#f-31")
    expect(focus).to_be_visible()
    assert "onerror" in focus.inner_text() or "script" in focus.inner_text()
    assert_inert(page, "frame permalink")
    page.screenshot(path=f"{output_path}/xss_frame.png", full_page=True)

    # The broken capture: its non-JSON frame's raw text, at its permalink.
    page.goto(daphne_url + f"/c/{broken.slug}/frames/3/")
    expect(page.locator("#f-3 td.raw pre")).to_have_text(BAD_FRAME.decode().rstrip("\n"))
    expect(page.locator("h1")).to_have_text(PAYLOADS[2])
    assert_inert(page, "bad frame permalink")
    page.goto(daphne_url + broken.get_absolute_url())
    assert_inert(page, "broken capture page")
    page.screenshot(path=f"{output_path}/xss_broken.png", full_page=True)

    # The lens page.
    page.goto(daphne_url + f"/c/{clean.slug}/lenses/")
    expect(page.locator("#lens-matrix")).to_be_visible(timeout=60_000)  # runs may still run
    assert PAYLOADS[1] in body_text(page) and TITLE in body_text(page)
    assert_inert(page, "lens page")
    page.screenshot(path=f"{output_path}/xss_lenses.png", full_page=True)

    # The compare page: both sides, and what was typed into its form.
    page.goto(daphne_url + "/compare/?" + urlencode({"a": clean.slug, "b": broken.slug}))
    compared = body_text(page)
    assert TITLE in compared and PAYLOADS[2] in compared and PAYLOADS[3] in compared
    assert_inert(page, "compare page")
    page.screenshot(path=f"{output_path}/xss_compare.png", full_page=True)
    page.goto(daphne_url + "/compare/?" + urlencode({"a": PAYLOADS[5], "b": PAYLOADS[3]}))
    expect(page.locator("input[name=a]")).to_have_value(PAYLOADS[5])
    expect(page.locator("input[name=b]")).to_have_value(PAYLOADS[3])
    assert_inert(page, "compare form")

    # The list.
    page.goto(daphne_url + "/")
    expect(page.locator("td.title a").filter(has_text="onerror")).to_have_text(TITLE)
    expect(page.locator("td.mono").first).to_have_text(MODEL)
    assert_inert(page, "list")
    page.screenshot(path=f"{output_path}/xss_list.png", full_page=True)


def _post(url: str, data: bytes, content_type: str = "application/json") -> dict:
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": content_type}
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        return orjson.loads(response.read())


def test_the_payload_corpus_never_runs_on_a_live_page(
    watched, daphne_url, transactional_db, output_path
):
    """live.js builds rows and cards from websocket messages: text only."""
    page = watched
    opened = _post(daphne_url + "/api/ingest", orjson.dumps({"title": TITLE, "format": "sse"}))
    page.goto(opened["url"])
    expect(page.locator("[data-live-status]")).to_have_attribute("data-state", "live")
    frames = hostile_frames(PAYLOADS[:8])
    _post(opened["append_url"], b"".join(frames), "application/octet-stream")
    rows = page.locator("#frames-body tr[id^='f-']")
    expect(rows).to_have_count(len(frames))
    expect(page.locator("#calls article.call")).to_have_count(8)
    live_text = page.locator("#calls").inner_text()
    for payload in PAYLOADS[:8]:  # ids, names, arguments in the live call cards
        assert payload in live_text, payload
    assert_inert(page, "live page")
    # Then a frame that is no JSON: its raw text in a new row, and the refusal.
    _post(opened["append_url"], BAD_FRAME, "application/octet-stream")
    expect(rows).to_have_count(len(frames) + 1)
    bad_row = page.locator(f"#f-{len(frames)} td.raw pre")
    expect(bad_row).to_have_text(BAD_FRAME.decode().rstrip("\n"))
    assert_inert(page, "live page, bad frame")
    page.screenshot(path=f"{output_path}/xss_live.png", full_page=True)

    _post(opened["close_url"], b"")
    expect(page.locator("[data-outcome-badge]")).not_to_have_text("live")
    assert_inert(page, "live page, closed")
    page.reload()
    expect(page.locator("h1")).to_have_text(TITLE)
    assert_inert(page, "closed capture page")
