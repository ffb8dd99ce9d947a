"""Streams, captures and websocket helpers of the access tests."""

from __future__ import annotations

from typing import Any

import orjson
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from inspector.captures.store import store_stream

PASSWORD = "correct horse battery staple"
DONE = b"data: [DONE]\n\n"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = "gpt-access") -> bytes:
    payload = {
        "id": "chatcmpl-access",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def ok_stream() -> bytes:
    call = {"index": 0, "id": "call_ok", "function": {"name": "lookup", "arguments": ""}}
    return b"".join(
        [
            chunk({"tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
            chunk({}, finish="tool_calls"),
            DONE,
        ]
    )


def refused_stream() -> bytes:
    """Arguments that never become JSON: refused (INVALID_ARGUMENTS), so minimizable."""
    call = {"index": 0, "id": "call_bad", "function": {"name": "lookup", "arguments": ""}}
    return b"".join(
        [
            chunk({"content": "thinking"}),
            chunk({"tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": tru'}}]}),
            chunk({}, finish="tool_calls"),
            DONE,
        ]
    )


def store(data: bytes | None = None, **meta: Any):
    return store_stream(data if data is not None else ok_stream(), stream_format="sse", **meta)


def share_pages(slug: str) -> list[str]:
    """Every read-only page a share link opens."""
    return [
        f"/c/{slug}/",
        f"/c/{slug}/frames/1/",
        f"/c/{slug}/raw",
        f"/c/{slug}/result.json",
        f"/c/{slug}/result.json?policy=lenient",
        f"/c/{slug}/lenses/",
        f"/c/{slug}/lenses/?partial=1",
        f"/c/{slug}/regression.sse",
        f"/c/{slug}/regression.expect.json",
        f"/c/{slug}/regression.zip",
    ]


def session_cookie(client) -> tuple[bytes, bytes]:
    """The Cookie header of a test client that has logged in."""
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def _ws(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[bool, Any]:
    from inspector.asgi import application

    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, detail = await comm.connect(timeout=5)
    if connected:
        first = None
        if path.startswith("/ws/captures/") and path != "/ws/captures/":
            first = await comm.receive_json_from(timeout=5)  # the snapshot
        await comm.disconnect()
        return True, first
    return False, detail


def ws_connect(path: str, *headers: tuple[bytes, bytes]) -> tuple[bool, Any]:
    """(connected, the first message or the close code), from sync tests."""
    return async_to_sync(_ws)(path, list(headers))


async def _ingest(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    from inspector.asgi import application

    comm = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await comm.connect(timeout=5)
    if not connected:
        return {"connected": False, "code": code}
    await comm.send_to(text_data=orjson.dumps({"open": {"title": "over ws"}}).decode())
    opened = orjson.loads(await comm.receive_from(timeout=5))
    await comm.send_to(bytes_data=ok_stream())
    await comm.send_to(text_data='{"close": true}')
    closed = orjson.loads(await comm.receive_from(timeout=10))
    await comm.disconnect()
    return {"connected": True, "opened": opened, "closed": closed}


def ws_ingest(path: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return async_to_sync(_ingest)(path, list(headers))
