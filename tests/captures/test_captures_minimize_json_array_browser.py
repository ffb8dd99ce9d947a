"""Real Chromium: the Minimize button on a Gemini capture recorded as a JSON
array (no `alt=sse`) lands on a minimized capture that is still a JSON array,
refused with the same failure signature, 1-minimal by elements."""

from __future__ import annotations

import re

import orjson
import pytest
from playwright.sync_api import expect

from inspector.assembly import JSONArrayReader
from inspector.captures.models import Capture
from inspector.captures.store import store_stream
from inspector.minimize import failure_signature

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1400, "height": 950}


def element(*parts: dict, finish: str | None = None) -> dict:
    candidate: dict = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}


def streamed(**function) -> dict:
    return {"functionCall": function}


# A call renamed while its arguments stream, among text: IDENTITY_CONFLICT.
ELEMENTS = [
    element({"text": "Let me look that up."}),
    element(streamed(name="read_file", willContinue=True)),
    element(
        streamed(
            partialArgs=[{"jsonPath": "$.path", "stringValue": "/etc/", "willContinue": True}],
            willContinue=True,
        )
    ),
    element({"text": "still reading"}),
    element(streamed(name="write_file", args={"path": "/etc/hosts"})),
    element(streamed(), finish="STOP"),
]
ARRAY = b"[" + b"\n,\r\n".join(orjson.dumps(e, option=orjson.OPT_INDENT_2) for e in ELEMENTS)
ARRAY += b"\n]"


def elements_of(data: bytes) -> list[str]:
    reader = JSONArrayReader()
    return [frame.raw for frame in [*reader.feed(data), *reader.close()]]


def test_minimize_a_json_array_capture(page, daphne_url, transactional_db, output_path):
    original = store_stream(ARRAY, stream_format="json-array", title="gemini renamed")
    wanted = failure_signature(ARRAY, "json-array")
    assert wanted.code == "IDENTITY_CONFLICT" and wanted.dialect == "gemini"

    page.set_viewport_size(VIEWPORT)
    page.goto(daphne_url + original.get_absolute_url())
    expect(page.locator(".refusal-code")).to_have_text("IDENTITY_CONFLICT")
    with page.expect_navigation():
        page.locator("form.minimize button[type=submit]").click()

    derived = Capture.objects.get(derived_from=original)
    expect(page).to_have_url(re.compile(re.escape(derived.get_absolute_url()) + "$"))
    expect(page.locator(".refusal-code")).to_have_text("IDENTITY_CONFLICT")
    expect(page.locator("p.derivation")).to_contain_text(
        f"{derived.frame_count} of {original.frame_count} frames"
    )
    expect(page.locator("#frames-body tr[id^='f-']")).to_have_count(derived.frame_count)
    page.screenshot(path=f"{output_path}/minimized_json_array.png", full_page=True)

    data = bytes(derived.raw)
    assert derived.stream_format == "json-array"
    assert type(orjson.loads(data)) is list  # still a valid JSON array
    assert failure_signature(data, "json-array") == wanted
    assert derived.frame_count < original.frame_count and len(data) < len(ARRAY)
    elements = elements_of(data)
    for i in range(len(elements)):  # 1-minimal by elements
        smaller = ("[" + ",".join(elements[:i] + elements[i + 1 :]) + "]").encode()
        assert failure_signature(smaller, "json-array") != wanted, f"element {i} can go"
