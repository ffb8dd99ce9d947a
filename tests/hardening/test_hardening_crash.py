"""Kill the server mid-stream: the live capture keeps every frame that was stored, and
`recover_interrupted` (run by `manage.py recover_live`, which `make run` runs first) closes
it as refused INCOMPLETE_STREAM with exactly those frames, its assemblies and its calls;
a fresh server then serves its page.

The first tests SIGKILL a real daphne subprocess (ingest websocket; the recording proxy);
the others check the staleness rule and the command in-process."""

from __future__ import annotations

import json
import signal
import time
from datetime import timedelta

import httpx
import orjson
import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from inspector.assembly import assemble
from inspector.assembly.jsontext import dumps
from inspector.captures import models
from inspector.captures.store import open_capture
from inspector.live.fake_upstream import FakeUpstream
from inspector.live.recovery import recover_interrupted
from inspector.live.session import LiveCapture

websockets_sync = pytest.importorskip("websockets.sync.client")

TEXT_FRAMES = 40


def chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "c-crash", "model": "m-crash", "choices": [{"index": 0, "delta": delta}]}
    body["choices"][0]["finish_reason"] = finish
    return b"data: " + orjson.dumps(body) + b"\n\n"


def arguments(piece: str) -> dict:
    return {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}


def interrupted_stream() -> list[bytes]:
    """Text, then a tool call whose arguments are half sent: the frames a dead server had
    stored.  (What follows them is never stored.)"""
    header = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": f"w{i} "}) for i in range(TEXT_FRAMES)]
    frames.append(chunk({"tool_calls": [header]}))
    frames += [chunk(arguments(piece)) for piece in ('{"ci', 'ty": "Pa', "ris", '", "days')]
    return frames


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def kill(proc) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def frame_rows(capture: models.Capture) -> list[tuple[int, str]]:
    return list(capture.frames.order_by("number").values_list("number", "raw"))


def assert_recovered(capture: models.Capture, before: list[tuple[int, str]], data: bytes):
    """Closed as a live capture ending after `before` would have been."""
    capture.refresh_from_db()
    assert capture.outcome == "refused" and capture.refusal_code == "INCOMPLETE_STREAM"
    assert capture.finished is not None and capture.interrupted
    assert capture.frame_count == len(before) and frame_rows(capture) == before
    assert bytes(capture.raw) == data
    strict = capture.assemblies.get(policy="strict")
    assert capture.assemblies.count() == 2
    assert strict.result_json == dumps(assemble(data, fmt="sse").to_dict()).decode()
    return strict


def test_a_killed_server_leaves_its_ingest_capture_live_and_recovery_closes_it(
    daphne_process, transactional_db
):
    server = daphne_process({"INSPECTOR_TEST_PROCESS": "crash-ingest"})
    frames = interrupted_stream()
    stored = b"".join(frames)
    next_half = chunk(arguments('": 3}'))[:25]  # the next frame, cut by the kill
    url = server.url.replace("http://", "ws://", 1) + "/ws/ingest/"
    with websockets_sync.connect(url, open_timeout=10, close_timeout=1) as socket:
        socket.send(orjson.dumps({"open": {"title": "crash", "format": "sse"}}).decode())
        opened = orjson.loads(socket.recv(timeout=10))
        assert opened["type"] == "opened"
        slug = opened["slug"]
        for start in range(0, len(stored), 333):  # pieces that cut frames anywhere
            socket.send(stored[start : start + 333])
        capture = models.Capture.objects.get(slug=slug)
        wait_for(lambda: capture.frames.count() == len(frames), 15, "the frames to be stored")
        socket.send(next_half)
        time.sleep(0.2)  # the half frame reaches the server, which stores nothing for it
        kill(server.proc)

    capture.refresh_from_db()
    before = frame_rows(capture)
    assert capture.outcome == "live" and capture.finished is None
    assert len(before) == len(frames) and [n for n, _ in before] == list(range(len(frames)))
    assert capture.assemblies.count() == 0

    recovered = recover_interrupted(force=True)

    assert [c.slug for c in recovered] == [slug]
    strict = assert_recovered(capture, before, stored)
    call = strict.calls.get()
    assert (call.call_id, call.name) == ("call_1", "get_weather")
    assert call.arguments_text == '{"city": "Paris", "days'
    assert call.fragments.count() == 4
    assert capture.source == "ingest" and capture.title == "crash"
    touched = capture.frames.get(number=TEXT_FRAMES + 1)
    assert touched.calls == [0]
    assert recover_interrupted(force=True) == []  # once

    fresh = daphne_process({"INSPECTOR_TEST_PROCESS": "crash-ingest-restarted"})
    page = httpx.get(f"{fresh.url}/c/{slug}/", timeout=10)
    assert page.status_code == 200 and "INCOMPLETE_STREAM" in page.text
    detail = httpx.get(f"{fresh.url}/api/captures/{slug}", timeout=10).json()
    assert detail["outcome"] == "refused" and detail["result"]["refusal"]["code"] == (
        "INCOMPLETE_STREAM"
    )
    assert detail["frame_count"] == len(frames)


