"""The lens matrix of a Responses, Messages or Gemini capture: the columns
of the libraries that read that dialect (its SDK first, then the Vercel AI
SDK, LiteLLM and LangChain where they read it), run for real, and stored
like any other lens run."""

from __future__ import annotations

import re

import orjson
import pytest
from dialect_streams import BY_DIALECT
from django.urls import reverse
from page_helpers import html

from inspector.captures.lens_runs import LensRun
from inspector.captures.store import store_stream
from inspector.lenses import lenses_for, title

pytestmark = pytest.mark.django_db
pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

# dialect: (the first column titles, the refused demo's first divergence)
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
def test_a_dialects_matrix_has_its_sdk_column_first_and_the_libraries_that_read_it(client, dialect):
    titles, refused_sentence = EXPECTED[dialect]
    ok, refused = (
        store_stream(data, stream_format="sse", title=f"{dialect} {n}")
        for n, data in enumerate(BY_DIALECT[dialect])
    )
    page = html(client.get(reverse("capture-lenses", args=[ok.slug])))
    shown = re.findall(r'<span class="lens-title">([^<]*)</span>', page)
    assert shown[:3] == titles
    assert shown == ["strict", *(title(name) for name in lenses_for(dialect))]
    assert "Vercel" in shown and "LangChain" in shown
    assert ("LiteLLM" in shown) is (dialect != "gemini")
    stored = LensRun.objects.filter(capture=ok).values_list("lens", flat=True)
    assert sorted(stored) == sorted(lenses_for(dialect))

    body = orjson.loads(client.get(f"/api/captures/{refused.slug}/lenses").content)
    assert list(body["lenses"]) == lenses_for(dialect)
    assert all(body["lenses"][name]["available"] for name in body["lenses"])
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
    assert [entry for entry in body["divergences"] if entry["lens"] == "openai"] == []
    # LangChain splits the two calls' interleaved argument deltas apart.
    assert {entry["lens"] for entry in body["divergences"]} == {"langchain"}


@pytest.mark.parametrize("port", [False, True])
def test_a_column_says_emulated_only_for_a_port_of_its_library(client, monkeypatch, port):
    from inspector.lenses import LENSES

    if port:  # every lens runs its library today: pretend one is a port
        monkeypatch.setattr(LENSES["litellm"], "runs_library", False)
    capture = store_stream(BY_DIALECT["chat"][0], stream_format="sse")
    page = html(client.get(reverse("capture-lenses", args=[capture.slug])))
    heads = dict(
        re.findall(
            r'<th scope="col" class="lens-col lens-col-([\w-]+)[^"]*"[^>]*>(.*?)</th>', page, re.S
        )
    )
    assert set(heads) == {"strict", "openai", "vercel", "litellm", "langchain"}
    emulated = {key for key, head in heads.items() if ">emulated</span>" in head}
    assert emulated == ({"litellm"} if port else set())
    assert "OpenAI chat completions streams" in page
