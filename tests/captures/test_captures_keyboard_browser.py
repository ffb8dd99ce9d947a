"""Real Chromium: keyboard navigation of the frames (j/k, n/p, c, ?) and the
"copy JSON" buttons of a call's final arguments and of a result document."""

from __future__ import annotations

import json
import re

import pytest
from page_helpers import demo
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def chosen(page) -> str:
    return page.locator("#frames-body tr.is-kbd").get_attribute("id")


def test_j_k_n_p_c_and_the_help(page, daphne_url, transactional_db, output_path):
    capture = demo("ambiguous_continuation.sse")
    marked = [row.number for row in capture.frames.order_by("number") if row.marks]
    assert marked
    page.goto(daphne_url + capture.get_absolute_url())
    expect(page.locator("[data-kbd-hint]")).to_be_visible()
    page.keyboard.press("j")
    assert chosen(page) == "f-0"
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    assert chosen(page) == "f-1"
    expect(page).to_have_url(re.compile(r"#f-1$"))
    page.keyboard.press("n")
    assert chosen(page) == f"f-{marked[0]}"
    page.keyboard.press("p")  # nothing marked before it: stays
    assert chosen(page) == f"f-{marked[0]}"
    page.keyboard.press("c")
    button = page.locator(f"#f-{marked[0]} button.copy-link")
    expect(button).to_have_attribute(
        "data-copied", re.compile(rf"/frames/{marked[0]}/#f-{marked[0]}$")
    )

    page.keyboard.press("?")
    help = page.locator("#kbd-help")
    expect(help).to_be_visible()
    page.screenshot(path=f"{output_path}/keyboard_help.png")
    page.keyboard.press("Escape")
    expect(help).to_be_hidden()

    # Typing in a field is never taken for a key.
    page.evaluate("document.body.appendChild(document.createElement('input')).id = 'typing'")
    page.locator("#typing").press("j")
    assert chosen(page) == f"f-{marked[0]}"
    expect(page.locator("#typing")).to_have_value("j")


def test_copy_json_of_the_final_arguments_and_of_the_result(page, daphne_url, transactional_db):
    capture = demo("parallel_calls_ok.sse")
    page.goto(daphne_url + capture.get_absolute_url())
    button = page.locator("#call-0 button.copy-json")
    button.click()
    expect(button).to_have_text("copied")
    assert json.loads(button.get_attribute("data-copied")) == {"city": "Paris", "units": "metric"}

    result = page.locator("button.copy-json", has_text="copy strict JSON")
    result.click()
    expect(result).to_have_attribute("data-copied", re.compile(r'^\{"policy":"strict"'))
