"""The Vercel AI SDK lens on Responses, Messages and Gemini streams (the
`@ai-sdk/openai`, `@ai-sdk/anthropic` and `@ai-sdk/google` providers under
`streamText`), and how the lens runs Node.  The streams are written here;
each test pins what the pinned version does with them."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from inspector.lenses import LENSES, read_frames_and_result, run_lens
from inspector.lenses import node_runtime as runtime
from inspector.lenses.compare import divergences

needs_node = pytest.mark.skipif(
    not LENSES["vercel"].available(), reason="Node.js or the lens's npm packages are missing"
)
GENERATED = re.compile(r"[A-Za-z0-9]{16}")


def sse(*events: dict[str, Any], named: bool = True) -> bytes:
    """Each event as one SSE block, named after its `type` when `named`."""
    blocks = []
    for event in events:
        head = f"event: {event['type']}\n" if named and "type" in event else ""
        blocks.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(blocks).encode()


def vercel(data: bytes, dialect: str):
    frames, strict = read_frames_and_result(data, "sse")
    assert strict.dialect == dialect
    return run_lens("vercel", frames, dialect=dialect), strict


def triples(result) -> list[tuple[Any, Any, Any]]:
    return [(call.id, call.name, call.arguments) for call in result.calls]


# -- Messages (@ai-sdk/anthropic) ---------------------------------------------------------


def start() -> dict[str, Any]:
    message = {"id": "msg_v", "type": "message", "role": "assistant", "model": "claude-v"}
    message |= {"content": [], "stop_reason": None, "usage": {"input_tokens": 3}}
    return {"type": "message_start", "message": message}


def block(index: int, id: str, name: str, kind: str = "tool_use") -> dict[str, Any]:
    content = {"type": kind, "id": id, "name": name, "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": content}


def piece(index: int, text: str) -> dict[str, Any]:
    delta = {"type": "input_json_delta", "partial_json": text}
    return {"type": "content_block_delta", "index": index, "delta": delta}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


END = (
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 4}},
    {"type": "message_stop"},
)


@needs_node
def test_messages_tool_use_blocks_are_calls_and_server_calls_are_left_out():
    data = sse(
        start(),
        block(0, "srvtoolu_v", "web_search", kind="server_tool_use"),
        piece(0, '{"query": "tides"}'),
        stop(0),
        block(1, "toolu_v", "open"),
        piece(1, '{"file": '),
        piece(1, '"/v"}'),
        stop(1),
        *END,
    )
    result, strict = vercel(data, "messages")
    assert result.error is None
    assert triples(result) == [("toolu_v", "open", {"file": "/v"})]
    assert result.calls[0].arguments_text == '{"file": "/v"}'
    assert any("web_search" in note and "left out" in note for note in result.notes)
    assert "finish reason: tool-calls (raw: tool_use)" in result.notes
    assert divergences(result, strict) == []


@needs_node
def test_messages_input_cut_mid_object_is_an_invalid_call_that_would_not_run():
    # The Anthropic SDK parses partial JSON and would run {"file": "/v"}; the
    # Vercel provider hands the text on and streamText's JSON.parse fails.
    data = sse(start(), block(0, "toolu_v", "open"), piece(0, '{"file": "/v'), stop(0), *END)
    result, _ = vercel(data, "messages")
    [call] = result.calls
    assert call.arguments_text == '{"file": "/v' and not call.parsed
    assert call.parse_error.startswith("AI_InvalidToolInputError")


@needs_node
def test_messages_an_error_event_is_an_error_part_after_the_calls_before_it():
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}
    data = sse(start(), block(0, "toolu_v", "open"), piece(0, "{}"), stop(0), overloaded)
    result, _ = vercel(data, "messages")
    assert result.error == "error part: Busy (AI_StreamProviderError)"
    assert triples(result) == [("toolu_v", "open", {})] and result.calls_from == "final"


@needs_node
def test_messages_needs_neither_message_start_nor_message_stop():
    # The Anthropic SDK fails without message_start; this provider reads the
    # blocks anyway and, with no stop, ends the step as "interrupted".
    data = sse(block(0, "toolu_v", "open"), piece(0, '{"file": "/w"}'), stop(0))
    result, _ = vercel(data, "messages")
    assert result.error is None
    assert triples(result) == [("toolu_v", "open", {"file": "/w"})]
    assert "finish reason: interrupted (raw: None)" in result.notes


# -- Responses (@ai-sdk/openai, responses model) -----------------------------------------


def item(arguments: str, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_v",
        "call_id": "call_v",
        "name": "lookup",
        "arguments": arguments,
        "status": status,
    }


def responses(*middle: dict[str, Any], completed: list[dict[str, Any]] | None) -> bytes:
    def response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": "resp_v", "object": "response", "created_at": 2, "model": "gpt-v"} | {
            "status": status,
            "output": output,
        }

    events = [{"type": "response.created", "response": response("in_progress", [])}, *middle]
    if completed is not None:
        events.append({"type": "response.completed", "response": response("completed", completed)})
    return sse(*({**event, "sequence_number": n} for n, event in enumerate(events)))


def call_events(deltas: list[str], done: str) -> list[dict[str, Any]]:
    at = {"item_id": "fc_v", "output_index": 0}
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": item("", "in_progress")},
        *({"type": "response.function_call_arguments.delta", **at, "delta": d} for d in deltas),
        {"type": "response.function_call_arguments.done", **at, "arguments": done},
        {"type": "response.output_item.done", "output_index": 0, "item": item(done, "completed")},
    ]


@needs_node
def test_responses_a_function_call_item_is_a_call_with_its_call_id():
    done = '{"key":"v"}'
    data = responses(*call_events(['{"key":', '"v"}'], done), completed=[item(done, "completed")])
    result, strict = vercel(data, "responses")
    assert result.error is None
    assert triples(result) == [("call_v", "lookup", {"key": "v"})]
    assert divergences(result, strict) == []


@needs_node
def test_responses_the_call_is_the_done_item_and_the_completed_copy_is_not_read():
    # The OpenAI SDK hands over response.completed's copy ("w"); this provider
    # finished the call at output_item.done ("v").
    done = '{"key":"v"}'
    data = responses(*call_events([done], done), completed=[item('{"key":"w"}', "completed")])
    result, _ = vercel(data, "responses")
    assert triples(result) == [("call_v", "lookup", {"key": "v"})]


@needs_node
def test_responses_without_response_completed_the_call_still_arrives():
    # The OpenAI SDK raises without response.completed; here the step just
    # ends "interrupted" and the agent has the call.
    done = '{"key":"v"}'
    data = responses(*call_events([done], done), completed=None)
    result, strict = vercel(data, "responses")
    assert result.error is None
    assert triples(result) == [("call_v", "lookup", {"key": "v"})]
    assert "finish reason: interrupted (raw: None)" in result.notes
    assert strict.refusal is not None
    assert [entry["kind"] for entry in divergences(result, strict)] == ["runs_despite_refusal"]


# -- Gemini (@ai-sdk/google) -------------------------------------------------------------


def gemini(*parts: dict[str, Any], finish: str | None = "STOP") -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-v"}


@needs_node
def test_gemini_function_calls_keep_their_id_or_get_a_generated_one():
    data = sse(
        gemini({"functionCall": {"id": "fc_1", "name": "probe", "args": {"n": 1}}}, finish=None),
        gemini({"functionCall": {"name": "probe", "args": {"n": 2}}}),
        named=False,
    )
    result, strict = vercel(data, "gemini")
    assert result.error is None
    [first, second] = result.calls
    assert (first.id, first.name, first.arguments) == ("fc_1", "probe", {"n": 1})
    assert first.arguments_text == '{"n":1}'
    assert GENERATED.fullmatch(second.id) and second.arguments == {"n": 2}
    assert any(f"id {second.id} was generated" in note for note in result.notes)
    assert [entry["kind"] for entry in divergences(result, strict)] == ["id"]


@needs_node
def test_gemini_an_error_chunk_is_an_error_part():
    error = {"error": {"code": 503, "message": "Try later.", "status": "UNAVAILABLE"}}
    data = sse(gemini({"text": "hm"}, finish=None), error, named=False)
    result, _ = vercel(data, "gemini")
    assert result.error == "error part: Try later. (AI_StreamProviderError)"
    assert result.calls == []


@needs_node
def test_gemini_without_a_finish_reason_the_call_still_arrives():
    data = sse(gemini({"functionCall": {"id": "fc_2", "name": "probe", "args": {}}}, finish=None))
    result, _ = vercel(data, "gemini")
    assert result.error is None and triples(result) == [("fc_2", "probe", {})]
    assert "finish reason: interrupted (raw: None)" in result.notes


# -- running Node ------------------------------------------------------------------------


def test_without_node_the_lens_is_unavailable_and_says_how_to_install(monkeypatch):
    monkeypatch.setattr(runtime, "node_path", lambda: None)
    lens = LENSES["vercel"]
    assert not lens.available()
    result = lens.run([], dialect="chat")
    assert not result.available and result.version == "not installed"
    assert "Node.js is not installed" in result.notes[0]
    assert (
        "`make`" in result.notes[0] and "npm ci --prefix inspector/lenses/node" in result.notes[0]
    )


def test_without_its_npm_packages_the_lens_is_unavailable(monkeypatch, tmp_path):
    monkeypatch.setattr(runtime, "node_path", lambda: "/usr/bin/node")
    monkeypatch.setattr(runtime, "LENS_DIR", tmp_path)
    lens = LENSES["vercel"]
    assert not lens.available() and lens.current_version() == "not installed"
    result = lens.run([], dialect="gemini")
    assert "packages are not installed" in result.notes[0]


def finished(code: int, stdout: bytes = b"", stderr: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["node"], code, stdout, stderr)


def test_a_node_that_ran_out_of_heap_is_a_memory_error_and_other_failures_say_why():
    oom = b"FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n"
    with pytest.raises(MemoryError, match="heap limit"):
        runtime._answer(finished(134, stderr=oom))
    with pytest.raises(RuntimeError, match=r"exit 1\): SyntaxError: bad"):
        runtime._answer(finished(1, stderr=b"at x\nSyntaxError: bad\n\n"))
    with pytest.raises(RuntimeError, match="not a JSON object"):
        runtime._answer(finished(0, stdout=b"[1]"))
    assert runtime._answer(finished(0, stdout=b'{"calls": []}')) == {"calls": []}


@needs_node
def test_a_script_past_its_time_is_stopped(tmp_path):
    script = tmp_path / "slow.mjs"
    script.write_text("setTimeout(() => {}, 60000);\n")
    with pytest.raises(subprocess.TimeoutExpired):
        runtime.run_script(script, b"{}", seconds=0.5)


@needs_node
def test_node_runs_with_a_heap_cap_and_only_the_lean_flags_it_knows():
    node = runtime.node_path()
    command = runtime.command(node, runtime.LENS_DIR / "lens.mjs")
    assert command[1] == f"--max-old-space-size={runtime.HEAP_MB}"
    assert set(runtime.lean_flags(node)) <= set(runtime.LEAN_FLAGS)


@needs_node
def test_the_lens_runs_inside_the_runners_address_space_limit():
    # node reserves far more than it uses; the runner's child caps the address
    # space, node inherits the cap, and still has to fit (default 1024 MB).
    from lens_streams import OK

    from inspector.lenses.runner import bounded_run

    answer = bounded_run("vercel", OK, "sse", seconds=60, memory_mb=768)
    assert answer["status"] == "done", answer
    assert [call["id"] for call in answer["result"]["calls"]] == ["call_A"]
