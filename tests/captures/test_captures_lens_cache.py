"""Lens results computed once, stored and served (`lens_cache.py`), and the
lenses API's summary and pages."""

from __future__ import annotations

import orjson
import pytest
from capture_streams import DONE, chunk, sse, tool
from django.test import Client
from django.urls import reverse

from inspector.captures.lens_cache import lens_runs
from inspector.captures.lens_runs import LensRun
from inspector.captures.store import store_stream
from inspector.lenses import litellm

pytestmark = pytest.mark.django_db

REUSED_INDEX = sse(
    chunk(tool(0, "call_a", "read", '{"path":"/a"}')),
    chunk(tool(0, "call_b", "read", '{"path":"/b"}')),
    chunk(finish="tool_calls"),
    DONE,
)
MANY_CALLS = sse(
    *[chunk(tool(n, f"call_{n}", "read", f'{{"n":{n}}}')) for n in range(7)],
    chunk(finish="tool_calls"),
    DONE,
)


def test_each_lens_runs_once_and_again_only_for_a_new_version(monkeypatch):
    capture = store_stream(REUSED_INDEX, stream_format="sse")
    first = lens_runs(capture)
    assert {run.status for run in first.values()} == {LensRun.Status.DONE}
    assert first["litellm"].divergence_count == 2
    finished = {name: run.finished for name, run in first.items()}
    assert {name: run.finished for name, run in lens_runs(capture).items()} == finished
    monkeypatch.setattr(litellm.LiteLLMLens, "current_version", lambda self: "a newer one")
    again = lens_runs(capture)
    assert again["litellm"].version == "a newer one"
    assert again["litellm"].finished != finished["litellm"]
    assert again["vercel"].finished == finished["vercel"]


def test_a_capture_over_the_frame_limit_is_too_large_for_every_lens(client, settings):
    settings.INSPECTOR_LENS_MAX_FRAMES = 2
    capture = store_stream(REUSED_INDEX, stream_format="sse")
    page = client.get(reverse("capture-lenses", args=[capture.slug])).content.decode()
    assert page.count("too large for this lens") >= 4
    run = LensRun.objects.get(capture=capture, lens="vercel")
    assert run.status == LensRun.Status.TOO_LARGE
    assert "INSPECTOR_LENS_MAX_FRAMES" in run.detail


def test_the_api_summarizes_and_pages_the_records():
    capture = store_stream(MANY_CALLS, stream_format="sse")
    url = f"/api/captures/{capture.slug}/lenses"
    body = orjson.loads(Client().get(url, {"per_page": 3}).content)
    assert body["status"] == "done"
    assert (body["page"], body["per_page"], body["pages"]) == (1, 3, 3)
    vercel = body["lenses"]["vercel"]
    assert (vercel["status"], vercel["outcome"], vercel["call_count"]) == ("done", "ok", 7)
    assert [call["id"] for call in vercel["calls"]] == ["call_0", "call_1", "call_2"]
    last = orjson.loads(Client().get(url, {"per_page": 3, "page": 3}).content)
    assert [call["id"] for call in last["lenses"]["vercel"]["calls"]] == ["call_6"]
    past = orjson.loads(Client().get(url, {"page": 9}).content)
    assert past["lenses"]["vercel"]["calls"] == []
    assert Client().get(url, {"per_page": "x"}).status_code == 400
