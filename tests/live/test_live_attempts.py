"""Retry chains: by header, or by fingerprint within a window; the JSON view."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone
from live_helpers import CANARY, TOOLS, wait_for
from openai import OpenAI

from inspector.captures import models
from inspector.captures.store import store_stream
from inspector.live import attempts
from inspector.live.proxy import Outbound
from inspector.live.recorder import PinnedClock, Recording

MESSAGES = [{"role": "user", "content": "hi"}]


def body(**changes):
    return {"model": "m", "messages": MESSAGES, "tools": TOOLS, "temperature": 0.2, **changes}


def add(chain: str, attempt: int | None, data: bytes = b"data: [DONE]\n\n") -> models.Capture:
    return store_stream(
        data,
        stream_format="sse",
        source="proxy",
        retry_chain=chain,
        attempt=attempt,
        http_status=200,
    )


def test_fingerprint_is_canonical_and_covers_model_messages_tools():
    reordered = {"tools": TOOLS, "temperature": 1.0, "messages": MESSAGES, "model": "m"}
    assert attempts.fingerprint(body()) == attempts.fingerprint(reordered)
    assert attempts.fingerprint(body()) == attempts.fingerprint(body(temperature=0.9, n=2))
    assert attempts.fingerprint(body()) != attempts.fingerprint(body(model="n"))
    assert attempts.fingerprint(body()) != attempts.fingerprint(body(messages=[]))
    assert attempts.fingerprint(body()) != attempts.fingerprint(body(tools=None))
    assert len(attempts.fingerprint(None)) == 64


def test_a_request_names_its_chain_under_either_header_name():
    assert attempts.named_chain({"X-Inspector-Retry-Chain": "a"}) == "a"
    assert attempts.named_chain({"X-Inspector-Group": "b"}) == "b"  # its documented first name
    assert attempts.named_chain({"X-Inspector-Retry-Chain": "a", "X-Inspector-Group": "b"}) == "a"
    assert attempts.named_chain({}) is None


def test_chain_from_header():
    assert attempts.chain_from_header("ticket-42") == "ticket-42"
    assert attempts.chain_from_header("  ") is None
    odd = attempts.chain_from_header("a/b c")
    assert odd == attempts.chain_from_header("a/b c") and odd.startswith("h")
    assert attempts.CHAIN_NAME.match(odd)


@pytest.mark.django_db
def test_assign_by_fingerprint_within_the_window(settings):
    chain, number = attempts.assign(None, body())
    assert number == 1 and chain.startswith("f" + attempts.fingerprint(body())[:24] + "-")
    first = add(chain, number)
    assert attempts.assign(None, body(temperature=1)) == (chain, 2)
    add(chain, 2)
    other, n = attempts.assign(None, body(model="other"))
    assert other != chain and n == 1
    # the chain's last attempt is older than the window: a new chain starts
    settings.INSPECTOR_ATTEMPT_WINDOW_SECONDS = 600
    old = timezone.now() - timedelta(seconds=601)
    models.Capture.objects.filter(retry_chain=chain).update(created=old)
    fresh, n = attempts.assign(None, body())
    assert fresh != chain and n == 1
    # the header wins over the fingerprint
    assert attempts.assign("ticket-9", body()) == ("ticket-9", 1)
    add("ticket-9", 1)
    assert attempts.assign("ticket-9", body(model="x")) == ("ticket-9", 2)
    assert first.retry_chain == chain


OK_STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
BAD_ARGUMENTS = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":'
    b'"function","function":{"name":"f","arguments":"nope"}}]},"finish_reason":"tool_calls"}]}'
    b"\n\ndata: [DONE]\n\n"
)


@pytest.mark.django_db
def test_a_re_run_after_a_success_starts_a_new_chain():
    chain, _ = attempts.assign(None, body())
    add(chain, 1, OK_STREAM)
    rerun, number = attempts.assign(None, body())
    assert rerun != chain and number == 1


@pytest.mark.django_db
def test_a_non_retryable_refusal_is_not_retried_but_a_client_retry_still_joins():
    chain, _ = attempts.assign(None, body())
    add(chain, 1, BAD_ARGUMENTS)  # INVALID_ARGUMENTS: not retryable
    assert attempts.assign(None, body())[0] != chain
    # ...unless the client itself says it retries (its SDK's retry count)
    assert attempts.assign(None, body(), retry=True) == (chain, 2)


@pytest.mark.django_db
def test_an_upstream_error_status_invites_a_retry():
    chain, _ = attempts.assign(None, body())
    capture = add(chain, 1, OK_STREAM)
    models.Capture.objects.filter(pk=capture.pk).update(http_status=429)
    assert attempts.assign(None, body()) == (chain, 2)


def test_the_client_retry_count_header():
    assert attempts.client_retry({"x-stainless-retry-count": "2"})
    assert not attempts.client_retry({"x-stainless-retry-count": "0"})
    assert not attempts.client_retry({"x-stainless-retry-count": "²"})
    assert not attempts.client_retry({})


@pytest.mark.django_db
def test_the_list_filters_by_retry_chain_and_har_upload():
    add("chain-a", 1)
    add("chain-a", 2, OK_STREAM)
    add("chain-b", 1)
    listed = Client().get("/api/captures?retry_chain=chain-a").json()
    assert sorted(c["slug"] for c in listed["results"]) == sorted(
        models.Capture.objects.filter(retry_chain="chain-a").values_list("slug", flat=True)
    )
    har = store_stream(OK_STREAM, stream_format="sse", har_upload="upload-1", har_entry=0)
    by_upload = Client().get("/api/captures?har_upload=upload-1").json()
    assert [c["slug"] for c in by_upload["results"]] == [har.slug]


@pytest.mark.django_db
def test_attempts_view():
    ok = (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],'
        b'"usage":{"total_tokens":5}}\n\ndata: [DONE]\n\n'
    )
    add("g1", 2, ok)
    add("g1", 1)
    response = Client().get("/api/attempts/g1")
    assert response.status_code == 200
    data = response.json()
    assert data["retry_chain"] == "g1" and "group" not in data
    assert data["count"] == 2 and data["outcome"] == "ok"
    first, second = data["attempts"]
    assert first["attempt"] == 1 and first["outcome"] == "refused"
    assert first["refusal_code"] == "EMPTY_RESPONSE" and first["retryable"] is True
    assert first["refusal"]["code"] == "EMPTY_RESPONSE"
    assert first["url"] == f"/c/{first['slug']}/"
    assert second["outcome"] == "ok" and second["refusal"] is None
    assert second["usage"] == {"total_tokens": 5}
    assert Client().get("/api/attempts/nope").status_code == 404


@pytest.mark.usefixtures("transactional_db")
def test_sdk_retries_through_the_proxy_form_one_chain(inspector_url, fake, closed_capture):
    client = OpenAI(
        api_key=CANARY, base_url=f"{inspector_url}/proxy/fake/v1", max_retries=0, timeout=20
    )
    for _ in range(2):
        with pytest.raises(Exception):  # noqa: B017 - the cut, however the SDK reports it
            list(
                client.chat.completions.create(
                    model="flaky-twice", messages=MESSAGES, tools=TOOLS, stream=True
                )
            )
    list(
        client.chat.completions.create(
            model="flaky-twice", messages=MESSAGES, tools=TOOLS, stream=True
        )
    )
    captures = wait_for(
        lambda: (
            list(models.Capture.objects.filter(finished__isnull=False).order_by("attempt"))
            if models.Capture.objects.filter(finished__isnull=False).count() == 3
            else None
        )
    )
    assert len({c.retry_chain for c in captures}) == 1
    assert [c.attempt for c in captures] == [1, 2, 3]
    assert [c.outcome for c in captures] == ["refused", "refused", "ok"]
    listing = httpx.get(f"{inspector_url}/api/attempts/{captures[0].retry_chain}", timeout=10)
    assert [a["refusal_code"] for a in listing.json()["attempts"]] == [
        "INCOMPLETE_STREAM",
        "INCOMPLETE_STREAM",
        None,
    ]
    # an explicit chain
    response = httpx.post(
        f"{inspector_url}/proxy/fake/v1/chat/completions",
        json={"model": "ok-tool-call", "stream": True, "messages": MESSAGES},
        headers={"X-Inspector-Retry-Chain": "bug-1234"},
        timeout=20,
    )
    assert response.headers["x-inspector-retry-chain"] == "bug-1234"
    capture = closed_capture(response.headers["x-inspector-capture"])
    assert capture.retry_chain == "bug-1234" and capture.attempt == 1
    assert "x-inspector-retry-chain" not in fake.served("ok-tool-call")[0].headers


@pytest.mark.django_db
def test_one_chain_never_holds_one_attempt_number_twice():
    add("g2", 1)
    with pytest.raises(IntegrityError), transaction.atomic():
        add("g2", 1)
    add("", None)  # uploads: no chain, no number
    add("", None)
    assert models.Capture.objects.filter(retry_chain="g2").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_number_taken_in_the_meantime_goes_to_the_next_attempt(monkeypatch):
    """Another process numbered its attempt between our look and our INSERT:
    the constraint refuses ours, and we take the next number."""
    add("race", 1)
    looks = []

    def stale_then_true(chain: str) -> int:
        looks.append(chain)
        return (
            1 if len(looks) == 1 else models.Capture.objects.filter(retry_chain=chain).count() + 1
        )

    monkeypatch.setattr(attempts, "next_attempt", stale_then_true)
    out = Outbound(
        upstream="fake",
        url="http://upstream/v1",
        method="POST",
        headers=[],
        body=b"{}",
        chain_header="race",
    )
    recording = Recording(
        out, PinnedClock(0.0), chain="race", stream_format="sse", http_status=200, mode="proxy"
    )
    recording._create()
    assert looks == ["race", "race"]
    assert recording.attempt == 2
    numbers = models.Capture.objects.filter(retry_chain="race").values_list("attempt", flat=True)
    assert sorted(numbers) == [1, 2]


@pytest.mark.usefixtures("transactional_db")
def test_concurrent_attempts_of_one_chain_get_distinct_numbers(inspector_url, fake):
    def send(_: int) -> str:
        response = httpx.post(
            f"{inspector_url}/proxy/fake/v1/chat/completions",
            json={"model": "ok-tool-call", "stream": True, "messages": MESSAGES},
            headers={"X-Inspector-Retry-Chain": "side-by-side"},
            timeout=30,
        )
        assert response.status_code == 200
        return response.headers["x-inspector-capture"]

    racers = 10  # more than the numbering's retries: the chain's lock orders them
    with ThreadPoolExecutor(racers) as pool:
        slugs = list(pool.map(send, range(racers)))
    captures = wait_for(
        lambda: (
            list(models.Capture.objects.filter(slug__in=slugs, finished__isnull=False))
            if models.Capture.objects.filter(slug__in=slugs, finished__isnull=False).count()
            == racers
            else None
        ),
        30,
        "every capture closed",
    )
    assert sorted(c.attempt for c in captures) == list(range(1, racers + 1))
    assert {c.retry_chain for c in captures} == {"side-by-side"}
