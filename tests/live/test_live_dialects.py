"""Every dialect through the proxy and guard, driven by its official SDK.

The real `openai` (Responses), `anthropic` (Messages) and `google-genai`
(Gemini) packages talk to daphne exactly as they would to their APIs, with
only the base URL changed; daphne's proxy forwards to the fake upstream,
which replays the dialect's scenario.  Each test checks what the SDK got,
what the capture stored, that the guard retries a flaky upstream and answers
a lost cause in the SDK's own error shape, and that no credential is stored.
"""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from live_helpers import CANARY, wait_for

from inspector.captures import models

pytestmark = pytest.mark.usefixtures("transactional_db")

QUERY_CANARY = f"AIza-query-{CANARY}"


def only_capture() -> models.Capture:
    return wait_for(lambda: models.Capture.objects.first(), what="a capture")


def strict_result(capture: models.Capture) -> dict:
    import json

    return json.loads(capture.assemblies.get(policy="strict").result_json)


def openai_client(base: str, mode: str = "proxy") -> openai.OpenAI:
    return openai.OpenAI(api_key=CANARY, base_url=f"{base}/{mode}/fake/v1", max_retries=0)


def anthropic_client(base: str, mode: str = "proxy") -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=CANARY, base_url=f"{base}/{mode}/fake", max_retries=0)


def genai_client(base: str, mode: str = "proxy") -> genai.Client:
    options = genai_types.HttpOptions(base_url=f"{base}/{mode}/fake/")
    return genai.Client(api_key=CANARY, http_options=options)


# -- OpenAI Responses ------------------------------------------------------------------------


def test_responses_stream_through_the_proxy(inspector_url, fake, closed_capture, secret_count):
    client = openai_client(inspector_url)
    with client.responses.stream(model="responses-parallel", input="weather and time?") as stream:
        final = stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.call_id, c.name) for c in calls] == [
        ("call_w1", "get_weather"),
        ("call_t1", "get_time"),
    ]
    assert calls[0].arguments == '{"city":"Paris","unit":"celsius"}'
    capture = closed_capture(only_capture().slug)
    result = strict_result(capture)
    assert result["dialect"] == "responses" and result["outcome"] == "ok"
    assert [(c["id"], c["name"], c["kind"]) for c in result["calls"]] == [
        ("call_w1", "get_weather", "function"),
        ("call_t1", "get_time", "function"),
    ]
    assert bytes(capture.raw) == fake.scenario("responses-parallel").raw
    assert capture.model == "gpt-4.1-mini-2025-04-14" and capture.upstream == "fake"
    assert secret_count() == 0


def test_responses_create_stream_yields_every_event_unchanged(inspector_url, fake, closed_capture):
    events = list(openai_client(inspector_url).responses.create(
        model="responses-ok", input="weather?", stream=True
    ))  # fmt: skip
    sent = fake.scenario("responses-ok").frames
    assert len(events) == len(sent)
    assert events[-1].type == "response.completed"
    capture = closed_capture(only_capture().slug)
    assert capture.frame_count == len(sent) and capture.outcome == "ok"


def test_a_whole_response_is_recorded_as_its_one_frame_stream(inspector_url, fake, closed_capture):
    final = openai_client(inspector_url).responses.create(model="responses-ok", input="weather?")
    assert final.output[0].name == "get_weather"
    capture = closed_capture(only_capture().slug)
    result = strict_result(capture)
    assert capture.frame_count == 1 and result["dialect"] == "responses"
    assert result["outcome"] == "ok" and result["calls"][0]["name"] == "get_weather"


# -- Anthropic Messages ----------------------------------------------------------------------


def test_messages_stream_through_the_proxy(inspector_url, fake, closed_capture, secret_count):
    client = anthropic_client(inspector_url)
    with client.messages.stream(
        model="messages-parallel",
        max_tokens=256,
        messages=[{"role": "user", "content": "weather and time?"}],
        extra_headers={"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"},
    ) as stream:
        final = stream.get_final_message()
    tools = [block for block in final.content if block.type == "tool_use"]
    assert [(t.id, t.name, t.input) for t in tools] == [
        ("toolu_01W", "get_weather", {"city": "Paris", "unit": "celsius"}),
        ("toolu_01T", "get_time", {"tz": "Europe/Paris"}),
    ]
    (served,) = fake.served("messages-parallel")
    # Credentials and beta headers are forwarded...
    # (this SDK sends its key as a bearer token; older ones send x-api-key)
    sent_key = served.headers.get("x-api-key") or served.headers["authorization"]
    assert sent_key in (CANARY, f"Bearer {CANARY}")
    assert served.headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"
    assert served.headers["anthropic-version"]
    capture = closed_capture(only_capture().slug)
    result = strict_result(capture)
    assert result["dialect"] == "messages" and result["finish_reason"] == "tool_use"
    assert [c["block"] for c in result["calls"]] == [1, 2]
    assert bytes(capture.raw) == fake.scenario("messages-parallel").raw
    assert secret_count() == 0  # ...and never stored


