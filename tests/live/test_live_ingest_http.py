"""Ingest over HTTP: open, append raw bytes in any pieces, close."""

import itertools

import orjson
import pytest
from live_helpers import stored

from inspector.assembly import assemble
from inspector.captures import models

pytestmark = pytest.mark.django_db


def stream() -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def test_open_append_close_stores_what_an_upload_would(client):
    opened = client.post("/api/ingest", {"title": "script"}, content_type="application/json")
    assert opened.status_code == 201
    body = opened.json()
    data = stream()
    for start in range(0, len(data), 11):
        answer = client.post(
            body["append_url"], data[start : start + 11], content_type="application/octet-stream"
        )
        assert answer.status_code == 200
    assert models.Capture.objects.get(slug=body["slug"]).outcome == "live"

    closed = client.post(body["close_url"])
    assert closed.json() == {"slug": body["slug"], "outcome": "ok", "refusal": None}
    capture = models.Capture.objects.get(slug=body["slug"])
    assert bytes(capture.raw) == data and capture.title == "script"
    assert capture.frame_count == assemble(data, fmt="sse").frames == 3


def test_append_to_an_unknown_or_closed_capture_is_a_clear_error(client):
    unknown = client.post("/api/ingest/nope/append", b"x", content_type="text/plain")
    assert unknown.status_code == 404
    body = client.post("/api/ingest").json()
    client.post(body["close_url"])
    again = client.post(body["append_url"], b"data: {}\n\n", content_type="text/plain")
    assert again.status_code == 409 and "not open" in again.json()["error"]


