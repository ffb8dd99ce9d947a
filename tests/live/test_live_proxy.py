"""The recording proxy end to end: daphne + the fake upstream + the real OpenAI SDK."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from live_helpers import CANARY, TOOLS, wait_for
from openai import OpenAI

from inspector.captures import models

pytestmark = pytest.mark.usefixtures("transactional_db")

MESSAGES = [{"role": "user", "content": "Weather in Zürich for 3 days?"}]


def sdk(base: str, upstream: str = "fake", timeout: float = 20) -> OpenAI:
    return OpenAI(
        api_key=CANARY, base_url=f"{base}/proxy/{upstream}/v1", max_retries=0, timeout=timeout
    )


def only_capture() -> models.Capture:
    captures = list(models.Capture.objects.all())
    assert len(captures) == 1, captures
    return captures[0]


def test_sdk_stream_through_the_proxy_is_recorded_frame_by_frame(
    inspector_url, fake, closed_capture, secret_count
):
    client = sdk(inspector_url)
    stream = client.chat.completions.create(
        model="ok-tool-call",
        messages=MESSAGES,
        tools=TOOLS,
        stream=True,
        extra_body={"api_key": CANARY, "metadata": {"session_token": "tok-SECRET123"}},
    )
    chunks = list(stream)
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert calls[0].id == "call_w1" and calls[0].function.name == "get_weather"
    arguments = "".join(tc.function.arguments or "" for tc in calls)
    assert json.loads(arguments) == {"city": "Zürich", "unit": "celsius", "days": 3}

    scenario = fake.scenario("ok-tool-call")
    served = fake.served("ok-tool-call")
    assert len(served) == 1 and served[0].ended == "complete"
    # secrets are forwarded...
    assert served[0].headers["authorization"] == f"Bearer {CANARY}"
    assert served[0].body["api_key"] == CANARY
    # ...never stored
    capture = closed_capture(only_capture().slug)
    assert capture.source == "proxy" and capture.upstream == "fake"
    assert capture.http_status == 200
    assert capture.outcome == "ok" and capture.refusal_code == ""
    assert capture.stream_format == "sse"
    assert bytes(capture.raw) == scenario.raw
    assert capture.frame_count == len(scenario.frames) == 13
    frames = list(capture.frames.order_by("number"))
    assert [f.number for f in frames] == list(range(13))
    arrived = [f.arrived_ms for f in frames]
    assert all(a is not None and a >= 0 for a in arrived)
    assert arrived == sorted(arrived)
    stored = json.loads(capture.request_json)
    assert stored["model"] == "ok-tool-call" and stored["messages"] == MESSAGES
    assert stored["tools"] == TOOLS
    # metadata is personal data by default (INSPECTOR_DROP_FIELDS): forwarded, not stored
    assert "api_key" not in stored and "metadata" not in stored
    assert capture.not_stored == ["body.metadata"]
    assert capture.attempt == 1 and capture.retry_chain
    strict = capture.assemblies.get(policy="strict")
    assert strict.usage == {"prompt_tokens": 31, "completion_tokens": 17, "total_tokens": 48}
    assert secret_count() == 0


def test_secrets_in_query_string_cookies_and_key_headers_are_forwarded_not_stored(
    inspector_url, fake, closed_capture, secret_count
):
    body = {"model": "ok-tool-call", "messages": MESSAGES, "stream": True}
    response = httpx.post(
        f"{inspector_url}/proxy/fake/v1/chat/completions?api-key={CANARY}&api-version=1",
        json=body,
        headers={"api-key": CANARY, "x-api-key": CANARY, "Cookie": f"session={CANARY}"},
        timeout=20,
    )
    assert response.status_code == 200 and b"[DONE]" in response.content
    served = fake.served("ok-tool-call")[0]
    assert served.headers["api-key"] == CANARY and served.headers["x-api-key"] == CANARY
    capture = closed_capture(only_capture().slug)
    assert capture.outcome == "ok" and json.loads(capture.request_json)["messages"] == MESSAGES
    assert secret_count() == 0


def test_relay_is_incremental_and_byte_exact(inspector_url, fake, closed_capture):
    """A slow stream's first frames reach the client long before the upstream ends."""
    scenario = fake.scenario("slow")
    arrivals: list[tuple[float, bytes]] = []
    started = time.monotonic()
    with httpx.stream(
        "POST",
        f"{inspector_url}/proxy/fake/v1/chat/completions",
        json={"model": "slow", "stream": True, "messages": MESSAGES},
        timeout=20,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        slug = response.headers["x-inspector-capture"]
        for data in response.iter_raw():
            arrivals.append((time.monotonic() - started, data))
    total = arrivals[-1][0]
    body = b"".join(data for _, data in arrivals)
    assert body == scenario.raw
    assert total >= (len(scenario.frames) - 1) * 0.15 * 0.9
    assert arrivals[0][0] < 0.25 * total
    assert len(arrivals) >= len(scenario.frames) // 2  # relayed as it came, not in one piece
    capture = closed_capture(slug)
    arrived = [f.arrived_ms for f in capture.frames.order_by("number")]
    assert len(arrived) == len(scenario.frames)
    # arrival times are the reads' times (the pace shows), not the recorder's
    assert arrived[-1] - arrived[1] >= (len(arrived) - 3) * 150 * 0.8


def test_upstream_drop_mid_stream(inspector_url, fake, closed_capture):
    client = sdk(inspector_url)
    received = []
    with pytest.raises((openai.APIError, ValueError)):
        for chunk in client.chat.completions.create(
            model="cut-mid-stream", messages=MESSAGES, tools=TOOLS, stream=True
        ):
            received.append(chunk)
    assert 0 < len(received) < 13
    assert fake.served("cut-mid-stream")[0].ended == "cut"
    capture = closed_capture(only_capture().slug)
    assert capture.outcome == "refused" and capture.refusal_code == "INCOMPLETE_STREAM"
    assert capture.retryable is True
    assert capture.frame_count == 6  # 5 whole frames and the half one
    assert capture.frames.count() == 6
    assert b"upstream_disconnected" not in bytes(capture.raw)  # the notice isn't recorded
    assert capture.model == "gpt-4o-mini"


def test_drop_notice_follows_the_relayed_bytes(inspector_url, fake, closed_capture):
    """Raw bytes: every byte received, then one error frame the SDK raises as APIError."""
    with httpx.stream(
        "POST",
        f"{inspector_url}/proxy/fake/v1/chat/completions",
        json={"model": "cut-mid-stream", "stream": True},
        timeout=20,
    ) as response:
        body = b"".join(response.iter_raw())
        slug = response.headers["x-inspector-capture"]
    capture = closed_capture(slug)
    assert body.startswith(bytes(capture.raw))
    notice = body[len(bytes(capture.raw)) :]
    assert notice.startswith(b"\n\ndata: ") and b'"upstream_disconnected"' in notice


def test_upstream_unreachable_is_a_recorded_502(inspector_url, fake, closed_capture):
    client = sdk(inspector_url, upstream="dead")
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model="ok-tool-call", messages=MESSAGES, stream=True)
    assert raised.value.status_code == 502
    error = raised.value.response.json()["error"]
    assert error["type"] == "upstream_unreachable" and "unreachable" in error["message"]
    slug = raised.value.response.headers["x-inspector-capture"]
    capture = closed_capture(slug)
    assert capture.http_status == 502 and capture.upstream == "dead"
    assert capture.refusal_code == "UPSTREAM_ERROR"
    assert capture.model == "ok-tool-call"


