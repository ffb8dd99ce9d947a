"""Real Chromium: each dialect's demo capture, a frame permalink and a
fragment permalink read in that dialect's terms (screenshots at desktop width)."""

from __future__ import annotations

import re

import pytest
from dialect_streams import DEMO
from playwright.sync_api import expect

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1440, "height": 900}

# demo file, a term its call cards show, a frame to open, the frame's event or type
DEMOS = {
    "responses": ("responses_parallel_calls_ok.sse", "item id fc_demo_hotel", 16),
    "messages": ("messages_parallel_calls_ok.sse", "tool_use id toolu_01Hotel", 22),
    "gemini": ("gemini_parallel_calls_ok.sse", "functionCall part 1 of candidate 0", 3),
}


@pytest.mark.parametrize("dialect", sorted(DEMOS))
def test_a_dialect_demo_its_frame_and_fragment_permalinks(
    dialect, page, daphne_url, transactional_db, output_path
):
    name, term, frame = DEMOS[dialect]
    capture = store_stream((DEMO / name).read_bytes(), stream_format="sse", title=name)
    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + capture.get_absolute_url())
    expect(page.locator(".dialect-note")).to_contain_text(f"({dialect}), told by its frames")
    expect(page.locator(".call-head").filter(has_text=term)).to_have_count(1)
    page.screenshot(path=f"{output_path}/{dialect}_capture.png", full_page=True)
    hotel = page.locator("article.call").filter(has_text="search_hotels")
    hotel.screenshot(path=f"{output_path}/{dialect}_call_card.png")

    page.goto(f"{daphne_url}/c/{capture.slug}/frames/{frame}/#f-{frame}")
    row = page.locator(f"#f-{frame}")
    expect(row).to_have_class(re.compile(r"\bis-focus\b"))
    expect(page.locator("#state-title")).to_have_text(f"State at frame {frame}")
    page.screenshot(path=f"{output_path}/{dialect}_frame_{frame}.png")

    strict = capture.assemblies.get(policy="strict")
    call = strict.calls.get(name="search_hotels")
    fragment = call.fragments.order_by("seq").last()
    page.goto(
        f"{daphne_url}/c/{capture.slug}/frames/{fragment.frame}/"
        f"#frag-{call.position}-{fragment.seq}"
    )
    focused = page.locator(f"#frag-{call.position}-{fragment.seq}")
    expect(focused).to_have_class(re.compile(r"\bis-focus\b"))
    expect(focused).to_be_in_viewport()
    # The lens matrix, loaded into place, moves the frames down; the fragment the
    # address names stays in view (not the frame's row).
    expect(page.locator("#lenses")).to_have_attribute("data-state", "loaded", timeout=120_000)
    expect(focused).to_be_in_viewport()
    page.screenshot(path=f"{output_path}/{dialect}_fragment.png")
    assert Capture.objects.filter(dialect=dialect).count() == 1
