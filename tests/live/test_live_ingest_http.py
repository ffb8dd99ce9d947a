"""Ingest over HTTP: open, append raw bytes in any pieces, close."""

import orjson
import pytest

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
