"""The lens matrix of a Responses, Messages or Gemini capture: the columns
of the SDKs that read that dialect (the dialect's own SDK and the Vercel AI
SDK), run for real, and stored like any other lens run."""

from __future__ import annotations

import re

import orjson
import pytest
from dialect_streams import BY_DIALECT
from django.urls import reverse
from page_helpers import html

from inspector.captures.lens_runs import LensRun
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

# dialect: (the SDK column titles, the refused demo's first divergence)
EXPECTED = {
    "responses": (
        ["strict", "the OpenAI SDK", "Vercel"],
        "strict refuses INCONSISTENT_CALL; the OpenAI SDK would run search_hotels with "
        '{"city":"Lisbon","nights":4}',
    ),
    "messages": (
        ["strict", "the Anthropic SDK", "Vercel"],
        "strict refuses INCONSISTENT_CALL; the Anthropic SDK would run book_table with",
    ),
    "gemini": (["strict", "the Google Gen AI SDK", "Vercel"], None),
}


@pytest.mark.parametrize("dialect", sorted(EXPECTED))
def test_a_dialects_matrix_has_its_sdk_columns_only(client, dialect):
    titles, refused_sentence = EXPECTED[dialect]
    ok, refused = (
        store_stream(data, stream_format="sse", title=f"{dialect} {n}")
        for n, data in enumerate(BY_DIALECT[dialect])
    )
    page = html(client.get(reverse("capture-lenses", args=[ok.slug])))
    assert re.findall(r'<span class="lens-title">([^<]*)</span>', page) == titles
    assert "LiteLLM" not in page and "LangChain" not in page
    lens = {"responses": "openai", "messages": "anthropic", "gemini": "google-genai"}[dialect]
    stored = LensRun.objects.filter(capture=ok).values_list("lens", flat=True)
    assert sorted(stored) == sorted([lens, "vercel"])

    body = orjson.loads(client.get(f"/api/captures/{refused.slug}/lenses").content)
    assert list(body["lenses"]) == [lens, "vercel"]
    assert body["lenses"][lens]["available"] is True
    if refused_sentence:
        messages = [entry["message"] for entry in body["divergences"]]
        assert any(message.startswith(refused_sentence) for message in messages), messages


def test_the_responses_demo_agrees_with_the_openai_sdk(client):
    capture = store_stream(BY_DIALECT["responses"][0], stream_format="sse")
    body = orjson.loads(client.get(f"/api/captures/{capture.slug}/lenses").content)
    assert body["strict"]["outcome"] == "ok"
    assert body["lenses"]["openai"]["error"] is None
    assert [call["id"] for call in body["lenses"]["openai"]["calls"]] == [
        "call_flight_7Q",
        "call_hotel_3K",
    ]
    # The web search the platform ran is no call the SDK hands over: not a divergence.
    assert body["divergences"] == []


def test_columns_of_ports_say_emulated_and_columns_of_sdks_do_not(client):
    capture = store_stream(BY_DIALECT["chat"][0], stream_format="sse")
    page = html(client.get(reverse("capture-lenses", args=[capture.slug])))
    heads = dict(
        re.findall(
            r'<th scope="col" class="lens-col lens-col-([\w-]+)[^"]*"[^>]*>(.*?)</th>', page, re.S
        )
    )
    assert set(heads) == {"strict", "openai", "vercel", "litellm", "langchain"}
    emulated = {key for key, head in heads.items() if ">emulated</span>" in head}
    assert emulated == {"litellm", "langchain"}
    assert "OpenAI chat completions streams" in page