def test_upstream_error_status_is_passed_through_and_recorded(inspector_url, fake, closed_capture):
    client = sdk(inspector_url)
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(model="rate-limited-once", messages=MESSAGES, stream=True)
    assert "fake failure 1 of 1" in str(raised.value)
    capture = closed_capture(raised.value.response.headers["x-inspector-capture"])
    assert capture.http_status == 429 and capture.refusal_code == "UPSTREAM_ERROR"
    assert capture.stream_format == "jsonl" and capture.frame_count == 1
    # the retry (same request, within the window) is attempt 2 of the same retry chain
    chunks = list(
        client.chat.completions.create(model="rate-limited-once", messages=MESSAGES, stream=True)
    )
    assert chunks
    second = wait_for(
        lambda: models.Capture.objects.filter(attempt=2, finished__isnull=False).first()
    )
    assert second.retry_chain == capture.retry_chain and second.outcome == "ok"


def test_non_streamed_request(inspector_url, fake, closed_capture):
    client = sdk(inspector_url)
    raw = client.chat.completions.with_raw_response.create(
        model="ok-tool-call", messages=MESSAGES, tools=TOOLS
    )
    completion = raw.parse()
    assert completion.choices[0].message.tool_calls[0].function.name == "get_weather"
    capture = closed_capture(raw.headers["x-inspector-capture"])
    # Recorded as the stream that would have carried it, and judged by the same rules.
    assert (capture.input_format, capture.stream_format) == ("json", "sse")
    assert capture.frame_count == 2 and capture.http_status == 200
    assert capture.outcome == "ok", capture.refusal_code
    chunk = json.loads(bytes(capture.raw).split(b"\n\n")[0].removeprefix(b"data: "))
    message = raw.http_response.json()["choices"][0]["message"]
    assert chunk["object"] == "chat.completion.chunk"
    assert chunk["choices"][0]["delta"]["tool_calls"] == [{"index": 0, **message["tool_calls"][0]}]
    (call,) = capture.assemblies.get(policy="strict").calls.all()
    assert call.name == "get_weather" and call.arguments["city"] == "Zürich"