def test_open_rejects_a_bad_format_and_bad_options(client):
    bad = client.post("/api/ingest", {"format": "har"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"] == "format is sse or jsonl"
    worse = client.post("/api/ingest", b"[1]", content_type="application/json")
    assert worse.status_code == 400
    assert models.Capture.objects.count() == 0


def test_a_capture_nobody_appends_to_is_closed_by_the_next_request(client, settings, monkeypatch):
    from inspector.live import ingest

    settings.INSPECTOR_LIVE_STALE_SECONDS = 60
    clock = [1000.0]
    monkeypatch.setattr(ingest, "clock", lambda: clock[0])

    def open_one(title: str) -> dict:
        return client.post("/api/ingest", {"title": title}, content_type="application/json").json()

    forgotten, kept = open_one("forgotten"), open_one("kept")
    half = stream()[:40]  # a frame and a half
    client.post(forgotten["append_url"], half, content_type="application/octet-stream")
    clock[0] += 59
    client.post(kept["append_url"], stream()[:10], content_type="application/octet-stream")
    assert models.Capture.objects.get(slug=forgotten["slug"]).outcome == "live"

    clock[0] += 2  # the forgotten one: 61 s idle; the kept one: 2 s
    assert client.post("/api/ingest", {}, content_type="application/json").status_code == 201
    capture = models.Capture.objects.get(slug=forgotten["slug"])
    assert (capture.outcome, capture.refusal_code) == ("refused", "INCOMPLETE_STREAM")
    assert bytes(capture.raw) == half and capture.finished is not None
    assert models.Capture.objects.get(slug=kept["slug"]).outcome == "live"
    late = client.post(forgotten["append_url"], b"more", content_type="application/octet-stream")
    assert late.status_code == 409  # closed: no longer open for ingest
    assert forgotten["slug"] not in ingest._open and forgotten["slug"] not in ingest._touched


def test_an_idle_capture_this_process_no_longer_holds_is_left_alone(monkeypatch, settings):
    """Its assembler gone from this process (another one took the capture),
    only its idle mark left: the sweep forgets the mark and closes nothing."""
    from inspector.live import ingest

    settings.INSPECTOR_LIVE_STALE_SECONDS = 60
    monkeypatch.setattr(ingest, "clock", lambda: 1000.0)
    monkeypatch.setitem(ingest._touched, "gone-elsewhere", 0.0)
    assert ingest.close_abandoned() == []
    assert "gone-elsewhere" not in ingest._touched


# -- the offset protocol, and any process continuing a capture ------------------------------


def tool_stream() -> bytes:
    """Text, then a tool call whose arguments arrive in 12 pieces."""
    text = [{"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]} for i in range(5)]
    arguments = orjson.dumps({"city": "Paris", "days": 3, "note": "x" * 60}).decode()
    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather"}}
    pieces = [arguments[i : i + 8] for i in range(0, len(arguments), 8)]
    calls = [{"choices": [{"index": 0, "delta": {"tool_calls": [start]}}]}]
    calls += [
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}}
            ]
        }
        for p in pieces
    ]
    end = [{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    body = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in text + calls + end)
    return body + b"data: [DONE]\n\n"


def append(client, slug: str, data: bytes, offset: int | None = None):
    headers = {} if offset is None else {"HTTP_UPLOAD_OFFSET": str(offset)}
    return client.post(
        f"/api/ingest/{slug}/append", data, content_type="application/octet-stream", **headers
    )


def test_an_append_names_its_offset_and_gets_the_new_one(client):
    slug = client.post("/api/ingest").json()["slug"]
    data = stream()
    first = append(client, slug, data[:30], offset=0)
    assert first.status_code == 200
    assert first.json()["offset"] == 30 and first["Upload-Offset"] == "30"

    repeated = append(client, slug, data[:30], offset=0)  # a retry of an append that was stored
    assert repeated.status_code == 409
    assert repeated.json()["expected"] == 30 and repeated["Upload-Offset"] == "30"
    ahead = append(client, slug, data[40:], offset=40)
    assert ahead.status_code == 409 and ahead.json()["expected"] == 30

    rest = append(client, slug, data[30:], offset=30)
    assert rest.json()["offset"] == len(data)
    without_header = append(client, slug, b"")  # still taken: stored after what was received
    assert without_header.status_code == 200 and without_header.json()["offset"] == len(data)
    client.post(f"/api/ingest/{slug}/close")
    capture = models.Capture.objects.get(slug=slug)
    assert bytes(capture.raw) == data and capture.frame_count == 3
    assert not models.IngestChunk.objects.filter(capture=capture).exists()  # raw holds them now


def test_a_malformed_offset_is_refused_and_nothing_is_stored(client):
    slug = client.post("/api/ingest").json()["slug"]
    bad = append(client, slug, b"data: {}\n\n", offset=None)
    assert bad.status_code == 200
    for value in ("-1", "ten", ""):
        answer = client.post(
            f"/api/ingest/{slug}/append",
            b"more",
            content_type="application/octet-stream",
            HTTP_UPLOAD_OFFSET=value,
        )
        assert answer.status_code == 400 and "Upload-Offset" in answer.json()["error"]
    assert models.Capture.objects.get(slug=slug).byte_size == len(b"data: {}\n\n")


def test_a_process_that_does_not_hold_the_capture_rebuilds_it_from_the_stored_bytes(client):
    """Three "processes": this one's held assembler is dropped (another process
    took the capture), then a stale one comes back (behind the stored offset).
    The capture stored equals an upload of the same bytes."""
    from inspector.captures.store import store_stream
    from inspector.live import ingest

    data = tool_stream()
    slug = client.post("/api/ingest", {"title": "t"}, content_type="application/json").json()[
        "slug"
    ]
    cuts = [0, 45, 190, 191, 420, len(data) - 20, len(data)]
    stale = None
    for number, (start, end) in enumerate(itertools.pairwise(cuts)):
        if number == 2:
            stale = ingest._open[slug]
        if number % 2:
            ingest._open.pop(slug)  # the next append lands on a process that never saw it
        if number == 4:
            ingest._open[slug] = stale  # a process whose assembler is behind
        answer = append(client, slug, data[start:end], offset=start)
        assert answer.status_code == 200, answer.json()
        assert answer.json()["offset"] == end
    ingest._open.pop(slug)  # and the close lands on yet another
    assert client.post(f"/api/ingest/{slug}/close").json()["outcome"] == "ok"

    upload = store_stream(data, stream_format="sse")
    assert stored(models.Capture.objects.get(slug=slug)) == stored(upload)
    assert stored(upload)["calls"][0][0] == "get_weather"


def test_an_abandoned_capture_another_process_continued_is_not_closed(
    client, settings, monkeypatch
):
    from inspector.live import ingest

    settings.INSPECTOR_LIVE_STALE_SECONDS = 60
    clock = [1000.0]
    monkeypatch.setattr(ingest, "clock", lambda: clock[0])
    slug = client.post("/api/ingest").json()["slug"]
    data = stream()
    append(client, slug, data[:20], offset=0)
    held = ingest._open.pop(slug)
    append(client, slug, data[20:40], offset=20)  # "another process" (it holds it now)
    ingest._open[slug], ingest._touched[slug] = held, clock[0]  # this one's old assembler
    clock[0] += 61
    assert slug in ingest.close_abandoned()
    assert models.Capture.objects.get(slug=slug).outcome == "live"  # left to the other
    assert append(client, slug, data[40:], offset=40).status_code == 200
    assert client.post(f"/api/ingest/{slug}/close").json()["outcome"] == "ok"
    assert bytes(models.Capture.objects.get(slug=slug).raw) == data


def test_recovery_of_an_ingest_capture_drops_its_kept_bytes(client):
    """A process died mid-stream: `recover_live` closes the capture from its
    frames, and the chunks kept for other processes go with it."""
    from inspector.live import ingest
    from inspector.live.recovery import recover_interrupted

    slug = client.post("/api/ingest").json()["slug"]
    append(client, slug, stream()[:60], offset=0)
    ingest._open.pop(slug)  # the process that held it is gone
    capture = models.Capture.objects.get(slug=slug)
    assert models.IngestChunk.objects.filter(capture=capture).count() == 1
    assert [c.slug for c in recover_interrupted(force=True)] == [slug]
    capture.refresh_from_db()
    assert capture.outcome != "live" and capture.interrupted
    assert not models.IngestChunk.objects.filter(capture=capture).exists()
    late = append(client, slug, stream()[60:], offset=60)
    assert late.status_code == 409 and "not open" in late.json()["error"]


def test_an_append_that_failed_to_store_is_taken_again_from_what_was_stored(client, monkeypatch):
    """The database refused the append's frames after the assembler had read
    its bytes: the process's assembler is ahead of what was stored, so the
    same append sent again is read by one rebuilt from the stored bytes."""
    from inspector.captures import writer
    from inspector.captures.store import store_stream

    data = tool_stream()
    slug = client.post("/api/ingest").json()["slug"]
    assert append(client, slug, data[:150], offset=0).status_code == 200
    real = writer.append_frames

    def refuse(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(writer, "append_frames", refuse)
    client.raise_request_exception = False
    assert append(client, slug, data[150:300], offset=150).status_code == 500
    monkeypatch.setattr(writer, "append_frames", real)
    assert models.Capture.objects.get(slug=slug).byte_size == 150  # nothing of it was kept
    assert append(client, slug, data[150:300], offset=150).json()["offset"] == 300
    assert append(client, slug, data[300:], offset=300).status_code == 200
    client.post(f"/api/ingest/{slug}/close")
    upload = store_stream(data, stream_format="sse")
    assert stored(models.Capture.objects.get(slug=slug)) == stored(upload)


def test_a_capture_the_ingest_websocket_records_takes_no_http_append(client):
    """Its frames are stored by the socket's process as they come and its bytes
    are not kept: an HTTP append can't continue it (409), nothing is stored."""
    from inspector.captures.store import open_capture

    socket_capture = open_capture(stream_format="sse", source="ingest", title="socket")
    answer = append(client, socket_capture.slug, stream(), offset=0)
    assert answer.status_code == 409 and "HTTP ingest" in answer.json()["error"]
    assert not socket_capture.frames.exists()
    assert client.post(f"/api/ingest/{socket_capture.slug}/close").status_code == 409
