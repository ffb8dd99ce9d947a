"""Static files through the ASGI application with DEBUG off, and streaming still unbuffered.

The deployment recipe runs daphne with INSPECTOR_DEBUG=0, where `staticfiles_urlpatterns()`
serves nothing; `inspector.asgi` serves /static/ itself (inspector/static_files.py).
"""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import HttpCommunicator
from django.http import HttpRequest, StreamingHttpResponse
from django.test import override_settings
from django.urls import path

from inspector.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

HOST = [(b"host", b"testserver")]
GATE: dict[str, asyncio.Event] = {}


async def gated_stream(request: HttpRequest) -> StreamingHttpResponse:
    """Yields one chunk, then waits for the test to open the gate before the second."""

    async def body():
        yield b"data: first\n\n"
        await GATE["open"].wait()
        yield b"data: second\n\n"

    return StreamingHttpResponse(body(), content_type="text/event-stream")


urlpatterns = [path("gated", gated_stream)]


async def get(path: str) -> dict:
    """The response as HttpCommunicator.get_response() gives it, but a body message may omit
    "body" (ASGI allows it; Django's FileResponse ends with one)."""
    comm = HttpCommunicator(application, "GET", path, headers=HOST)
    await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
    response = await comm.receive_output(timeout=5)
    assert response["type"] == "http.response.start"
    response["body"] = b""
    while True:
        message = await comm.receive_output(timeout=5)
        assert message["type"] == "http.response.body"
        response["body"] += message.get("body", b"")
        if not message.get("more_body", False):
            break
    await comm.wait(timeout=5)
    return response


@override_settings(DEBUG=False)
async def test_static_file_is_served_with_debug_off():
    response = await get("/static/inspector/live.js")
    assert response["status"] == 200
    assert b"WebSocket" in response["body"]
    headers = {name.lower(): value for name, value in response["headers"]}
    assert headers[b"content-type"].startswith(b"text/javascript")
    assert headers[b"cache-control"] == b"public, max-age=3600"
    assert headers[b"x-content-type-options"] == b"nosniff"
    assert b"last-modified" in headers


@override_settings(DEBUG=False)
async def test_missing_static_file_is_404_with_debug_off():
    assert (await get("/static/inspector/nothing-here.js"))["status"] == 404


@override_settings(DEBUG=False, ROOT_URLCONF=__name__)
async def test_streamed_response_is_relayed_chunk_by_chunk():
    """The first chunk reaches the client while the view is still waiting to send the second."""
    GATE["open"] = asyncio.Event()
    comm = HttpCommunicator(application, "GET", "/gated", headers=HOST)
    await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await comm.receive_output(timeout=5)
    assert start["type"] == "http.response.start" and start["status"] == 200
    first = await comm.receive_output(timeout=5)
    assert first["body"] == b"data: first\n\n" and first["more_body"]
    GATE["open"].set()
    second = await comm.receive_output(timeout=5)
    assert second["body"] == b"data: second\n\n"
    await comm.wait(timeout=5)