def test_a_messages_relay_quirk_is_refused(inspector_url, fake, closed_capture):
    client = anthropic_client(inspector_url)
    with client.messages.stream(
        model="messages-quirk", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        stream.get_final_message()  # the SDK accepts a delta after content_block_stop
    capture = closed_capture(only_capture().slug)
    assert capture.refusal_code == "INCONSISTENT_CALL"


# -- Google Gemini ---------------------------------------------------------------------------


def test_gemini_stream_through_the_proxy(inspector_url, fake, closed_capture, secret_count):
    client = genai_client(inspector_url)
    chunks = list(
        client.models.generate_content_stream(model="gemini-parallel", contents="weather and time?")
    )
    calls = [call for chunk in chunks for call in chunk.function_calls or []]
    assert [(c.name, c.args) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_time", {"tz": "Europe/Paris"}),
    ]
    (served,) = fake.served("gemini-parallel")
    assert ":streamGenerateContent?alt=sse" in served.path  # the SDK streams SSE
    assert served.headers["x-goog-api-key"] == CANARY
    capture = closed_capture(only_capture().slug)
    result = strict_result(capture)
    assert result["dialect"] == "gemini" and result["finish_reason"] == "STOP"
    assert [c["name"] for c in result["calls"]] == ["get_weather", "get_time"]
    assert capture.model == "gemini-2.5-flash"  # the modelVersion the stream names
    assert secret_count() == 0


def test_gemini_json_array_stream_and_query_key(inspector_url, fake, closed_capture, secret_count):
    """Without `?alt=sse` Gemini streams one JSON array; the key rides in `?key=`."""
    url = f"{inspector_url}/proxy/fake/v1beta/models/gemini-ok:streamGenerateContent"
    response = httpx.post(f"{url}?key={QUERY_CANARY}", json={"contents": []}, timeout=30)
    assert response.status_code == 200
    assert response.json()[1]["candidates"][0]["finishReason"] == "STOP"
    capture = closed_capture(only_capture().slug)
    assert capture.stream_format == "json-array" and capture.outcome == "ok"
    assert f"key={QUERY_CANARY}" in fake.served("gemini-ok")[0].path
    assert "key=" not in capture.source_url and secret_count() == 0


def test_gemini_malformed_function_call_is_refused(inspector_url, fake, closed_capture):
    client = genai_client(inspector_url)  # held: the stream is read after the call returns
    chunks = list(client.models.generate_content_stream(model="gemini-quirk", contents="weather?"))
    assert chunks[-1].candidates[0].finish_reason == "MALFORMED_FUNCTION_CALL"
    capture = closed_capture(only_capture().slug)
    assert capture.refusal_code == "MALFORMED_TOOL_CALL"


# -- guard mode, every dialect ---------------------------------------------------------------


def test_guard_retries_a_flaky_upstream_in_every_dialect(inspector_url, fake):
    with openai_client(inspector_url, "guard").responses.stream(
        model="responses-flaky-twice", input="x"
    ) as stream:
        assert stream.get_final_response().output[0].name == "get_weather"
    with anthropic_client(inspector_url, "guard").messages.stream(
        model="messages-flaky-twice", max_tokens=64, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        assert stream.get_final_message().content[1].name == "get_weather"
    google = genai_client(inspector_url, "guard")
    chunks = google.models.generate_content_stream(model="gemini-flaky-twice", contents="x")
    assert [c.name for chunk in chunks for c in chunk.function_calls or []] == ["get_weather"]
    for name in ("responses-flaky-twice", "messages-flaky-twice", "gemini-flaky-twice"):
        assert [r.ended for r in fake.served(name)] == ["cut", "cut", "complete"]
    closed = models.Capture.objects.filter(finished__isnull=False)
    wait_for(lambda: closed.count() == 9, what="nine closed attempts")
    chains: dict[str, list[tuple[int, str]]] = {}
    for capture in closed.order_by("attempt"):
        chains.setdefault(capture.retry_chain, []).append((capture.attempt, capture.outcome))
    expected = [(1, "refused"), (2, "refused"), (3, "ok")]
    assert list(chains.values()) == [expected] * 3


def test_a_lost_cause_is_an_error_each_sdk_raises_and_reads(inspector_url, fake):
    with pytest.raises(openai.APIStatusError) as raised_openai:
        with openai_client(inspector_url, "guard").responses.stream(
            model="responses-quirk", input="x"
        ) as stream:
            stream.get_final_response()
    with pytest.raises(anthropic.APIStatusError) as raised_anthropic:
        with anthropic_client(inspector_url, "guard").messages.stream(
            model="messages-quirk", max_tokens=64, messages=[{"role": "user", "content": "x"}]
        ) as stream:
            stream.get_final_message()
    google = genai_client(inspector_url, "guard")
    with pytest.raises(genai_errors.ServerError) as raised_genai:
        list(google.models.generate_content_stream(model="gemini-quirk", contents="x"))
    for raised in (raised_openai, raised_anthropic):
        assert raised.value.status_code == 502
        assert "guard: no attempt was accepted" in raised.value.message
    assert raised_anthropic.value.body["error"]["type"] == "api_error"
    assert len(raised_anthropic.value.body["error"]["attempts"]) == 3
    assert (
        raised_genai.value.code == 502 and "no attempt was accepted" in raised_genai.value.message
    )
    assert raised_genai.value.status == "UNAVAILABLE"
