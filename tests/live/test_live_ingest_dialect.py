"""Ingest, over HTTP and over the websocket, takes the stream's dialect when it
opens a capture (default auto, as an upload does)."""

from __future__ import annotations

import orjson
import pytest
from channels.testing import WebsocketCommunicator

from inspector.captures import models
from inspector.live.fake_upstream import DEFAULT_SCENARIOS

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES_STREAM = (DEFAULT_SCENARIOS / "messages-ok.sse").read_bytes()


def test_http_ingest_reads_the_dialect_it_is_told_or_detects_it(client):
    results = {}
    for dialect in ("messages", "gemini", None):
        options = {"title": f"told {dialect}", **({"dialect": dialect} if dialect else {})}
        opened = client.post("/api/ingest", options, content_type="application/json").json()
        client.post(opened["append_url"], MESSAGES_STREAM, content_type="text/event-stream")
        client.post(opened["close_url"])
        capture = models.Capture.objects.get(slug=opened["slug"])
        results[dialect] = (capture.dialect, capture.dialect_basis, capture.outcome)
    assert results["messages"] == ("messages", "chosen", "ok")
    assert results["gemini"] == ("gemini", "chosen", "refused")  # no candidate ever finishes
    assert results[None] == ("messages", "frames", "ok")


def test_http_ingest_refuses_an_unknown_dialect(client):
    answer = client.post("/api/ingest", {"dialect": "smoke"}, content_type="application/json")
    assert answer.status_code == 400 and "dialect is one of" in answer.json()["error"]
    assert models.Capture.objects.count() == 0


async def test_the_ingest_socket_takes_the_dialect():
    from inspector.asgi import application

    socket = WebsocketCommunicator(application, "/ws/ingest/")
    assert (await socket.connect(timeout=5))[0]
    await socket.send_json_to({"open": {"format": "sse", "dialect": "nope"}})
    assert "dialect is one of" in (await socket.receive_json_from(timeout=5))["error"]
    await socket.send_json_to({"open": {"format": "sse", "dialect": "messages"}})
    opened = await socket.receive_json_from(timeout=5)
    await socket.send_to(bytes_data=MESSAGES_STREAM)
    await socket.send_json_to({"close": True})
    closed = await socket.receive_json_from(timeout=10)
    assert closed["type"] == "closed" and closed["outcome"] == "ok", orjson.dumps(closed)
    await socket.disconnect()
    capture = await models.Capture.objects.aget(slug=opened["slug"])
    assert (capture.dialect, capture.dialect_basis) == ("messages", "chosen")