def test_a_server_killed_while_proxying_leaves_a_capture_recovery_closes(
    daphne_process, transactional_db, tmp_path
):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "slow.sse").write_bytes(b"".join(interrupted_stream()) + b"data: [DONE]\n\n")
    (scenarios / "slow.json").write_text(json.dumps({"pace_ms": 100}))
    with FakeUpstream(scenarios) as fake:
        server = daphne_process({"INSPECTOR_UPSTREAMS": f"fake={fake.url}"})
        request = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "x"}]}
        with httpx.Client(timeout=20) as client:
            with pytest.raises(httpx.HTTPError):
                with client.stream(
                    "POST", f"{server.url}/proxy/fake/v1/chat/completions", json=request
                ) as response:
                    slug = response.headers["X-Inspector-Capture"]
                    reads = response.iter_raw()
                    seen = b""
                    while seen.count(b"\n\n") < 10:
                        seen += next(reads)
                    capture = wait_for(
                        lambda: models.Capture.objects.filter(slug=slug).first(), 10, "capture"
                    )
                    wait_for(lambda: capture.frames.count() >= 10, 10, "10 stored frames")
                    kill(server.proc)
                    for _ in reads:  # the relay ends with the server
                        pass
    capture.refresh_from_db()
    before = frame_rows(capture)
    assert capture.outcome == "live" and 10 <= len(before) < len(interrupted_stream())
    stored = "".join(raw + "\n\n" for _, raw in before).encode()

    recovered = recover_interrupted(force=True)

    assert [c.slug for c in recovered] == [slug]
    assert_recovered(capture, before, stored)
    assert capture.source == "proxy" and capture.upstream == "fake"
    assert orjson.loads(capture.request_json)["model"] == "slow"


# -- in-process: the staleness rule, formats, the command ---------------------------------


@pytest.fixture
def live_capture(db):
    def make(pieces: list[bytes], fmt: str = "sse") -> LiveCapture:
        live = LiveCapture.open(stream_format=fmt, source="ingest", title="left behind")
        for piece in pieces:
            live.append(piece)
        return live

    return make


def test_a_recent_live_capture_is_left_alone_unless_forced(live_capture):
    live = live_capture(interrupted_stream()[:5])
    assert recover_interrupted() == []
    assert recover_interrupted(now=timezone.now() + timedelta(seconds=100)) == []
    assert models.Capture.objects.get(pk=live.capture.pk).outcome == "live"
    assert recover_interrupted(force=True)[0].pk == live.capture.pk


def test_a_capture_idle_for_the_stale_time_is_recovered(live_capture):
    live = live_capture(interrupted_stream()[:5])
    later = timezone.now() + timedelta(seconds=121)
    assert [c.pk for c in recover_interrupted(now=later)] == [live.capture.pk]
    with override_settings(INSPECTOR_LIVE_STALE_SECONDS=5):
        other = live_capture(interrupted_stream()[:3])
        assert recover_interrupted(now=timezone.now() + timedelta(seconds=2)) == []
        recovered = recover_interrupted(now=timezone.now() + timedelta(seconds=6))
    assert [c.pk for c in recovered] == [other.capture.pk]


def test_staleness_counts_from_the_last_stored_frame(live_capture):
    live = live_capture(interrupted_stream()[:2])
    models.Capture.objects.filter(pk=live.capture.pk).update(
        created=timezone.now() - timedelta(seconds=300)
    )
    live.capture.frames.filter(number=1).update(arrived_ms=250_000)  # 50 s ago
    assert recover_interrupted() == []
    live.capture.frames.filter(number=1).update(arrived_ms=150_000)  # 150 s ago
    assert len(recover_interrupted()) == 1


def test_jsonl_and_empty_captures_are_recovered_whole(live_capture):
    lines = [piece[6:-2] + b"\n" for piece in interrupted_stream()[:6]]
    jsonl = live_capture(lines, fmt="jsonl")
    empty = live_capture([])
    done = live_capture([chunk({"content": "hi"}), chunk({}, "stop"), b"data: [DONE]\n\n"])

    recovered = {c.pk: c for c in recover_interrupted(force=True)}

    assert set(recovered) == {jsonl.capture.pk, empty.capture.pk, done.capture.pk}
    j = models.Capture.objects.get(pk=jsonl.capture.pk)
    assert (j.outcome, j.refusal_code, j.frame_count) == ("refused", "INCOMPLETE_STREAM", 6)
    assert bytes(j.raw) == b"".join(lines) and j.frames.count() == 6
    e = models.Capture.objects.get(pk=empty.capture.pk)
    assert e.frame_count == 0 and e.assemblies.count() == 2 and e.outcome == "refused"
    # A stream that had ended when the process died says so: ok.
    d = models.Capture.objects.get(pk=done.capture.pk)
    assert (d.outcome, d.frame_count) == ("ok", 3)


