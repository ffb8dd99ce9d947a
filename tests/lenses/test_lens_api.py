"""GET /api/captures/<slug>/lenses, and `lens_matrix` on a stored capture."""

from __future__ import annotations

import json
import sys

import orjson
import pytest
from django.test import Client
from lens_streams import DONE, OK, REUSED_INDEX, chunk, sse, tool

from inspector.captures.store import store_stream
from inspector.lenses.matrix import lens_matrix

pytestmark = pytest.mark.django_db


def get(slug: str):
    return Client().get(f"/api/captures/{slug}/lenses")


def test_every_lens_and_its_divergences_from_the_stored_stream():
    pytest.importorskip("openai")
    capture = store_stream(REUSED_INDEX, stream_format="sse", title="reused index")
    response = get(capture.slug)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = orjson.loads(response.content)
    assert body["slug"] == capture.slug
    assert body["strict"] == {"outcome": "ok", "refusal": None}
    assert list(body["lenses"]) == ["openai", "vercel", "litellm", "langchain"]
    assert body["lenses"]["openai"]["available"] is True
    assert body["lenses"]["litellm"]["calls"][0]["id"] == "call_b"
    lenses_diverging = {entry["lens"] for entry in body["divergences"]}
    assert lenses_diverging == {"openai", "litellm"}
    assert "LiteLLM would drop call_a" in [entry["message"] for entry in body["divergences"]]


def test_a_jsonl_capture_and_a_refused_one():
    lines = b"".join(
        json.dumps(item).encode() + b"\n"
        for item in (chunk(tool(0, "j1", "read", '{"a":')), "[DONE]")
    )
    capture = store_stream(lines, stream_format="jsonl")
    body = orjson.loads(get(capture.slug).content)
    assert body["strict"]["refusal"]["code"] == "INVALID_ARGUMENTS"
    messages = [entry["message"] for entry in body["divergences"]]
    assert (
        'strict refuses INVALID_ARGUMENTS; LangChain would run read with {"a": (read as {})'
        in messages
    )


def test_unknown_capture_is_404_and_other_methods_405():
    response = get("no-such-slug")
    assert response.status_code == 404
    assert orjson.loads(response.content) == {"error": "no capture 'no-such-slug'"}
    capture = store_stream(OK, stream_format="sse")
    response = Client().post(f"/api/captures/{capture.slug}/lenses")
    assert response.status_code == 405
    assert response["Allow"] == "GET"


def test_the_openai_lens_is_unavailable_without_the_sdk(monkeypatch):
    capture = store_stream(OK, stream_format="sse")
    monkeypatch.setitem(sys.modules, "openai", None)
    body = orjson.loads(get(capture.slug).content)
    assert body["lenses"]["openai"]["available"] is False
    assert body["lenses"]["vercel"]["available"] is True
    assert not [entry for entry in body["divergences"] if entry["lens"] == "openai"]


def test_lens_matrix_on_a_stored_capture():
    request = {"model": "m", "tools": [{"type": "function", "function": {"name": "read"}}]}
    capture = store_stream(
        sse(
            chunk(tool(0, "call_x", "read_file", "{}")),
            chunk(tool(0, "call_x", "read_file")),
            chunk(finish="tool_calls"),
            DONE,
        ),
        stream_format="sse",
        request_json=json.dumps(request),
    )
    capture.refresh_from_db()
    table = lens_matrix(capture)
    row = table["rows"][0]
    assert row["label"] == "call_x"
    assert row["cells"]["langchain"]["name"] == "read_fileread_file"
    shown = [table["divergences"][n]["message"] for n in row["cells"]["langchain"]["divergences"]]
    assert shown == ["LangChain would name it read_fileread_file"]
    assert row["cells"]["vercel"]["diverges"] is False
