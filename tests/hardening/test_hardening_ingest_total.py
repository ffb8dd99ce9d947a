"""Issue 12, item 8: ingest holds a capture to INSPECTOR_MAX_UPLOAD_BYTES in total, not only
per append.  The append that would cross the limit is refused (HTTP 413; websocket: an
error, the capture closed with what it holds, the socket closed) and nothing already
stored is lost."""

from __future__ import annotations

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from inspector.asgi import application
from inspector.captures import models


def frame(text: str) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


FRAME = frame("0123456789")
LIMIT = len(FRAME) * 3 + 10  # three frames fit, a fourth does not


@pytest.mark.django_db
def test_an_http_append_past_the_capture_total_is_413_and_keeps_what_is_stored(client, settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = LIMIT
    opened = client.post("/api/ingest", {"title": "t"}, content_type="application/json").json()
    for _ in range(3):
        ok = client.post(opened["append_url"], FRAME, content_type="application/octet-stream")
        assert ok.status_code == 200
    over = client.post(opened["append_url"], FRAME, content_type="application/octet-stream")
    assert over.status_code == 413
    error = over.json()["error"]
    assert f"would hold {len(FRAME) * 4} bytes" in error and str(LIMIT) in error
    capture = models.Capture.objects.get(slug=opened["slug"])
    assert capture.frames.count() == 3 and capture.outcome == "live"
    # one append over the limit on its own is still refused as before
    too_big = client.post(opened["append_url"], b"x" * (LIMIT + 1), content_type="text/plain")
    assert too_big.status_code == 413
    closed = client.post(opened["close_url"]).json()
    capture.refresh_from_db()
    assert closed["outcome"] == capture.outcome and capture.frame_count == 3
    assert bytes(capture.raw) == FRAME * 3


@pytest.mark.django_db(transaction=True)
async def test_a_websocket_append_past_the_capture_total_is_refused_and_the_capture_kept(
    settings,
):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = LIMIT
    ingest = WebsocketCommunicator(application, "/ws/ingest/")
    assert (await ingest.connect(timeout=5))[0]
    await ingest.send_json_to({"open": {"title": "ws", "format": "sse"}})
    slug = (await ingest.receive_json_from(timeout=5))["slug"]
    for _ in range(3):
        await ingest.send_to(bytes_data=FRAME)
    await ingest.send_to(bytes_data=FRAME)
    error = await ingest.receive_json_from(timeout=5)
    assert error["type"] == "error" and str(LIMIT) in error["error"]
    closed = await ingest.receive_json_from(timeout=5)
    assert closed["type"] == "closed" and closed["slug"] == slug
    assert (await ingest.receive_output(timeout=5)) == {"type": "websocket.close", "code": 1009}
    capture = await database_sync_to_async(models.Capture.objects.get)(slug=slug)
    assert capture.outcome != "live" and capture.frame_count == 3
    assert bytes(capture.raw) == FRAME * 3