def test_a_stream_under_another_content_type_is_relayed_and_recorded_as_sse(
    inspector_url, fake, closed_capture
):
    """Some gateways stream SSE as text/plain: the request asked for a stream."""
    with httpx.stream(
        "POST",
        f"{inspector_url}/proxy/fake/v1/chat/completions",
        json={"model": "plain-text-stream", "stream": True, "messages": MESSAGES},
        timeout=20,
    ) as response:
        assert response.headers["content-type"].startswith("text/plain")
        body = b"".join(response.iter_raw())
        slug = response.headers["x-inspector-capture"]
    capture = closed_capture(slug)
    assert capture.stream_format == "sse" and capture.outcome == "ok"
    assert capture.frame_count == len(fake.scenario("plain-text-stream").frames)
    assert bytes(capture.raw) == body == fake.scenario("plain-text-stream").raw


def test_jsonl_upstream_stream(inspector_url, fake, closed_capture):
    with httpx.stream(
        "POST",
        f"{inspector_url}/proxy/fake/v1/chat/completions",
        json={"model": "raw-jsonl", "stream": True},
        timeout=20,
    ) as response:
        assert response.headers["content-type"] == "application/x-ndjson"
        body = b"".join(response.iter_raw())
        slug = response.headers["x-inspector-capture"]
    capture = closed_capture(slug)
    assert capture.stream_format == "jsonl" and capture.outcome == "ok"
    assert bytes(capture.raw) == body == fake.scenario("raw-jsonl").raw


def test_client_disconnect_closes_upstream_and_keeps_the_capture(
    inspector_url, fake, closed_capture
):
    scenario = fake.scenario("slow")
    with httpx.Client(timeout=20) as client:
        with client.stream(
            "POST",
            f"{inspector_url}/proxy/fake/v1/chat/completions",
            json={"model": "slow", "stream": True, "messages": MESSAGES},
        ) as response:
            slug = response.headers["x-inspector-capture"]
            got = b""
            for data in response.iter_raw():
                got += data
                if got.count(b"\n\n") >= 3:
                    break
    # closing the stream early closes the connection
    capture = closed_capture(slug, timeout=15)
    assert capture.outcome != "live" and capture.finished is not None
    assert 3 <= capture.frame_count < len(scenario.frames)
    assert capture.frames.count() == capture.frame_count
    assert capture.refusal_code == "INCOMPLETE_STREAM"
    served = wait_for(
        lambda: [r for r in fake.served("slow") if r.ended != "pending"], 10, "upstream end"
    )
    assert served[0].ended == "aborted"
    assert served[0].frames_sent < len(scenario.frames)


