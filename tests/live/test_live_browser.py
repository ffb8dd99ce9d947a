"""Real Chromium watching captures grow: a capture page fed through HTTP ingest
on the same daphne grows frame rows and a call card without reloading, shows
the refusal the moment it is decided and the outcome at close; the list page
notices a new capture and marks it live, then closed."""

from __future__ import annotations

import re
import time
import urllib.request

import orjson
import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1280, "height": 900}
HOSTILE = "<b>bold</b><img src=x onerror=window.__xss=1>"
ARGUMENTS = orjson.dumps({"city": "Paris " + HOSTILE, "unit": "celsius", "days": 3}).decode()
PIECES = [ARGUMENTS[i : i + 12] for i in range(0, len(ARGUMENTS), 12)]


def chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-live",
        "object": "chat.completion.chunk",
        "model": "gpt-live",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def tool(**fields) -> dict:
    entry = {"index": 0}
    function = {k: fields.pop(k) for k in ("name", "arguments") if k in fields}
    return {"tool_calls": [{**entry, **fields, "function": function}]}


def refused_stream() -> list[bytes]:
    """Frames of a call whose arguments arrive in pieces, renamed with the last
    piece: IDENTITY_CONFLICT at that frame."""
    frames = [chunk({"role": "assistant", "content": None})]
    frames.append(chunk(tool(id="call_w", type="function", name="get_weather", arguments="")))
    frames += [chunk(tool(arguments=piece)) for piece in PIECES[:-1]]
    frames.append(chunk(tool(name="get_forecast", arguments=PIECES[-1])))  # the conflict
    frames.append(chunk({}, "tool_calls"))
    frames.append(b"data: [DONE]\n\n")
    return frames


def post(url: str, data: bytes = b"", content_type: str = "application/octet-stream") -> dict:
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=10) as response:
        return orjson.loads(response.read())


def open_ingest(base: str, title: str) -> dict:
    return post(base + "/api/ingest", orjson.dumps({"title": title}), "application/json")


def frame_numbers(page) -> list[int]:
    ids = page.eval_on_selector_all("#frames-body tr[id^='f-']", "rows => rows.map(r => r.id)")
    return [int(i[2:]) for i in ids]


