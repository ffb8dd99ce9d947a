"""Real Chromium watching a proxy capture grow: the real OpenAI SDK streams a
paced scenario through the recording proxy (from a fake upstream of this
module's own) while the capture page is open.  Frame rows appear without a
reload, the refusal (IDENTITY_CONFLICT: the call is renamed by its last
piece) shows up the moment it is decided, and the capture closes refused."""

from __future__ import annotations

import json
import re
import time

import pytest
from live_helpers import TOOLS, SdkStream, wait_for
from playwright.sync_api import expect

from inspector.live.fake_upstream import FakeUpstream

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

VIEWPORT = {"width": 1280, "height": 900}
SCENARIO = "paced-conflict"
# The fake keeps to its schedule (a late frame does not push the rest back), so the
# 57 frames take 4.6 s: room for a loaded machine to load the page and watch it grow.
PACE_MS = 80
ARGUMENTS = json.dumps({"city": "Paris", "unit": "celsius", "days": 3, "note": "slow " * 30})
PIECES = [ARGUMENTS[i : i + 4] for i in range(0, len(ARGUMENTS), 4)]
MESSAGES = [{"role": "user", "content": "Weather in Paris for 3 days?"}]


def chunk(delta: dict, finish: str | None = None) -> str:
    body = {
        "id": "chatcmpl-paced",
        "object": "chat.completion.chunk",
        "created": 1718000000,
        "model": "gpt-paced",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return "data: " + json.dumps(body) + "\n\n"


def tool(**fields) -> dict:
    function = {k: fields.pop(k) for k in ("name", "arguments") if k in fields}
    return {"tool_calls": [{"index": 0, **fields, "function": function}]}


def refused_stream() -> str:
    """A call whose arguments arrive in many small pieces and which the last
    piece renames: IDENTITY_CONFLICT at that frame, near the end."""
    frames = [chunk({"role": "assistant", "content": None})]
    frames.append(chunk(tool(id="call_p", type="function", name="get_weather", arguments="")))
    frames += [chunk(tool(arguments=piece)) for piece in PIECES[:-1]]
    frames.append(chunk(tool(name="get_forecast", arguments=PIECES[-1])))  # the conflict
    frames.append(chunk({}, "tool_calls"))
    frames.append("data: [DONE]\n\n")
    return "".join(frames)


@pytest.fixture(scope="module")
def paced_fake(tmp_path_factory):
    directory = tmp_path_factory.mktemp("paced-browser-scenarios")
    (directory / f"{SCENARIO}.sse").write_text(refused_stream())
    (directory / f"{SCENARIO}.json").write_text(json.dumps({"pace_ms": PACE_MS}))
    fake = FakeUpstream(directory).start()
    yield fake
    fake.stop()


def frame_numbers(page) -> list[int]:
    ids = page.eval_on_selector_all("#frames-body tr[id^='f-']", "rows => rows.map(r => r.id)")
    return [int(i[2:]) for i in ids]


def test_a_capture_page_grows_while_the_sdk_streams_through_the_proxy_and_shows_the_refusal(
    page, daphne_factory, paced_fake, output_path
):
    from inspector.captures.models import Capture

    base = daphne_factory({"INSPECTOR_UPSTREAMS": f"fake={paced_fake.url}"})
    scenario = paced_fake.scenario(SCENARIO)
    total = len(scenario.frames)
    conflict = total - 3  # the renaming frame's number
    assert total >= 30

    page.set_viewport_size(VIEWPORT)
    client = SdkStream(base, SCENARIO, MESSAGES, tools=TOOLS)
    slug = client.slugs.get(timeout=15)
    assert slug, client.error
    wait_for(lambda: Capture.objects.filter(slug=slug).exists(), 10, f"capture {slug}")
    page.goto(f"{base}/c/{slug}/")
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    badge = page.locator("[data-outcome-badge]")
    expect(badge).to_have_text("live")

    # Frame rows appear without a reload while the stream is still live.
    counts: list[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(counts) < 4:
        counts.append(len(frame_numbers(page)))
        page.wait_for_timeout(300)
    during = frame_numbers(page)
    assert counts == sorted(counts) and counts[-1] > counts[0], counts
    assert during == list(range(len(during))) and len(during) < total, during
    assert page.locator(".refusal-code, #call-0 .badge.outcome-refused").count() == 0
    page.screenshot(path=f"{output_path}/proxy_live_growing.png", full_page=True)

    # The renaming frame: the refusal is shown as it is decided.
    expect(page.locator("#call-0 .badge.outcome-refused")).to_have_text(
        "IDENTITY_CONFLICT", timeout=15_000
    )
    expect(page.locator(".refusal .refusal-frame-link")).to_have_text(f"frame {conflict}")
    expect(page.locator(f"#f-{conflict}")).to_have_class(re.compile(r"\bis-refusal\b"))
    expect(page.locator("#call-0")).to_have_class(re.compile(r"\bis-refusal\b"))
    expect(page.locator("#call-0 .call-name")).to_have_text("get_weather")

    # The close: outcome refused, every frame once.
    expect(badge).to_have_text("refused", timeout=15_000)
    expect(page.locator("[data-live-capture]")).to_have_count(0)  # the finished page, in place
    expect(page.locator(".attempt.is-current .badge")).to_have_text("refused")
    assert frame_numbers(page) == list(range(total))
    expect(page.locator("[data-frame-count]").first).to_have_text(str(total))
    page.screenshot(path=f"{output_path}/proxy_live_refused.png", full_page=True)
    page.screenshot(path=f"{output_path}/proxy_live_refused_top.png")  # the header, readable

    client.join(20)
    assert not client.is_alive() and client.error is None, client.error
    assert len(client.chunks) == total - 1  # every frame but [DONE] reached the SDK
    capture = Capture.objects.get(slug=slug)
    assert capture.source == "proxy" and capture.outcome == "refused"
    assert capture.refusal_code == "IDENTITY_CONFLICT" and capture.frame_count == total
    assert [s.ended for s in paced_fake.served(SCENARIO)] == ["complete"]
