"""Guard mode end to end: hold the stream until the strict assembler accepts it, retry."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from live_helpers import CANARY, TOOLS, wait_for
from openai import OpenAI

from inspector.captures import models
from inspector.live import guard

pytestmark = pytest.mark.usefixtures("transactional_db")

MESSAGES = [{"role": "user", "content": "Weather in Zürich?"}]


def sdk(base: str) -> OpenAI:
    return OpenAI(api_key=CANARY, base_url=f"{base}/guard/fake/v1", max_retries=0, timeout=30)


def test_flaky_twice_then_ok(inspector_url, fake, secret_count):
    client = sdk(inspector_url)
    raw = client.chat.completions.with_raw_response.create(
        model="flaky-twice", messages=MESSAGES, tools=TOOLS, stream=True
    )
    chunks = list(raw.parse())
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert calls[0].function.name == "get_weather"
    arguments = "".join(tc.function.arguments or "" for tc in calls)
    assert json.loads(arguments)["city"] == "Zürich"
    assert [r.ended for r in fake.served("flaky-twice")] == ["cut", "cut", "complete"]

    chain = raw.headers["x-inspector-retry-chain"]
    assert raw.headers["x-inspector-attempt"] == "3"
    captures = list(models.Capture.objects.filter(retry_chain=chain).order_by("attempt"))
    assert [c.attempt for c in captures] == [1, 2, 3]
    assert [c.outcome for c in captures] == ["refused", "refused", "ok"]
    assert [c.refusal_code for c in captures] == ["INCOMPLETE_STREAM", "INCOMPLETE_STREAM", ""]
    assert [c.retryable for c in captures] == [True, True, None]
    assert all(c.finished is not None and c.source == "proxy" for c in captures)
    assert bytes(captures[2].raw) == fake.scenario("flaky-twice").raw
    assert models.Capture.objects.count() == 3

    listing = httpx.get(f"{inspector_url}/api/attempts/{chain}", timeout=10).json()
    assert [a["attempt"] for a in listing["attempts"]] == [1, 2, 3]
    assert [a["refusal_code"] for a in listing["attempts"]] == [
        "INCOMPLETE_STREAM",
        "INCOMPLETE_STREAM",
        None,
    ]
    assert listing["attempts"][2]["usage"]["total_tokens"] == 48
    assert listing["attempts"][0]["url"] == f"/c/{captures[0].slug}/"
    assert secret_count() == 0


def test_non_retryable_refusal_returns_at_once(inspector_url, fake):
    response = httpx.post(
        f"{inspector_url}/guard/fake/v1/chat/completions",
        json={"model": "ambiguous", "stream": True, "messages": MESSAGES},
        timeout=30,
    )
    assert response.status_code == 502
    assert response.headers["x-should-retry"] == "false"
    body = response.json()["error"]
    assert "not retryable" in body["message"]
    assert body["code"] == "guard_no_accepted_attempt"
    (attempt,) = body["attempts"]
    assert attempt["attempt"] == 1 and attempt["outcome"] == "refused"
    assert attempt["refusal"]["code"] == "AMBIGUOUS_CONTINUATION"
    assert attempt["refusal"]["retryable"] is False
    assert attempt["url"] == f"/c/{attempt['slug']}/"
    assert len(fake.served("ambiguous")) == 1


def test_retries_used_up(inspector_url, fake):
    client = sdk(inspector_url)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="always-500", messages=MESSAGES, stream=True)
    assert raised.value.status_code == 502
    assert "guard: no attempt was accepted (2 retries used" in raised.value.message
    body = raised.value.body  # the SDK's view of `error`
    assert "2 retries used" in body["message"]
    assert [a["attempt"] for a in body["attempts"]] == [1, 2, 3]
    assert {a["refusal"]["code"] for a in body["attempts"]} == {"UPSTREAM_ERROR"}
    assert {a["http_status"] for a in body["attempts"]} == {500}
    assert len(fake.served("always-500")) == 3
    chain = body["retry_chain"]
    assert body["attempts_url"] == f"/api/attempts/{chain}" and "group" not in body
    assert models.Capture.objects.filter(retry_chain=chain).count() == 3


def test_client_errors_are_not_retried(inspector_url, fake):
    response = httpx.post(
        f"{inspector_url}/guard/fake/v1/chat/completions",
        json={"model": "bad-request", "stream": True},
        timeout=30,
    )
    assert response.status_code == 502
    assert [a["http_status"] for a in response.json()["error"]["attempts"]] == [400]
    assert len(fake.served("bad-request")) == 1


def test_guard_needs_a_stream(inspector_url, fake):
    response = httpx.post(
        f"{inspector_url}/guard/fake/v1/chat/completions",
        json={"model": "ok-tool-call", "messages": MESSAGES},
        timeout=30,
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "guard_needs_stream"
    assert fake.served() == []


def test_accepted_at_once(inspector_url, fake):
    response = httpx.post(
        f"{inspector_url}/guard/fake/v1/chat/completions",
        json={"model": "ok-tool-call", "stream": True},
        headers={"X-Inspector-Group": "ticket-42"},  # the header's first name, still read
        timeout=30,
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content == fake.scenario("ok-tool-call").raw
    assert response.headers["x-inspector-retry-chain"] == "ticket-42"
    assert "x-inspector-group" not in response.headers
    assert response.headers["x-inspector-attempt"] == "1"


def test_backoff_doubles(settings):
    settings.INSPECTOR_GUARD_BACKOFF_SECONDS = 0.5
    assert [guard.backoff(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    settings.INSPECTOR_GUARD_RETRIES = 5
    assert guard.retries() == 5


def test_client_leaving_a_held_stream_closes_the_attempt(inspector_url, fake, closed_capture):
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{inspector_url}/guard/fake/v1/chat/completions",
            json={"model": "slow", "stream": True, "messages": MESSAGES},
            timeout=httpx.Timeout(10, read=0.8),
        )
    capture = closed_capture(
        wait_for(lambda: models.Capture.objects.values_list("slug", flat=True).first()), 15
    )
    assert capture.outcome == "refused" and capture.refusal_code == "INCOMPLETE_STREAM"
    assert 0 < capture.frame_count < len(fake.scenario("slow").frames)
    served = wait_for(lambda: [r for r in fake.served("slow") if r.ended != "pending"], 10)
    assert served[0].ended == "aborted" and len(fake.served("slow")) == 1


def test_unreachable_upstream_is_retried_then_reported(inspector_url, fake):
    response = httpx.post(
        f"{inspector_url}/guard/dead/v1/chat/completions",
        json={"model": "ok-tool-call", "stream": True, "messages": MESSAGES},
        timeout=30,
    )
    assert response.status_code == 502
    attempts = response.json()["error"]["attempts"]
    assert [a["http_status"] for a in attempts] == [502, 502, 502]
    assert {a["refusal"]["code"] for a in attempts} == {"UPSTREAM_ERROR"}
    assert models.Capture.objects.filter(upstream="dead").count() == 3