def test_closed_captures_are_never_touched(live_capture):
    live = live_capture([chunk({"content": "hi"}), chunk({}, "stop")])
    live.close()
    finished = models.Capture.objects.get(pk=live.capture.pk).finished
    assert recover_interrupted(force=True) == []
    closed = models.Capture.objects.get(pk=live.capture.pk)
    assert closed.finished == finished and not closed.interrupted


def test_a_stream_cut_after_its_finish_reason_is_ok_but_marked_interrupted(live_capture, client):
    """The spec accepts a stream with a finish_reason and no [DONE] (an anomaly), so the
    verdict stays ok; the capture still says that its recording was cut short."""
    live = live_capture([chunk({"content": "hi"}), chunk({}, "stop")])
    (capture,) = recover_interrupted(force=True)
    assert (capture.outcome, capture.interrupted) == ("ok", True)
    page = client.get(capture.get_absolute_url()).content.decode()
    assert "data-interrupted" in page and "stopped before it ended" in page
    assert "holds the 2 frames stored until then" in page
    assert client.get(f"/api/captures/{live.slug}").json()["interrupted"] is True
    listing = client.get("/").content.decode()
    assert 'title="the server stopped while recording; closed by recovery">interrupted<' in listing


def test_the_command_reports_what_it_recovered(live_capture, capsys):
    live = live_capture(interrupted_stream()[:4])
    call_command("recover_live")
    assert "no interrupted live capture" in capsys.readouterr().out
    call_command("recover_live", "--force")
    out = capsys.readouterr().out
    assert f"recovered {live.capture.slug}: 4 frames, refused INCOMPLETE_STREAM" in out
    call_command("recover_live", "--stale-seconds", "0")
    assert "no interrupted live capture" in capsys.readouterr().out


# An Anthropic stream the proxy's /v1/messages route recorded, cut after a tool call's
# first argument piece; and an upstream's error event, which no frame places in a dialect.
MESSAGES_CUT = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"type":"message","role":"assistant","model":"claude","content":[]}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"tool_use","id":"toolu_a","name":"f","input":{}}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"input_json_delta","partial_json":"{\\"a\\": 1"}}\n\n',
]
ERROR_EVENT = [
    b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
    b'"message":"Overloaded"}}\n\n'
]


@pytest.mark.parametrize("told", [{"hint": "messages"}, {"dialect": "messages"}])
@pytest.mark.parametrize("pieces", [MESSAGES_CUT, ERROR_EVENT], ids=["tool-call", "error"])
def test_recovery_reads_the_frames_in_the_dialect_they_were_recorded_in(db, told, pieces):
    """A capture the proxy recorded under a dialect's route (a hint) or that ingest was told
    the dialect of is recovered in that dialect, on the same grounds, with the verdict its
    live close would have given, not in what its frames alone suggest (an error event
    alone reads as chat)."""

    def recorded(*, close: bool) -> models.Capture:
        live = LiveCapture(open_capture(stream_format="sse"), **told)
        for piece in pieces:
            live.append(piece)
        if close:
            live.close()
        else:
            assert [c.pk for c in recover_interrupted(force=True)] == [live.capture.pk]
        return models.Capture.objects.get(pk=live.capture.pk)

    closed, recovered = recorded(close=True), recorded(close=False)
    basis = "url" if "hint" in told else "chosen"
    assert (recovered.dialect, recovered.dialect_basis) == ("messages", basis)

    def verdict(capture: models.Capture) -> tuple:
        strict = capture.assemblies.get(policy="strict")
        calls = list(strict.calls.values_list("call_id", "name", "arguments_text"))
        fields = ("dialect", "dialect_basis", "outcome", "refusal_code", "lenient_outcome")
        return (*(getattr(capture, field) for field in fields), calls)

    assert verdict(recovered) == verdict(closed)
    assert recovered.interrupted and not closed.interrupted


def test_a_socket_capture_s_chosen_dialect_is_written_when_it_opens(db):
    """The ingest socket's chosen dialect is on the capture from its creation, so a
    capture whose process died before any frame was stored is recovered in it too."""
    from inspector.live.recorder import SocketRecording

    capture = SocketRecording(stream_format="sse", title="t", dialect="gemini").open_capture()
    assert (capture.dialect, capture.dialect_basis) == ("gemini", "chosen")
    (recovered,) = recover_interrupted(force=True)
    assert (recovered.dialect, recovered.dialect_basis) == ("gemini", "chosen")
