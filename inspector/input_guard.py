"""Requests the database must never see: NUL bytes in the path or the query.

PostgreSQL's text cannot hold U+0000, so a slug, filter or route argument
carrying one (`/c/%00/`, `?q=%00`, `/api/ingest/%00/append`, a websocket
handshake to `/ws/captures/%00/`) made psycopg raise and the server answer
500, anonymously in login mode too.  No real path or parameter of the
inspector contains NUL, so the request is refused here, in front of
everything (static files, Django, Channels), before any query runs: 404 for
a path, 400 for a query string, and a websocket closed before its handshake.
"""

from __future__ import annotations

from typing import Any

# Close code for a refused handshake (the client sees HTTP 403 before accept).
BAD_SOCKET = 4400


def nul_in(scope: dict[str, Any]) -> str | None:
    """Where the request carries a NUL byte: "path", "query" or None."""
    raw_path = scope.get("raw_path") or b""
    if "\x00" in scope.get("path", "") or b"\x00" in raw_path or b"%00" in raw_path:
        return "path"
    query = scope.get("query_string", b"")
    if b"\x00" in query or b"%00" in query:
        return "query"
    return None


class RefuseNulBytes:
    """ASGI middleware: refuse requests with NUL in their path or query."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        where = nul_in(scope) if scope.get("type") in ("http", "websocket") else None
        if where is None:
            return await self.inner(scope, receive, send)
        if scope["type"] == "websocket":
            message = await receive()
            if message.get("type") == "websocket.connect":
                await send({"type": "websocket.close", "code": BAD_SOCKET})
            return None
        status = 404 if where == "path" else 400
        body = f"a NUL byte in the request's {where}\n".encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"x-content-type-options", b"nosniff"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        return None
