"""Small streams for the lens tests, written here (not read from the notes).

    sse(chunk(tool(0, "call_A", "read", '{"path":')), chunk(finish="tool_calls"), DONE)

`tool()` leaves out every key it isn't given (`index=MISSING` leaves the
index out too); `frames()` reads the bytes with our reader and returns the
frames and the strict result, as every lens sees them.
"""

from __future__ import annotations

import json
from typing import Any

from inspector.lenses import read_frames_and_result

DONE = "data: [DONE]\n\n"
MISSING = object()


def tool(
    index: Any = 0,
    id: Any = MISSING,
    name: Any = MISSING,
    args: Any = MISSING,
    **extra: Any,
) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if index is not MISSING:
        entry["index"] = index
    if id is not MISSING:
        entry["id"] = id
    function: dict[str, Any] = {}
    if name is not MISSING:
        function["name"] = name
    if args is not MISSING:
        function["arguments"] = args
    entry["function"] = function
    entry.update(extra)
    return entry


def chunk(
    *tools: dict[str, Any],
    content: str | None = None,
    finish: str | None = None,
    choices: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tools:
        delta["tool_calls"] = list(tools)
    payload: dict[str, Any] = {
        "id": "chatcmpl-lens",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "test-model",
        "choices": choices
        if choices is not None
        else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    payload.update(extra)
    return payload


def sse(*items: Any) -> bytes:
    """Each dict is one `data:` frame; each str goes in verbatim."""
    return "".join(
        item if isinstance(item, str) else "data: " + json.dumps(item) + "\n\n" for item in items
    ).encode()


def frames(data: bytes, fmt: str = "sse"):
    return read_frames_and_result(data, fmt)


def calls(result) -> list[tuple[Any, Any, Any]]:
    """(id, name, arguments text) of each call a lens gives."""
    return [(call.id, call.name, call.arguments_text) for call in result.calls]


# A plain, well-formed stream: one call, split arguments, finish, [DONE].
OK = sse(
    chunk(tool(0, "call_A", "read", '{"path":', type="function")),
    chunk(tool(0, args='"/a"}')),
    chunk(finish="tool_calls"),
    DONE,
)
# Two calls that both use index 0 (Ollama), each whole in one chunk.
REUSED_INDEX = sse(
    chunk(tool(0, "call_a", "read", '{"path":"/a"}', type="function")),
    chunk(tool(0, "call_b", "read", '{"path":"/b"}', type="function")),
    chunk(finish="tool_calls"),
    DONE,
)
# The name (and id) repeated on every chunk (MiniMax, Fireworks).
REPEATED_NAME = sse(
    chunk(tool(0, "call_x", "read_file", '{"path":', type="function")),
    chunk(tool(0, "call_x", "read_file", '"/a"}', type="function")),
    chunk(finish="tool_calls"),
    DONE,
)
# The only call arrives at index 1 (text took index 0 upstream).
SPARSE_INDEX = sse(
    chunk(content="Reading"),
    chunk(tool(1, "toolu_1", "read_file", "", type="function")),
    chunk(tool(1, args='{"path": "a.txt"}')),
    chunk(finish="tool_calls"),
    DONE,
)
