"""Real Chromium against a real daphne server: a refused capture's lens
matrix (loaded into the page by reproducers.js) highlights where a library
would part from strict and says so; the Minimize button shows its progress,
then lands on the minimized capture, linked both ways; the comparison of the
two side by side; and without JavaScript the matrix is a page of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
VIEWPORT = {"width": 1400, "height": 950}
CODE = "AMBIGUOUS_CONTINUATION"


def refused_capture() -> Capture:
    data = (DEMO / "ambiguous_continuation.sse").read_bytes()
    return store_stream(data, stream_format="sse", title="two calls, one index")


def test_lens_matrix_then_minimize_then_compare(page, daphne_url, transactional_db, output_path):
    original = refused_capture()
    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + original.get_absolute_url())
    expect(page.locator(".refusal-code")).to_have_text(CODE)

    # The matrix is loaded into its section: calls by lenses, divergences highlighted.
    section = page.locator("#lenses")
    matrix = section.locator("#lens-matrix")
    # The lens runs are computed in the background at the first visit: give them time
    # (the matrix is visible at once, "computing…"; the fork server that starts then
    # imports LiteLLM and LangChain, about 10 s of CPU, far longer on a busy machine).
    expect(matrix).to_be_visible(timeout=60_000)
    expect(section).to_have_attribute("data-state", "loaded", timeout=120_000)
    heads = matrix.locator("thead th.lens-col .lens-title")
    expect(heads).to_have_text(["strict", "the OpenAI SDK", "Vercel", "LiteLLM", "LangChain"])
    litellm = matrix.locator('#lens-row-strict-1 td[data-lens="litellm"]')
    expect(litellm).to_have_class(re.compile(r"\bdiverges\b"))
    expect(litellm.locator(".lens-name")).to_have_text("stat_file")
    background = litellm.evaluate("cell => getComputedStyle(cell).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")  # highlighted
    sentence = matrix.locator('ol.divergences li[data-lens="litellm"]')
    expect(sentence).to_contain_text(f"strict refuses {CODE}; LiteLLM would run stat_file with")
    expect(matrix.locator('#lens-row-strict-1 td[data-lens="vercel"]')).not_to_have_class(
        re.compile(r"\bdiverges\b")
    )
    # Its ≠ reference leads to its sentence.
    litellm.locator("a.lens-ref").click()
    expect(page).to_have_url(re.compile(r"#lens-divergence-\d+$"))
    section.scroll_into_view_if_needed()
    page.screenshot(path=f"{output_path}/lens_matrix.png", full_page=True)
    section.screenshot(path=f"{output_path}/lens_matrix_section.png")

    # Minimize.  The first submit is held in the page (a listener after
    # reproducers.js's cancels it) to see the progress; then the form is sent.
    form = page.locator("form.minimize")
    form.evaluate(
        "form => form.addEventListener('submit', event => event.preventDefault(), {once: true})"
    )
    form.locator("button[type=submit]").click()
    progress = form.locator("[data-minimize-progress]")  # the matrix's lens forms have theirs
    expect(progress).to_be_visible()
    expect(progress).to_contain_text(re.compile(r"\d+ s of at most 30 s"))
    expect(progress.locator("progress[data-minimize-bar]")).to_be_visible()
    expect(form.locator("[data-minimize-button]")).to_be_disabled()
    expect(form.locator("[data-minimize-button]")).to_have_text("Minimizing…")
    page.locator("#capture-head").screenshot(path=f"{output_path}/minimize_progress.png")
    with page.expect_navigation():
        form.evaluate("form => form.submit()")

    expect(page).not_to_have_url(re.compile(re.escape(original.get_absolute_url()) + "$"))
    derived = Capture.objects.get(derived_from=original)
    expect(page).to_have_url(re.compile(re.escape(derived.get_absolute_url()) + "$"))
    expect(page.locator(".refusal-code")).to_have_text(CODE)
    derivation = page.locator("p.derivation")
    expect(derivation).to_contain_text(f"minimized from two calls, one index: keeps {CODE}")
    expect(derivation).to_contain_text(
        f"{derived.frame_count} of {original.frame_count} frames, "
        f"{derived.byte_size} of {original.byte_size} bytes"
    )
    expect(page.locator(".message-success")).to_contain_text("Minimized in")
    expect(page.locator("#export")).to_contain_text("two_calls_one_index_minimized.sse")
    page.screenshot(path=f"{output_path}/minimized_capture.png", full_page=True)

    # The link back, and the original lists what was made from it.
    page.locator("p.derivation a[data-original]").click()
    expect(page).to_have_url(re.compile(re.escape(original.get_absolute_url()) + "$"))
    expect(page.locator(".derivatives a[data-derivative]")).to_have_text(derived.title)

    # Compare the two side by side.
    page.locator(".derivatives a", has_text="compare").click()
    expect(page.locator("h1")).to_have_text("Compare two captures")
    expect(page.locator("table.cmp-summary a[data-side=a]")).to_have_text(original.title)
    expect(page.locator("table.cmp-summary a[data-side=b]")).to_have_text(derived.title)
    expect(page.locator(".cmp-frames tr.differs").first).to_be_visible()
    page.screenshot(path=f"{output_path}/compare.png", full_page=True)


def test_without_javascript_the_matrix_is_a_page_of_its_own(
    browser, daphne_url, transactional_db, output_path
):
    original = refused_capture()
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(daphne_url + original.get_absolute_url())
        expect(page.locator("#lens-matrix")).to_have_count(0)
        page.locator("#lenses a[data-lenses-load]").click()
        expect(page).to_have_url(re.compile(r"/lenses/$"))
        diverging = page.locator("#lens-matrix td.lens-cell.diverges").first
        expect(diverging).to_be_visible(timeout=60_000)  # the lens runs may still be running
        expect(page.locator("ol.divergences")).to_contain_text("LiteLLM would run stat_file")
        page.screenshot(path=f"{output_path}/lens_page_no_js.png", full_page=True)
    finally:
        context.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_minimize_keeping_a_lens_divergence(
    browser, daphne_url, transactional_db, output_path, javascript
):
    """The matrix's per-lens form (in the fragment the page loads, or on the
    lens page without JavaScript) posts and lands on the minimized capture."""
    original = refused_capture()
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=javascript)
    try:
        page = context.new_page()
        page.goto(daphne_url + original.get_absolute_url())
        if not javascript:
            page.locator("#lenses a[data-lenses-load]").click()
            expect(page).to_have_url(re.compile(r"/lenses/$"))
        button = page.locator("#lens-matrix form.minimize-lens button", has_text="LiteLLM")
        expect(button).to_be_visible(timeout=60_000)  # the lens runs may still be running
        button.click()
        expect(page.locator("p.derivation")).to_contain_text(
            "keeps LiteLLM diverges: runs a call strict refuses (AMBIGUOUS_CONTINUATION)"
        )
        derived = Capture.objects.get(derived_from=original)
        expect(page).to_have_url(re.compile(re.escape(derived.get_absolute_url()) + "$"))
        expect(page.locator(".refusal-code")).to_have_text(CODE)
        page.screenshot(path=f"{output_path}/lens_minimized_{javascript}.png", full_page=True)
    finally:
        context.close()


def test_minimize_progress_from_the_job_status(browser, daphne_url, transactional_db, output_path):
    """The page polls the status of the job its form names and draws the
    minimizer's own report: candidates tried, frames and bytes against the
    original's.  The submit is held in the page and the same form is posted
    by the test (sharing the page's cookies), so the page stays to be seen;
    without JavaScript the status is a page of its own, linking the result."""
    original = refused_capture()
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(daphne_url + original.get_absolute_url())
        form = page.locator("form.minimize")
        form.evaluate(
            "form => form.addEventListener('submit', event => event.preventDefault(), {once: true})"
        )
        form.locator("button[type=submit]").click()
        job = form.locator("[data-minimize-job]").input_value()
        fields = form.evaluate("form => Object.fromEntries(new FormData(form))")
        assert fields["job"] == job
        posted = page.request.post(
            daphne_url + f"/c/{original.slug}/minimize", form=fields, max_redirects=0
        )
        assert posted.status == 303
        derived = Capture.objects.get(derived_from=original)
        assert posted.headers["location"] == derived.get_absolute_url()

        detail = form.locator("[data-minimize-detail]")
        expect(detail).to_contain_text(
            re.compile(
                rf"^\d+ candidates tried · {derived.frame_count} of \d+ frames · "
                rf"{derived.byte_size} of {original.byte_size} bytes · [\d.]+ of 30 s$"
            )
        )
        bar = form.locator("[data-minimize-bar]")
        expect(bar).to_be_visible()
        # The time spent against the budget while it runs (a fast search's can round
        # to 0), full once the job has ended.
        bar.element_handle().wait_for_element_state("visible")
        page.wait_for_function("bar => bar.value === 1", arg=bar.element_handle(), timeout=30_000)
        page.locator("#capture-head").screenshot(path=f"{output_path}/minimize_job_progress.png")
    finally:
        context.close()

    quiet = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    try:
        page = quiet.new_page()
        page.goto(daphne_url + f"/c/{original.slug}/minimize/{job}")
        expect(page.locator("[data-minimize-detail]")).to_contain_text("candidates tried")
        expect(page.locator("a[data-minimize-result]")).to_have_attribute(
            "href", derived.get_absolute_url()
        )
        page.screenshot(path=f"{output_path}/minimize_status_no_js.png", full_page=True)
    finally:
        quiet.close()
