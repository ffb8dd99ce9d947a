"""The stored stream served back to an official SDK, over no network.

The SDK lenses (`anthropic_sdk`, `google_genai`, the Responses side of
`openai_sdk`) do not mirror what an SDK does with the wire: they call the SDK
the way its users do (`client.messages.stream(...)`,
`client.responses.stream(...)`, `client.models.generate_content_stream(...)`)
with an HTTP client whose transport answers every request with the frames we
read.  The SDK's own SSE decoder, event parsing, accumulator and errors then
decide what its caller would get; no rule of it is re-implemented here.

`sse_body(frames)` gives the bytes: each frame's block exactly as it was read
(`Frame.raw`), blank-line separated, the last one left unterminated when the
input ended inside it.  Frames read from JSON Lines or a JSON array carry no
SSE framing; they are re-framed as `data:` events (with `event:` named after
the payload's `type` where the SDK dispatches on event names; the end marker,
which JSON Lines may write as the string `"[DONE]"`, as `data: [DONE]`),
because every SDK asks for SSE and would have read them that way; the lens
notes it.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame, FrameKind

# What the transport answers with; the request itself is never looked at.
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache"}
# A base URL that resolves nowhere: the mock transport answers before any
# connection, and a lens that somehow reached the network would fail.
BASE_URL = "http://lens.invalid"
REFRAMED = "the stream was not read as SSE; it is served to the SDK as SSE `data:` events"


def _reframed(frame: Frame, *, event_from_type: bool) -> str:
    if frame.kind is FrameKind.DONE:  # a JSON Lines `"[DONE]"` string among them
        return "data: [DONE]"
    lines = []
    kind = frame.payload.get("type") if isinstance(frame.payload, dict) else None
    if event_from_type and isinstance(kind, str):
        lines.append(f"event: {kind}")
    lines.extend(f"data: {line}" for line in frame.data.split("\n"))
    return "\n".join(lines)


def sse_body(
    frames: Iterable[Frame], notes: list[str] | None = None, *, event_from_type: bool = False
) -> bytes:
    """The frames as the bytes of an SSE response.

    A frame whose `raw` is its `data` came from JSON Lines or a JSON array:
    it becomes a `data:` event (`event_from_type`: with an `event:` line
    naming its payload's `type`).  `notes`, when given, says so once.
    """
    blocks: list[str] = []
    reframed = False
    last_unterminated = False
    for frame in frames:
        if frame.raw == frame.data and frame.data:
            blocks.append(_reframed(frame, event_from_type=event_from_type))
            reframed = True
        else:
            blocks.append(frame.raw)
        last_unterminated = frame.unterminated
    if reframed and notes is not None:
        notes.append(REFRAMED)
    if not blocks:
        return b""
    text = "\n\n".join(blocks)
    if not last_unterminated:
        text += "\n\n"
    return text.encode("utf-8")


def serving_client(httpx_module: Any, body: bytes) -> Any:
    """An `httpx_module.Client` (httpx or httpx2, whichever the SDK takes)
    that answers every request with `body` as a 200 event stream."""

    def answer(request: Any) -> Any:
        return httpx_module.Response(200, headers=SSE_HEADERS, content=body, request=request)

    return httpx_module.Client(transport=httpx_module.MockTransport(answer))
