"""Real Chromium against a real daphne server: the lens matrix's per-lens
Minimize forms show the same progress as the capture page's Minimize (the
same job, status route, partial and script): with JavaScript, in the matrix
the capture page loads into place, a progress bar drawn from the job's
reports, then the minimized capture; without JavaScript, the job's status
page, which reloads itself until it goes to the result."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

pytestmark = pytest.mark.browser

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
VIEWPORT = {"width": 1400, "height": 950}
KEEPS = "keeps LiteLLM diverges: runs a call strict refuses (AMBIGUOUS_CONTINUATION)"
SEARCHING = "searching for the smallest stream on which LiteLLM still parts from strict"


def refused_capture() -> Capture:
    data = (DEMO / "ambiguous_continuation.sse").read_bytes()
    return store_stream(data, stream_format="sse", title="two calls, one index")


def at(url: str) -> re.Pattern:
    return re.compile(re.escape(url) + "$")


def test_a_lens_minimize_shows_its_progress_then_the_result(
    browser, daphne_url, transactional_db, output_path
):
    """The first submit is held in the page (a listener on the form cancels
    it, after which reproducers.js's still runs) and the same form is posted
    by the test (sharing the page's cookies), so the page stays to be seen
    with the job's last report; then the form is sent for real."""
    original = refused_capture()
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(daphne_url + original.get_absolute_url())
        form = page.locator("#lens-matrix form.minimize-lens", has_text="LiteLLM")
        expect(form).to_be_visible(timeout=60_000)  # the lens runs may still be running
        form.evaluate(
            "form => form.addEventListener('submit', event => event.preventDefault(), {once: true})"
        )
        form.locator("button[type=submit]").click()
        progress = form.locator("[data-minimize-progress]")
        expect(progress).to_be_visible()
        expect(progress).to_contain_text(SEARCHING)
        expect(form.locator("[data-minimize-button]")).to_be_disabled()
        expect(form.locator("[data-minimize-button]")).to_have_text("Minimizing…")

        fields = form.evaluate("form => Object.fromEntries(new FormData(form))")
        assert fields["lens"] == "litellm" and fields["job"]
        posted = page.request.post(
            daphne_url + f"/c/{original.slug}/minimize", form=fields, max_redirects=0
        )
        assert posted.status == 303
        derived = Capture.objects.get(derived_from=original)
        assert posted.headers["location"] == derived.get_absolute_url()
        expect(form.locator("[data-minimize-detail]")).to_contain_text(
            re.compile(
                rf"^\d+ candidates tried · {derived.frame_count} of \d+ frames · "
                rf"{derived.byte_size} of {original.byte_size} bytes · [\d.]+ of 30 s$"
            )
        )
        bar = form.locator("[data-minimize-bar]")
        expect(bar).to_be_visible()
        assert 0 < float(bar.evaluate("bar => bar.value")) <= 1
        page.locator("#lenses").screenshot(path=f"{output_path}/lens_minimize_progress.png")

        with page.expect_navigation():
            form.evaluate("form => form.submit()")
        second = Capture.objects.filter(derived_from=original).exclude(pk=derived.pk).get()
        expect(page).to_have_url(at(second.get_absolute_url()))
        expect(page.locator("p.derivation")).to_contain_text(KEEPS)
        page.screenshot(path=f"{output_path}/lens_minimize_result.png", full_page=True)
    finally:
        context.close()


def test_without_javascript_the_lens_job_page_reloads_itself_to_the_result(
    browser, daphne_url, transactional_db, output_path
):
    """The lens page of its own posts its form; the job the form names is
    followed on its status page (the link in <noscript>), opened once the
    run is known to the server: it reloads itself until the run ends, then
    goes to the minimized capture by itself."""
    original = refused_capture()
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(daphne_url + f"/c/{original.slug}/lenses/")
        form = page.locator("#lens-matrix form.minimize-lens", has_text="LiteLLM")
        expect(form).to_be_visible(timeout=60_000)  # the page reloads itself while computing
        watch = form.locator("a[data-minimize-watch]")
        expect(watch).to_be_visible()
        status_url = daphne_url + watch.get_attribute("href")
        page.locator(".lens-minimize").screenshot(path=f"{output_path}/lens_forms_no_js.png")
        form.locator("button[type=submit]").click(no_wait_after=True)

        status = context.new_page()
        deadline = time.monotonic() + 60
        while status.goto(status_url).status == 404:  # not started yet
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)
        expect(status.locator("h1")).to_have_text("Minimize keeping LiteLLM’s divergence")
        expect(status.locator("progress")).to_be_visible()
        status.screenshot(path=f"{output_path}/lens_minimize_status_no_js.png", full_page=True)
        # No script on that page: only its own refreshes can bring it to the result.
        expect(status.locator("p.derivation")).to_contain_text(KEEPS, timeout=60_000)
        derived = Capture.objects.get(derived_from=original)
        expect(status).to_have_url(at(derived.get_absolute_url()))
        expect(page).to_have_url(at(derived.get_absolute_url()))
    finally:
        context.close()
