"""A non-streamed chat completion, judged as the stream that would have carried it."""

from __future__ import annotations

import orjson

from inspector.assembly import assemble
from inspector.assembly.completion import completion_stream, is_completion


def completion(*calls: dict, content: str | None = None, finish: str = "tool_calls") -> dict:
    message = {"role": "assistant", "content": content, "tool_calls": list(calls) or None}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }


def call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_what_counts_as_a_completion():
    assert is_completion(completion())
    assert is_completion({"choices": [{"message": {"content": "hi"}}]})  # no `object`
    assert not is_completion({"object": "chat.completion.chunk", "choices": [{"delta": {}}]})
    assert not is_completion({"choices": []})
    assert not is_completion({"error": {"message": "no"}})
    assert not is_completion([completion()])


def test_its_tool_calls_are_assembled_and_checked_like_streamed_ones():
    body = completion(call("call_a", "read", '{"path": "/a"}'), call("call_b", "read", '{"p'))
    result = assemble(completion_stream(body), fmt="sse")
    assert result.refusal.code == "INVALID_ARGUMENTS"  # the second call's arguments are cut
    ok = assemble(
        completion_stream(completion(call("call_a", "read", '{"path": "/a"}'))), fmt="sse"
    )
    assert ok.outcome == "ok" and [c.arguments for c in ok.calls] == [{"path": "/a"}]
    assert ok.usage == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert ok.to_dict()["calls"][0]["index"] == 0


def test_the_stream_keeps_every_key_and_numbers_calls_by_position():
    body = completion(call("a", "f", "{}"), {"index": 7, **call("b", "g", "{}")}, content="x")
    body["system_fingerprint"] = "fp_1"
    first, done = completion_stream(body).split(b"\n\n")[:2]
    assert done == b"data: [DONE]"
    chunk = orjson.loads(first.removeprefix(b"data: "))
    assert chunk["object"] == "chat.completion.chunk" and chunk["system_fingerprint"] == "fp_1"
    (choice,) = chunk["choices"]
    assert "message" not in choice and choice["finish_reason"] == "tool_calls"
    assert [c["index"] for c in choice["delta"]["tool_calls"]] == [0, 7]
    assert choice["delta"]["content"] == "x" and choice["delta"]["role"] == "assistant"


def test_a_plain_text_completion_is_ok_not_empty():
    body = completion(content="Hello", finish="stop")
    assert assemble(completion_stream(body), fmt="sse").outcome == "ok"


def test_a_whole_completion_body_is_its_one_frame_stream():
    # dialects.md section 1: the body itself, read as one frame, is done there.
    body = completion(call("call_a", "read", '{"path": "/a"}'), content="Hi")
    result = assemble(orjson.dumps(body) + b"\n", fmt="jsonl").to_dict()
    assert (result["outcome"], result["frames"], result["text"]) == ("ok", 1, "Hi")
    assert [(c["id"], c["arguments"]) for c in result["calls"]] == [("call_a", {"path": "/a"})]
    assert [a["kind"] for a in result["anomalies"]] == []
