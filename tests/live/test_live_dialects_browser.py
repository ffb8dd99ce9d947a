"""Real Chromium watching a Responses, Messages and Gemini capture grow: the
official SDK of each dialect streams a paced stream through the recording
proxy (a fake upstream of this module's own serves the dialect's demo
stream) while the capture page is open.  Frame rows appear without a
reload, the call cards name each call in the dialect's terms, and the
capture closes accepted with every frame once."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from live_helpers import CANARY, wait_for
from playwright.sync_api import expect

from inspector.live.fake_upstream import FakeUpstream

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("transactional_db")]

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
VIEWPORT = {"width": 1280, "height": 900}
# Each stream lasts about this long, so the page opens while it is live.
STREAM_SECONDS = 8.0
# dialect: (the demo stream the fake serves, a term the finished call cards show)
STREAMS = {
    "responses": ("responses_parallel_calls_ok.sse", "item id fc_demo_hotel"),
    "messages": ("messages_parallel_calls_ok.sse", "tool_use id toolu_01Hotel"),
    "gemini": ("gemini_parallel_calls_ok.sse", "functionCall part 1 of candidate 0"),
}


def scenario(dialect: str) -> str:
    return f"live-{dialect}"


@pytest.fixture(scope="module")
def paced_fake(tmp_path_factory):
    directory = tmp_path_factory.mktemp("paced-dialect-scenarios")
    for dialect, (demo, _) in STREAMS.items():
        data = (DEMO / demo).read_bytes()
        (directory / f"{scenario(dialect)}.sse").write_bytes(data)
        pace_ms = 1000 * STREAM_SECONDS / data.count(b"data:")
        (directory / f"{scenario(dialect)}.json").write_text(json.dumps({"pace_ms": pace_ms}))
    fake = FakeUpstream(directory).start()
    yield fake
    fake.stop()


def stream_with_the_sdk(base: str, dialect: str) -> None:
    """What a user of the dialect's SDK runs, with only the base URL changed."""
    model = scenario(dialect)
    if dialect == "responses":
        client = openai.OpenAI(api_key=CANARY, base_url=f"{base}/proxy/fake/v1", max_retries=0)
        with client.responses.stream(model=model, input="trip?") as stream:
            stream.get_final_response()
    elif dialect == "messages":
        client = anthropic.Anthropic(api_key=CANARY, base_url=f"{base}/proxy/fake", max_retries=0)
        with client.messages.stream(
            model=model, max_tokens=64, messages=[{"role": "user", "content": "trip?"}]
        ) as stream:
            stream.get_final_message()
    else:
        options = genai_types.HttpOptions(base_url=f"{base}/proxy/fake/")
        client = genai.Client(api_key=CANARY, http_options=options)
        for _ in client.models.generate_content_stream(model=model, contents="trip?"):
            pass


class SdkThread(threading.Thread):
    def __init__(self, base: str, dialect: str) -> None:
        super().__init__(daemon=True)
        self.base, self.dialect, self.error = base, dialect, None
        self.start()

    def run(self) -> None:
        try:
            stream_with_the_sdk(self.base, self.dialect)
        except BaseException as error:  # reported by the test
            self.error = error


def frame_numbers(page) -> list[int]:
    ids = page.eval_on_selector_all("#frames-body tr[id^='f-']", "rows => rows.map(r => r.id)")
    return [int(i[2:]) for i in ids]


@pytest.mark.parametrize("dialect", sorted(STREAMS))
def test_a_dialects_capture_page_grows_while_its_sdk_streams_through_the_proxy(
    page, daphne_factory, paced_fake, output_path, dialect
):
    from inspector.captures.models import Capture

    base = daphne_factory({"INSPECTOR_UPSTREAMS": f"fake={paced_fake.url}"})
    served = paced_fake.scenario(scenario(dialect))
    total = len(served.frames)
    assert total >= 6
    # (Its dialect is known only from its first frames: look for a capture newer than any.)
    before = Capture.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    sdk = SdkThread(base, dialect)
    capture = wait_for(
        lambda: Capture.objects.filter(pk__gt=before).order_by("pk").first(), 15, "a capture"
    )
    page.set_viewport_size(VIEWPORT)
    page.goto(f"{base}/c/{capture.slug}/")
    expect(page.locator("[data-live-status]")).to_have_text("live", timeout=10_000)
    # The route named the dialect: the page reads it so from the first frame.
    expect(page.locator(".dialect-note")).to_contain_text(
        f"({dialect}): the recorded request URL names it"
    )

    # Frame rows arrive without a reload while the stream is live.
    counts: list[int] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(counts) < 4:
        counts.append(len(frame_numbers(page)))
        page.wait_for_timeout(served.pace_ms + 50)
    assert counts == sorted(counts) and counts[-1] > counts[0], counts
    assert counts[0] < total, counts
    page.screenshot(path=f"{output_path}/{dialect}_live_growing.png", full_page=True)

    # The close: accepted, every frame once, the calls in the dialect's terms.
    expect(page.locator("[data-outcome-badge]")).to_have_text("ok", timeout=20_000)
    capture.refresh_from_db()
    assert capture.dialect == dialect
    expect(page.locator("[data-live-capture]")).to_have_count(0)  # the finished page, in place
    assert frame_numbers(page) == list(range(total))
    page.reload()
    _, term = STREAMS[dialect]
    expect(page.locator(".call-head").filter(has_text=term)).to_have_count(1)
    page.screenshot(path=f"{output_path}/{dialect}_live_closed.png", full_page=True)
    sdk.join(10)
    assert sdk.error is None, sdk.error
