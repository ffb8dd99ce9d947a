"""Builders of small OpenAI-style streams for the captures tests."""

from __future__ import annotations

from typing import Any

import orjson

DONE = "data: [DONE]\n\n"
MODEL = "gpt-test"


def tool(index: int = 0, id: str | None = None, name: str | None = None, args: str | None = None):
    """One `delta.tool_calls[]` entry; keys left out when not given."""
    entry: dict[str, Any] = {"index": index}
    if id is not None:
        entry["id"] = id
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        entry["function"] = function
    return entry


def chunk(
    *tools: dict,
    content: str | None = None,
    finish: str | None = None,
    usage: dict | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tools:
        delta["tool_calls"] = list(tools)
    payload: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        payload["usage"] = usage
    return payload


def sse(*items: Any) -> bytes:
    """SSE bytes: dicts become `data:` frames, strings are taken as they are."""
    return "".join(
        item if isinstance(item, str) else "data: " + orjson.dumps(item).decode() + "\n\n"
        for item in items
    ).encode()


def jsonl(*items: Any) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


def role_chunk() -> dict[str, Any]:
    """The first chunk of a chat stream: the role, nothing else."""
    payload = chunk()
    payload["choices"][0]["delta"] = {"role": "assistant"}
    return payload


# A short text stream, frame by frame as SSE (the role, then ten words), and whole
# (then the finish and `[DONE]`): 13 frames, for tests of steps a few frames long.
WORD_PIECES = [sse(role_chunk())] + [sse(chunk(content=f"w{n} ")) for n in range(10)]
WORD_STREAM = b"".join([*WORD_PIECES, sse(chunk(finish="stop"), DONE)])