def test_concurrent_streams_are_each_recorded_whole(inspector_url, fake, closed_capture):
    """Several streams at once (on SQLite the recordings take turns writing)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(n: int) -> tuple[int, str]:
        client = sdk(inspector_url)
        raw = client.chat.completions.with_raw_response.create(
            model="ok-tool-call" if n % 2 else "weather-jsonl",
            messages=[{"role": "user", "content": f"request {n}"}],
            tools=TOOLS,
            stream=True,
        )
        return len(list(raw.parse())), raw.headers["x-inspector-capture"]

    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(6)))
    assert all(count >= 10 for count, _ in results)
    for _, slug in results:
        capture = closed_capture(slug, timeout=20)
        assert capture.outcome == "ok" and capture.frame_count == 13
        assert capture.frames.count() == 13
    assert len({c.retry_chain for c in models.Capture.objects.all()}) == 6


def test_other_paths_pass_through_unrecorded(inspector_url, fake):
    client = sdk(inspector_url)
    names = {model.id for model in client.models.list()}
    assert {"ok-tool-call", "flaky-twice"} <= names
    from django.test import Client

    assert Client().get("/proxy/fake/v1/models/../../../admin/").status_code == 400
    assert models.Capture.objects.count() == 0


def test_unknown_upstream_and_wrong_method(inspector_url, fake):
    response = httpx.post(
        f"{inspector_url}/proxy/nowhere/v1/chat/completions", json={"model": "x"}, timeout=10
    )
    assert response.status_code == 404
    assert "unknown upstream 'nowhere'" in response.json()["error"]["message"]
    assert "fake" in response.json()["error"]["message"]
    response = httpx.get(f"{inspector_url}/proxy/fake/v1/chat/completions", timeout=10)
    assert response.status_code == 405
    assert models.Capture.objects.count() == 0


@pytest.mark.django_db(transaction=True)
async def test_publishes_batches_and_list_changes(settings, fake, monkeypatch):
    """In process (Django's async test client): what goes to the channel layer."""
    import asyncio

    from asgiref.sync import sync_to_async
    from channels.layers import get_channel_layer
    from django.db import connections
    from django.test import AsyncClient

    from inspector.live import broadcast
    from inspector.live.broadcast import LIST_GROUP, capture_group

    settings.INSPECTOR_UPSTREAMS = f"fake={fake.url}"
    sent: list[tuple[str, dict]] = []
    original = broadcast.send

    async def spy(group: str, message: dict) -> None:
        sent.append((group, message))
        await original(group, message)

    monkeypatch.setattr(broadcast, "send", spy)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(LIST_GROUP, channel)

    try:
        response = await AsyncClient().post(
            "/proxy/fake/v1/chat/completions",
            {"model": "ok-tool-call", "stream": True, "messages": MESSAGES},
            content_type="application/json",
            headers={"Authorization": f"Bearer {CANARY}"},
        )
        assert response.status_code == 200
        body = b"".join([part async for part in response.streaming_content])
        assert body == fake.scenario("ok-tool-call").raw
        slug = response["X-Inspector-Capture"]

        async def finished():
            while not any(m["type"] == "capture.finished" for _, m in sent):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(finished(), 10)
        frames = [m for g, m in sent if m["type"] == "capture.frames"]
        assert all(g == capture_group(slug) for g, m in sent if m["type"].startswith("capture."))
        numbers = [f["number"] for m in frames for f in m["frames"]]
        final = next(m for _, m in sent if m["type"] == "capture.finished")
        numbers += [f["number"] for f in final["frames"]]
        assert numbers == list(range(13))  # every frame once, in order
        assert final["outcome"] == "ok" and final["frame_count"] == 13
        # Cards come with the batches the throttle lets them into, none with the close: the
        # page swaps in the finished main part, every card as stored.
        assert final["calls"] == []
        capture = await sync_to_async(models.Capture.objects.get)(slug=slug)
        main = await AsyncClient().get(capture.get_absolute_url(), {"partial": "main"})
        assert '<code class="call-name">get_weather</code>' in main.content.decode()
        changes = [m for g, m in sent if g == LIST_GROUP]
        assert [m["action"] for m in changes] == ["opened", "closed"]
        assert all(m["type"] == "captures.changed" and m["slug"] == slug for m in changes)
        assert all(m["retry_chain"] and m["attempt"] == 1 for m in changes)
        received = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(2)]
        assert [m["action"] for m in received] == ["opened", "closed"]
    finally:
        await layer.group_discard(LIST_GROUP, channel)
        # the view's ORM calls ran in asgiref's thread: close its connection
        await sync_to_async(connections.close_all)()


def test_the_server_logged_no_traceback(inspector_url, daphne_factory):
    """Runs after the proxy, guard and attempt tests above it (same server)."""
    log = daphne_factory.logs[inspector_url].read_text()
    assert "Traceback" not in log
    assert "Exception inside application" not in log