def test_a_capture_page_grows_as_the_stream_arrives_and_shows_the_refusal(
    page, daphne_url, transactional_db, output_path
):
    frames = refused_stream()
    conflict = 1 + len(PIECES)  # the renaming frame's number
    opened = open_ingest(daphne_url, "watched live")
    # Two frames and half of the third are stored before the page opens (a late joiner).
    post(opened["append_url"], frames[0] + frames[1] + frames[2][:25])

    page.set_viewport_size(VIEWPORT)
    page.goto(opened["url"])
    status = page.locator("[data-live-status]")
    expect(status).to_have_text("live", timeout=10_000)
    expect(page.locator("[data-outcome-badge]")).to_have_text("live")
    assert frame_numbers(page) == [0, 1]  # server-rendered

    post(opened["append_url"], frames[2][25:] + frames[3])
    card = page.locator("#call-0")
    expect(page.locator("#f-3")).to_be_visible(timeout=10_000)
    expect(card.locator(".call-name")).to_have_text("get_weather")
    expect(card.locator(".call-id")).to_have_text("call_w")
    expect(card.locator("table.fragments tbody tr")).to_have_count(2)
    expect(page.locator("#f-2 td.calls")).to_have_text("#0")

    # The rest of the arguments, a frame at a time, cut in the middle of frames.
    rest = b"".join(frames[4:conflict])
    for start in range(0, len(rest), 150):
        post(opened["append_url"], rest[start : start + 150])
        time.sleep(0.05)
    fragments = len(PIECES) - 1  # the renaming frame's piece is refused, not added
    expect(card.locator("table.fragments tbody tr")).to_have_count(fragments)
    expect(page.locator(f"#f-{conflict - 1}")).to_be_visible()
    last_state = card.locator("table.fragments tbody tr").last.locator("td.state")
    expect(last_state).to_have_text(re.compile(r"^depth 1\b"))
    # Stream content arrives as text, never as markup.
    last_so_far = card.locator("table.fragments tbody tr").last.locator("td.so-far pre")
    expect(last_so_far).to_contain_text(HOSTILE.replace('"', '\\"'))
    assert card.locator("td.fragment b, td.so-far b, td.fragment img").count() == 0
    assert page.evaluate("window.__xss") is None
    page.screenshot(path=f"{output_path}/live_growing.png", full_page=True)

    # The renaming frame: the refusal is shown at once, before the capture closes.
    post(opened["append_url"], frames[conflict])
    expect(card.locator(".badge.outcome-refused")).to_have_text("IDENTITY_CONFLICT")
    expect(page.locator("[data-live-refusal]")).to_contain_text("a later delta names it")
    expect(page.locator("[data-outcome-badge]")).to_have_text("live")
    expect(page.locator(f"#f-{conflict}")).to_have_class(re.compile(r"\bis-refusal\b"))
    expect(card).to_have_class(re.compile(r"\bis-refusal\b"))
    page.screenshot(path=f"{output_path}/live_refusal.png", full_page=True)

    # A viewer who joins after the refusal was decided sees it too (from the snapshot).
    late = page.context.new_page()
    late.set_viewport_size(VIEWPORT)
    late.goto(opened["url"])
    expect(late.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    expect(late.locator("#call-0 .badge.outcome-refused")).to_have_text("IDENTITY_CONFLICT")
    expect(late.locator("[data-live-refusal]")).to_contain_text("a later delta names it")
    expect(late.locator("[data-outcome-badge]")).to_have_text("live")
    expect(late.locator(f"#f-{conflict}")).to_have_class(re.compile(r"\bis-refusal\b"))
    late.screenshot(path=f"{output_path}/live_refusal_late_joiner.png", full_page=True)
    late.close()

    def column(css: str) -> list[str]:
        cells = page.locator(f"#call-0 table.fragments tbody td.{css}").all_inner_texts()
        return [" ".join(text.split()) for text in cells]

    live_view = {css: column(css) for css in ("state", "fragment", "so-far")}

    post(opened["append_url"], b"".join(frames[conflict + 1 :]))
    closed = post(opened["close_url"])
    assert closed["outcome"] == "refused" and closed["refusal"]["code"] == "IDENTITY_CONFLICT"
    # The finished page takes the live one's place, no reload: verdict, refusal, cards.
    expect(page.locator("[data-outcome-badge]")).to_have_text("refused")
    expect(page.locator(".refusal-code")).to_have_text("IDENTITY_CONFLICT")
    assert page.locator("[data-live-capture]").count() == 0
    assert frame_numbers(page) == list(range(len(frames)))  # none lost, none twice
    expect(page.locator("[data-frame-count]").first).to_have_text(str(len(frames)))
    expect(page.locator("#call-0 .call-name")).to_have_text("get_weather")
    expect(page.locator("#call-0 table.fragments tbody tr")).to_have_count(fragments)
    assert {css: column(css) for css in live_view} == live_view
    # The swapped-in page's lens matrix loads, as on a page opened finished.
    expect(page.locator("#lenses")).to_have_attribute("data-state", re.compile(r"\w"))
    page.screenshot(path=f"{output_path}/live_closed.png", full_page=True)

    # Reloading shows the same.
    parts = ("#capture-head", "#calls", "#frames")
    swapped = [page.locator(part).inner_text() for part in parts]
    page.reload()
    expect(page.locator(".refusal-code")).to_have_text("IDENTITY_CONFLICT")
    assert [page.locator(part).inner_text() for part in parts] == swapped
    page.screenshot(path=f"{output_path}/live_reloaded.png", full_page=True)


def test_the_list_notices_a_new_capture_and_marks_it_live_then_closed(
    page, daphne_url, transactional_db, output_path
):
    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + "/")
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    notice = page.locator("[data-new-captures]")
    expect(notice).to_be_hidden()

    opened = open_ingest(daphne_url, "appears on the list")
    expect(notice).to_be_visible(timeout=10_000)
    expect(notice).to_contain_text("1 new capture")
    page.screenshot(path=f"{output_path}/list_new_capture.png", full_page=True)

    notice.locator("a").click()
    row = page.locator(f"tr[data-slug='{opened['slug']}']")
    badge = row.locator("[data-outcome-badge]")
    expect(badge).to_have_text("live")
    expect(badge).to_have_class(re.compile(r"\blive-badge\b"))
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    page.screenshot(path=f"{output_path}/list_live_badge.png", full_page=True)

    post(opened["append_url"], b"".join(refused_stream()))
    post(opened["close_url"])
    expect(badge).to_have_text("refused", timeout=10_000)
    expect(badge).not_to_have_class(re.compile(r"\blive-badge\b"))
    expect(notice).to_be_hidden()
    page.screenshot(path=f"{output_path}/list_closed.png", full_page=True)


def test_the_attempt_strip_walks_through_the_retries(
    page, daphne_url, transactional_db, output_path
):
    from pathlib import Path

    from inspector.captures import models
    from inspector.captures.store import store_stream

    cut = (Path(__file__).parents[2] / "inspector/captures/demo/cut_connection.sse").read_bytes()
    usage = {"prompt_tokens": 57, "completion_tokens": 21, "total_tokens": 78}
    ok = chunk({"content": "done"}) + chunk({}, "stop") + b"data: [DONE]\n\n"
    ok = ok.replace(
        b'"finish_reason":"stop"}]', b'"finish_reason":"stop"}],"usage":' + orjson.dumps(usage)
    )
    attempts = [
        store_stream(
            data,
            stream_format="sse",
            title="weather for Paris",
            source=models.Capture.Source.PROXY,
            retry_chain="grp-browser",
            attempt=number,
        )
        for number, data in enumerate([cut, cut, ok], start=1)
    ]
    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + attempts[0].get_absolute_url())
    strip = page.locator("nav.attempts")
    expect(strip.locator("li.attempt")).to_have_count(3)
    expect(strip.locator("li.is-current .attempt-n")).to_have_text("1")
    expect(strip.locator("li.attempt").nth(0)).to_contain_text("INCOMPLETE_STREAM")
    expect(strip.locator("li.attempt").nth(0)).to_contain_text("retryable")
    expect(strip.locator("li.attempt").nth(2)).to_contain_text("57 in · 21 out")
    page.screenshot(path=f"{output_path}/attempt_1.png")
    strip.locator("li.attempt").nth(2).locator("a").click()
    expect(page).to_have_url(daphne_url + attempts[2].get_absolute_url())
    expect(page.locator("nav.attempts li.is-current .attempt-n")).to_have_text("3")
    expect(page.locator(".verdict .badge")).to_have_text("ok")
    page.screenshot(path=f"{output_path}/attempt_3.png")
