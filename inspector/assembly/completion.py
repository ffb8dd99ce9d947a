"""A non-streamed chat completion as the stream that would have carried it.

The assembler judges streams, and the spec ignores a `message` in place of a
`delta`, so a whole `chat.completion` body assembles as
`EMPTY_RESPONSE`.  The recording proxy passes non-streamed answers through
too; to judge their tool calls by the same rules (ids, names, arguments that
must be one JSON object) it records such a body as its one-chunk equivalent:
the body with `object: "chat.completion.chunk"`, each choice's `message` as
its `delta` (tool calls numbered by position where they carry no index),
then `data: [DONE]`.  Every other key is kept as it came.
"""

from __future__ import annotations

from typing import Any

import orjson

COMPLETION = "chat.completion"
CHUNK = "chat.completion.chunk"


def is_completion(value: Any) -> bool:
    """A non-streamed chat completion: `object` says so, or it has choices
    that carry a `message` and no `delta`."""
    if type(value) is not dict:
        return False
    if value.get("object") == COMPLETION:
        return True
    choices = value.get("choices")
    return (
        type(choices) is list
        and bool(choices)
        and all(type(c) is dict and "message" in c and "delta" not in c for c in choices)
    )


def completion_stream(completion: dict[str, Any]) -> bytes:
    """The SSE stream equivalent to `completion` (one chunk, then [DONE])."""
    chunk = {**completion, "object": CHUNK}
    choices = completion.get("choices")
    if type(choices) is list:
        chunk["choices"] = [_as_delta(choice) for choice in choices]
    return b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"


def _as_delta(choice: Any) -> Any:
    if type(choice) is not dict or type(choice.get("message")) is not dict:
        return choice
    out = {key: value for key, value in choice.items() if key != "message"}
    delta = dict(choice["message"])
    calls = delta.get("tool_calls")
    if type(calls) is list:
        delta["tool_calls"] = [
            {"index": position, **call} if type(call) is dict and "index" not in call else call
            for position, call in enumerate(calls)
        ]
    out["delta"] = delta
    return out
