"""Streams for the minimizer tests, written here (never read from ../shared):
one or more refused streams per refusal code, with enough noise around the
fault to give the minimizer something to do, and a few streams that are ok.

Also `frames_of` / `join_frames`, an independent way to split a minimized
SSE stream into its frames and put it back together without one of them.
"""

from __future__ import annotations

import json
from typing import Any

from inspector.assembly import JSONLReader, SSEReader

DONE = "data: [DONE]\n\n"


def dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, **extra: Any) -> dict:
    payload = {
        "id": "chatcmpl-min",
        "object": "chat.completion.chunk",
        "created": 1718000000,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    payload.update(extra)
    return payload


def tool(index: int | None = 0, id: str | None = None, name: str | None = None, args=None) -> dict:
    entry: dict[str, Any] = {}
    if index is not None:
        entry["index"] = index
    if id is not None:
        entry["id"] = id
        entry["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        entry["function"] = function
    return entry


def calls(*entries: dict, finish: str | None = None) -> dict:
    return chunk({"tool_calls": list(entries)}, finish=finish)


ROLE = chunk({"role": "assistant", "content": None})
USAGE = chunk(None, usage={"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42})
USAGE["choices"] = []
KEEPALIVE = ": OPENROUTER PROCESSING\n\n"


def sse(*items: Any) -> bytes:
    """Dicts become `data:` frames; strings are written verbatim."""
    return "".join(
        item if isinstance(item, str) else f"data: {dumps(item)}\n\n" for item in items
    ).encode()


def jsonl(*items: Any) -> bytes:
    return "".join(
        (item if isinstance(item, str) else dumps(item)) + "\n" for item in items
    ).encode()


# Two calls sharing index 0 (Ollama), with noise around them: strict takes
# them as two calls, LiteLLM (index only) glues them into one.
REUSED_INDEX = [
    ROLE,
    KEEPALIVE,
    calls(tool(0, "call_a", "read", "")),
    calls(tool(0, args='{"path":')),
    calls(tool(0, args='"/a"}')),
    chunk({"content": "and"}),
    calls(tool(0, "call_b", "read", '{"path":"/b"}')),
    chunk(None, finish="tool_calls"),
    USAGE,
    DONE,
]
# The only call at index 1: the OpenAI SDK raises IndexError.
SPARSE_INDEX = sse(
    ROLE,
    chunk({"content": "Reading"}),
    calls(tool(1, "toolu_1", "read_file", "")),
    calls(tool(1, args='{"path": "a.txt"}')),
    chunk(None, finish="tool_calls"),
    USAGE,
    DONE,
)


def _good_call(index: int, call_id: str, name: str, path: str) -> list[dict]:
    return [
        calls(tool(index, call_id, name, "")),
        calls(tool(index, args='{"path":')),
        calls(tool(index, args=dumps(path) + "}")),
    ]


# code -> {variant name: stream bytes (SSE unless the name ends in _jsonl)}
REFUSED: dict[str, dict[str, bytes]] = {
    "AMBIGUOUS_CONTINUATION": {
        "two_calls_one_index": sse(
            ROLE,
            chunk({"content": "Reading both files."}),
            calls(tool(0, "call_1", "read", '{"path":')),
            KEEPALIVE,
            calls(tool(0, "call_2", "stat", '{"path":')),
            calls(tool(0, args='"/b"}')),
            calls(tool(0, args='"/a"}')),
            chunk(None, finish="tool_calls"),
            USAGE,
            DONE,
        ),
        "no_index_jsonl": jsonl(
            ROLE,
            calls(tool(None, "call_x", "list", "{")),
            calls(tool(None, "call_y", "list", "{")),
            calls(tool(None, args='"dir":"/"}')),
            chunk(None, finish="tool_calls"),
            "[DONE]",
        ),
    },
    "IDENTITY_CONFLICT": {
        "renamed_call": sse(
            ROLE,
            *_good_call(0, "call_ok", "read_file", "/etc/hosts"),
            calls(tool(1, "call_f", "read_file", "")),
            calls(tool(1, args='{"path":"/tmp/x"')),
            calls(tool(1, "call_f", "write_file", "}")),
            chunk(None, finish="tool_calls"),
            DONE,
        ),
    },
    "INVALID_ARGUMENTS": {
        "stray_brace": sse(
            ROLE,
            *_good_call(0, "call_good", "read", "/ok"),
            calls(tool(1, "call_bad", "read", '{"path":')),
            calls(tool(1, args='"/bad"}}')),
            chunk(None, finish="tool_calls"),
            USAGE,
            DONE,
        ),
        "parser_found_crlf": sse(
            ROLE,
            calls(tool(0, "call_n", "count", '{"n":')),
            calls(tool(0, args="01}")),
            chunk(None, finish="tool_calls"),
            DONE,
        ).replace(b"\n", b"\r\n"),
    },
    "INVALID_FRAME": {
        "not_json": sse(
            ROLE,
            chunk({"content": "Hello"}),
            *_good_call(0, "call_a", "read", "/a"),
            "data: {this is not json}\n\n",
            chunk(None, finish="tool_calls"),
            DONE,
        ),
    },
    "INCOMPLETE_STREAM": {
        "cut_mid_frame": sse(
            ROLE,
            calls(tool(0, "call_c", "tail_file", "")),
            calls(tool(0, args='{"path":"/va')),
            'data: {"id":"chatcmpl-min","choices":[{"index":0,"delta":{"tool_calls":[{"ind',
        ),
        "no_done_no_finish": sse(
            ROLE,
            chunk({"content": "Let me look"}),
            *_good_call(0, "call_i", "read", "/i"),
        ),
    },
    "UPSTREAM_ERROR": {
        "error_frame": sse(
            ROLE,
            chunk({"content": "Let me check"}),
            KEEPALIVE,
            {"error": {"message": "overloaded", "type": "server_error", "code": 503}},
            DONE,
        ),
        "finish_error": sse(
            ROLE,
            chunk({"content": "partial"}),
            chunk(None, finish="error"),
            USAGE,
            DONE,
        ),
    },
    "EMPTY_RESPONSE": {
        "nothing_said": sse(
            ROLE,
            KEEPALIVE,
            chunk({"reasoning_content": "thinking..."}),
            chunk(None, finish="stop"),
            USAGE,
            DONE,
        ),
    },
    "MALFORMED_TOOL_CALL": {
        "id_never_arrives": sse(
            ROLE,
            *_good_call(0, "call_ok", "read", "/ok"),
            calls(tool(1, None, "write", '{"path":')),
            calls(tool(1, args='"/w","data":"xyz"}')),
            chunk(None, finish="tool_calls"),
            DONE,
        ),
    },
}


def events(*payloads: dict) -> bytes:
    """Responses or Messages frames: each with its `event:` line, named by its type."""
    return "".join(f"event: {p['type']}\ndata: {dumps(p)}\n\n" for p in payloads).encode()


def _fc_item(status: str, arguments: str) -> dict:
    return {"id": "fc_1", "type": "function_call", "status": status, "arguments": arguments,
            "call_id": "call_A", "name": "read_file"}  # fmt: skip


def _response(status: str) -> dict:
    return {"id": "resp_1", "object": "response", "status": status, "model": "gpt-test",
            "output": [], "usage": None}  # fmt: skip


def _block_start(index: int, call_id: str, name: str) -> dict:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def _input_delta(index: int, text: str) -> dict:
    delta = {"type": "input_json_delta", "partial_json": text}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _message_start(message_id: str) -> dict:
    message = {"id": message_id, "type": "message", "role": "assistant", "model": "claude-test",
               "content": [], "stop_reason": None, "usage": {"input_tokens": 9}}  # fmt: skip
    return {"type": "message_start", "message": message}


# The dialects' own codes: a Responses gateway whose deltas and final copy
# disagree, and an Anthropic relay that splices a second message into the first.
REFUSED["INCONSISTENT_CALL"] = {
    "responses_final_copy_disagrees": events(
        {"type": "response.created", "response": _response("in_progress")},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": _fc_item("in_progress", ""),
        },
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"path":'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '"/a"}'},
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": _fc_item("completed", '{"path":"/b"}'),
        },
        {"type": "response.completed", "response": _response("completed")},
    ),  # fmt: skip
}
REFUSED["SPLICED_STREAM"] = {
    "messages_second_start": events(
        _message_start("msg_first"),
        _block_start(0, "toolu_a", "read"),
        _input_delta(0, '{"path":"/a"'),
        _message_start("msg_second"),
        _block_start(0, "toolu_b", "write"),
        _input_delta(0, '{"path":"/b"}'),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ),  # fmt: skip
}

OK: dict[str, bytes] = {
    "one_call": sse(
        ROLE, *_good_call(0, "call_1", "read", "/a"), chunk(None, finish="tool_calls"), USAGE, DONE
    ),
    "text_missing_done": sse(ROLE, chunk({"content": "Hi"}), chunk(None, finish="stop")),
    "one_call_jsonl": jsonl(
        ROLE, *_good_call(0, "call_j", "read", "/j"), chunk(None, finish="tool_calls"), '"[DONE]"'
    ),
}

# Every refused stream: (code, variant, format, bytes).
CASES = [
    (code, variant, "jsonl" if variant.endswith("_jsonl") else "sse", data)
    for code, variants in REFUSED.items()
    for variant, data in variants.items()
]


def frames_of(data: bytes, fmt: str) -> list[tuple[str, bool]]:
    """(raw text, unterminated) of every frame, read with our readers."""
    reader = SSEReader() if fmt == "sse" else JSONLReader()
    frames = reader.feed(data)
    frames.extend(reader.close())
    return [(frame.raw, frame.unterminated) for frame in frames]


def join_frames(frames: list[tuple[str, bool]], fmt: str) -> bytes:
    if fmt == "jsonl":
        return "".join(raw + "\n" for raw, _ in frames).encode()
    return "".join(raw if cut else raw + "\n\n" for raw, cut in frames).encode()
