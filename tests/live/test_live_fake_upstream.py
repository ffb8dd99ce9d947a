"""The fake upstream over real loopback HTTP: replay, pace, cuts, failures, the command."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from live_helpers import wait_for

from inspector.assembly import assemble
from inspector.live.fake_upstream import DEFAULT_SCENARIOS, FakeUpstream, Scenario

BASE_DIR = Path(__file__).resolve().parents[2]


def post(fake: FakeUpstream, model: str, stream: bool = True, **extra) -> httpx.Response:
    body = {"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{fake.url}/chat/completions", json={**body, **extra}, timeout=10)


def test_demo_scenarios_are_what_their_names_say():
    outcomes = {}
    for path in sorted(DEFAULT_SCENARIOS.iterdir()):
        if path.suffix in (".sse", ".jsonl"):
            scenario = Scenario.load(path)
            outcomes[path.stem] = (assemble(scenario.raw, fmt="sse").refusal or None, scenario)
    assert {"ok-tool-call", "cut-mid-stream", "flaky-twice", "ambiguous"} <= set(outcomes)
    assert outcomes["ok-tool-call"][0] is None
    assert outcomes["ambiguous"][0].code == "AMBIGUOUS_CONTINUATION"
    assert outcomes["cut-mid-stream"][1].cut_after_frames is not None
    assert outcomes["flaky-twice"][1].fail_times == 2


def test_replays_every_frame_as_a_write_of_its_own(fake):
    scenario = fake.scenario("ok-tool-call")
    with httpx.stream(
        "POST",
        f"{fake.url}/chat/completions",
        json={"model": "ok-tool-call", "stream": True},
        timeout=10,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        body = b"".join(response.iter_raw())
    assert body == scenario.raw
    assert len(scenario.frames) == 13
    served = fake.served("ok-tool-call")[0]
    assert served.ended == "complete"
    assert served.frames_sent == len(scenario.frames) == len(served.sent_at)


def test_jsonl_files_are_served_as_sse_or_as_they_are(fake):
    sse = post(fake, "weather-jsonl")
    assert sse.headers["content-type"] == "text/event-stream"
    assert sse.text.startswith("data: {") and sse.text.endswith("data: [DONE]\n\n")
    assert assemble(sse.content, fmt="sse").outcome == "ok"
    raw = post(fake, "raw-jsonl")
    assert raw.headers["content-type"] == "application/x-ndjson"
    assert raw.text.startswith("{") and raw.text.endswith("[DONE]\n")
    assert assemble(raw.content, fmt="jsonl").outcome == "ok"


def test_cut_sends_half_a_frame_then_drops_the_connection(fake):
    received = []
    with pytest.raises(httpx.TransportError):
        with httpx.stream(
            "POST",
            f"{fake.url}/chat/completions",
            json={"model": "cut-mid-stream", "stream": True},
            timeout=10,
        ) as response:
            for data in response.iter_raw():
                received.append(data)
    body = b"".join(received)
    result = assemble(body, fmt="sse")
    assert result.refusal.code == "INCOMPLETE_STREAM"
    assert result.frames == 6  # 5 whole frames and the half one
    assert fake.served("cut-mid-stream")[0].ended == "cut"


def test_fail_times_then_success(fake):
    first = post(fake, "rate-limited-once")
    assert first.status_code == 429
    assert "fake failure 1 of 1" in first.json()["error"]["message"]
    assert post(fake, "rate-limited-once").status_code == 200
    # without fail_status the failures are cuts
    for _ in range(2):
        with pytest.raises(httpx.TransportError):
            post(fake, "flaky-twice")
    assert assemble(post(fake, "flaky-twice").content, fmt="sse").outcome == "ok"
    assert [r.ended for r in fake.served("flaky-twice")] == ["cut", "cut", "complete"]
    fake.reset()
    with pytest.raises(httpx.TransportError):
        post(fake, "flaky-twice")


def test_non_streamed_request_gets_a_chat_completion(fake):
    response = post(fake, "ok-tool-call", stream=False)
    assert response.status_code == 200
    completion = response.json()
    assert completion["object"] == "chat.completion"
    call = completion["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {
        "city": "Zürich",
        "unit": "celsius",
        "days": 3,
    }
    assert completion["choices"][0]["finish_reason"] == "tool_calls"
    assert completion["usage"]["total_tokens"] == 48


def test_unknown_model_models_list_and_headers(fake):
    response = post(fake, "no-such-scenario")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"
    models = httpx.get(f"{fake.url}/models", timeout=5).json()
    assert "ok-tool-call" in {m["id"] for m in models["data"]}
    httpx.post(
        f"{fake.url}/chat/completions",
        json={"model": "ok-tool-call", "stream": True},
        headers={"Authorization": "Bearer sk-x"},
        timeout=5,
    )
    assert fake.served("ok-tool-call")[-1].headers["authorization"] == "Bearer sk-x"


def test_pace(scenarios_dir):
    with FakeUpstream(scenarios_dir, pace_ms=30) as fake:
        started = time.monotonic()
        response = post(fake, "text-reply")
        elapsed = time.monotonic() - started
        frames = len(fake.scenario("text-reply").frames)
    assert response.status_code == 200
    assert elapsed >= (frames - 1) * 0.03 * 0.9
    sent = fake.requests[0].sent_at
    # Paced by schedule: frame n goes out n paces after the first, never sooner (a
    # late write shortens the next gap: the rate is the one asked for, not less).
    assert all(at - sent[0] >= n * 0.03 - 0.003 for n, at in enumerate(sent))
    assert sent[-1] - sent[0] >= (frames - 1) * 0.03 - 0.003


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_management_command_serves_a_directory(scenarios_dir):
    port = _free_port()
    cmd = [sys.executable, "manage.py", "fake_upstream", "--port", str(port)]
    cmd += ["--scenarios", str(scenarios_dir)]
    proc = subprocess.Popen(cmd, cwd=BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:

        def healthy():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(healthy, 20, "fake_upstream command")
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "ok-tool-call", "stream": True},
            timeout=10,
        )
        assert assemble(response.content, fmt="sse").outcome == "ok"
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}/v1" in output.decode()
