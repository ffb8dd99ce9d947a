"""Builders for small streams, shared by the assembly tests.

    sse(chunk({"content": "Hi"}, finish="stop"), DONE)

renders each dict as one `data: ...` SSE frame, `DONE` as `data: [DONE]`, and
puts any str in verbatim (comments, broken frames, raw blocks).  `run()`
assembles the bytes and returns the result document (`Result.to_dict()`).
"""

from __future__ import annotations

import json
from typing import Any

from inspector.assembly import assemble

DONE = "data: [DONE]\n\n"
OMIT = object()  # leave a key out of a tool-call entry


def dumps(payload: Any) -> str:
    """Compact JSON (the standard library's, so nesting deeper than orjson
    writes works too)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def data_line(payload: Any) -> str:
    return "data: " + dumps(payload)


def sse(*items: Any) -> bytes:
    """Each dict (or list) becomes one frame; each str is written verbatim."""
    parts = []
    for item in items:
        parts.append(item if isinstance(item, str) else data_line(item) + "\n\n")
    return "".join(parts).encode()


def jsonl(*items: Any) -> bytes:
    lines = [item if isinstance(item, str) else dumps(item) for item in items]
    return ("\n".join(lines) + "\n").encode()


def choice(delta: Any = OMIT, *, finish: Any = None, index: Any = 0) -> dict[str, Any]:
    item: dict[str, Any] = {"index": index}
    if delta is not OMIT:
        item["delta"] = delta
    item["finish_reason"] = finish
    return item


def chunk(
    delta: Any = OMIT,
    *,
    finish: Any = None,
    usage: Any = OMIT,
    index: Any = 0,
    choices: list[Any] | None = None,
) -> dict[str, Any]:
    """One chat.completion.chunk with one choice (or the `choices` given)."""
    payload: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "model": "gpt-test",
        "choices": choices
        if choices is not None
        else [choice({} if delta is OMIT else delta, finish=finish, index=index)],
    }
    if usage is not OMIT:
        payload["usage"] = usage
    return payload


def tool(
    index: Any = OMIT,
    id: Any = OMIT,  # noqa: A002 - the wire name
    name: Any = OMIT,
    args: Any = OMIT,
    *,
    function: Any = OMIT,
) -> dict[str, Any]:
    """One `delta.tool_calls[]` entry; keys left as OMIT are not sent."""
    entry: dict[str, Any] = {}
    if index is not OMIT:
        entry["index"] = index
    if id is not OMIT:
        entry["id"] = id
        entry["type"] = "function"
    if function is not OMIT:
        entry["function"] = function
    elif name is not OMIT or args is not OMIT:
        entry["function"] = {}
        if name is not OMIT:
            entry["function"]["name"] = name
        if args is not OMIT:
            entry["function"]["arguments"] = args
    return entry


def calls(*entries: Any, finish: Any = None, usage: Any = OMIT, index: Any = 0) -> dict[str, Any]:
    """A chunk whose delta carries these tool-call entries."""
    return chunk({"tool_calls": list(entries)}, finish=finish, usage=usage, index=index)


def text(content: str, *, finish: Any = None) -> dict[str, Any]:
    return chunk({"content": content}, finish=finish)


def finish(reason: str = "tool_calls", *, usage: Any = OMIT) -> dict[str, Any]:
    return chunk({}, finish=reason, usage=usage)


USAGE = {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21}


def run(data: bytes | str, **options: Any) -> dict[str, Any]:
    """Assemble `data` (SSE unless fmt is given) and return the result document."""
    if isinstance(data, str):
        data = data.encode()
    options.setdefault("fmt", "sse")
    return assemble(data, **options).to_dict()


def run_sse(*items: Any, **options: Any) -> dict[str, Any]:
    return run(sse(*items), **options)


def kinds(result: dict[str, Any]) -> list[str]:
    return [anomaly["kind"] for anomaly in result["anomalies"]]


def types(result: dict[str, Any], *, frame: int | None = None) -> list[str]:
    return [e["type"] for e in result["events"] if frame is None or e["frame"] == frame]


def events_of(result: dict[str, Any], *wanted: str) -> list[dict[str, Any]]:
    return [e for e in result["events"] if e["type"] in wanted]


def code(result: dict[str, Any]) -> str | None:
    return result["refusal"]["code"] if result["refusal"] else None


# The spec's event types (section 7), and those that concern one call.
EVENT_TYPES = {
    "text_delta",
    "reasoning_delta",
    "identity",
    "identity_ignored",
    "toolcall_start",
    "toolcall_delta",
    "settled",
    "toolcall_end",
    "dropped",
    "anomaly",
    "usage",
    "finish",
    "done",
    "refusal",
}
CALL_EVENT_TYPES = {
    "identity",
    "identity_ignored",
    "toolcall_start",
    "toolcall_delta",
    "settled",
    "toolcall_end",
}
