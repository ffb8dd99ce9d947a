"""The SDK lenses on Responses, Messages and Gemini streams: the real
`openai`, `anthropic` and `google-genai` packages, called as their users call
them, each served the frames by a transport of ours.  The streams are written
here; what each test expects is the SDK's documented or observed behaviour at
the pinned version (`pyproject.toml`, extra `lenses`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inspector.lenses import LENSES, lenses_for, read_frames_and_result, run_all, run_lens
from inspector.lenses.compare import divergences

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")


def sse(*events: tuple[str | None, dict[str, Any]]) -> bytes:
    blocks = []
    for event, data in events:
        head = f"event: {event}\n" if event else ""
        blocks.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(blocks).encode()


def read(data: bytes, dialect: str):
    frames, strict = read_frames_and_result(data, "sse")
    assert strict.dialect == dialect
    return frames, strict


def calls(result) -> list[tuple[Any, ...]]:
    return [(call.id, call.name, call.arguments, call.kind) for call in result.calls]


# -- Anthropic Messages ------------------------------------------------------------------


def message_start() -> tuple[str, dict[str, Any]]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    return "message_start", {"type": "message_start", "message": message}


def block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "content_block_start", {
        "type": "content_block_start",
        "index": index,
        "content_block": block,
    }


def tool_use(index: int, id: str, name: str, kind: str = "tool_use"):
    return block_start(index, {"type": kind, "id": id, "name": name, "input": {}})


def input_delta(index: int, piece: str) -> tuple[str, dict[str, Any]]:
    return "content_block_delta", {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": piece},
    }


def block_stop(index: int) -> tuple[str, dict[str, Any]]:
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def message_end(reason: str = "tool_use") -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason},
                "usage": {"output_tokens": 9},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


MESSAGES_OK = sse(
    message_start(),
    tool_use(0, "srvtoolu_1", "web_search", kind="server_tool_use"),
    input_delta(0, '{"query": "Lisbon"}'),
    block_stop(0),
    tool_use(1, "toolu_A", "read"),
    input_delta(1, '{"path": '),
    input_delta(1, '"/a"}'),
    block_stop(1),
    *message_end(),
)


def test_anthropic_gives_the_final_messages_tool_use_blocks_and_server_calls():
    frames, strict = read(MESSAGES_OK, "messages")
    result = run_lens("anthropic", frames, dialect="messages")
    import anthropic

    assert result.available and result.version == anthropic.__version__
    assert result.error is None and result.calls_from == "final"
    assert calls(result) == [
        ("srvtoolu_1", "web_search", {"query": "Lisbon"}, "server"),
        ("toolu_A", "read", {"path": "/a"}, "function"),
    ]
    assert divergences(result, strict) == []


def test_anthropic_runs_input_cut_mid_object_because_it_parses_partial_json():
    data = sse(message_start(), tool_use(0, "toolu_A", "read"), input_delta(0, '{"path": "/a", "n'))
    frames, strict = read(data, "messages")
    assert strict.refusal is not None
    result = run_lens("anthropic", frames, dialect="messages")
    # The stream just ends: the SDK hands over the message as accumulated,
    # its input parsed in partial mode (the half key is dropped).
    assert result.error is None
    assert calls(result) == [("toolu_A", "read", {"path": "/a"}, "function")]
    [entry] = divergences(result, strict)
    assert entry["kind"] == "runs_despite_refusal"
    assert "the Anthropic SDK would run read" in entry["message"]


def test_anthropic_raises_on_a_delta_for_a_block_never_started():
    data = sse(message_start(), input_delta(0, '{"a": 1}'), *message_end())
    frames, _ = read(data, "messages")
    result = run_lens("anthropic", frames, dialect="messages")
    assert result.error.startswith("IndexError")
    assert result.calls_from == "snapshot"


def test_anthropic_passes_over_events_before_message_start_and_then_has_no_message():
    data = sse(tool_use(0, "toolu_A", "read"), block_stop(0), *message_end())
    frames, _ = read(data, "messages")
    result = run_lens("anthropic", frames, dialect="messages")
    # MessageStream yields them unaccumulated; get_final_message asserts a message.
    assert result.error == "AssertionError"
    assert result.calls == []


def test_anthropic_raises_the_error_event_as_an_api_error():
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    data = sse(message_start(), ("error", overloaded))
    frames, _ = read(data, "messages")
    result = run_lens("anthropic", frames, dialect="messages")
    assert "Overloaded" in result.error
    assert result.calls_from == "snapshot"


def test_anthropic_skips_events_without_a_name_so_a_data_only_stream_gives_nothing():
    data = b"".join(
        f"data: {json.dumps(payload)}\n\n".encode()
        for _, payload in (message_start(), tool_use(0, "toolu_A", "read"), block_stop(0))
    )
    frames, _ = read(data, "messages")
    result = run_lens("anthropic", frames, dialect="messages")
    # Every event is skipped, so there is no message at all to finish.
    assert result.error is not None
    assert result.calls == []


# -- OpenAI Responses --------------------------------------------------------------------


def response(status: str, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-x",
        "status": status,
        "output": output or [],
    }


def responses_stream(*middle: dict[str, Any], final: list[dict[str, Any]] | None) -> bytes:
    events = [{"type": "response.created", "response": response("in_progress")}, *middle]
    if final is not None:
        events.append({"type": "response.completed", "response": response("completed", final)})
    return sse(
        *((event["type"], {**event, "sequence_number": n}) for n, event in enumerate(events))
    )


def function_call(arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "read",
        "arguments": arguments,
        "status": status,
    }


def function_call_events(pieces: list[str], done_arguments: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": function_call("", "in_progress"),
        }
    ]
    for piece in pieces:
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": piece,
            }
        )
    events.append(
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": done_arguments,
        }
    )
    events.append(
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": function_call(done_arguments),
        }
    )
    return events


def test_openai_responses_gives_the_completed_responses_function_calls():
    data = responses_stream(
        *function_call_events(['{"path":', '"/a"}'], '{"path":"/a"}'),
        final=[function_call('{"path":"/a"}')],
    )
    frames, strict = read(data, "responses")
    result = run_lens("openai", frames, dialect="responses")
    assert result.error is None and result.calls_from == "final"
    assert calls(result) == [("call_1", "read", {"path": "/a"}, "function")]
    assert divergences(result, strict) == []


def test_openai_responses_hands_over_the_final_copy_where_it_disagrees_with_the_deltas():
    data = responses_stream(
        *function_call_events(['{"path":', '"/a"}'], '{"path":"/a"}'),
        final=[function_call('{"path":"/b"}')],
    )
    frames, strict = read(data, "responses")
    assert strict.refusal is not None
    result = run_lens("openai", frames, dialect="responses")
    assert calls(result) == [("call_1", "read", {"path": "/b"}, "function")]
    assert [entry["kind"] for entry in divergences(result, strict)] == ["runs_despite_refusal"]


def test_openai_responses_raises_without_response_completed_and_keeps_only_a_snapshot():
    data = responses_stream(*function_call_events(['{"path":"/a"}'], '{"path":"/a"}'), final=None)
    frames, strict = read(data, "responses")
    result = run_lens("openai", frames, dialect="responses")
    assert result.error == "RuntimeError: Didn't receive a `response.completed` event."
    assert result.calls_from == "snapshot"
    assert calls(result) == [("call_1", "read", {"path": "/a"}, "function")]
    assert result.delivered_calls == []


def test_openai_responses_leaves_server_items_out_and_that_is_no_divergence():
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    events = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**search, "status": "in_progress"},
        },
        {"type": "response.output_item.done", "output_index": 0, "item": search},
    ]
    data = responses_stream(*events, final=[search])
    frames, strict = read(data, "responses")
    assert [call["kind"] for call in strict.to_dict()["calls"]] in (["server"], ["builtin"])
    result = run_lens("openai", frames, dialect="responses")
    assert result.error is None and result.calls == []
    assert divergences(result, strict) == []


# -- Gemini ------------------------------------------------------------------------------


def gemini_chunk(*parts: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return None, {"candidates": [candidate], "modelVersion": "gemini-x"}


def test_google_genai_gives_each_chunks_function_calls():
    data = sse(
        gemini_chunk({"functionCall": {"id": "fc_a", "name": "read", "args": {"path": "/a"}}}),
        gemini_chunk({"functionCall": {"name": "stat", "args": {"path": "/b"}}}, finish="STOP"),
    )
    frames, strict = read(data, "gemini")
    result = run_lens("google-genai", frames, dialect="gemini")
    import google.genai

    assert result.version == google.genai.__version__
    assert result.error is None
    assert calls(result) == [
        ("fc_a", "read", {"path": "/a"}, "function"),
        (None, "stat", {"path": "/b"}, "function"),
    ]
    assert divergences(result, strict) == []


def test_google_genai_hands_partial_args_pieces_over_one_call_per_chunk():
    data = sse(
        gemini_chunk({"functionCall": {"name": "read", "willContinue": True}}),
        gemini_chunk(
            {
                "functionCall": {
                    "partialArgs": [
                        {"jsonPath": "$.path", "stringValue": "/a", "willContinue": True}
                    ],
                    "willContinue": True,
                }
            }
        ),
        gemini_chunk(
            {"functionCall": {"partialArgs": [{"jsonPath": "$.path", "stringValue": "/b"}]}}
        ),
        gemini_chunk(finish="STOP"),
    )
    frames, strict = read(data, "gemini")
    assert strict.refusal is None
    assert [call["arguments"] for call in strict.to_dict()["calls"]] == [{"path": "/a/b"}]
    result = run_lens("google-genai", frames, dialect="gemini")
    assert [call.name for call in result.calls] == ["read", None, None]
    assert all(call.arguments == {} for call in result.calls)
    assert any("partialArgs" in note for note in result.notes)
    assert "extra" in {entry["kind"] for entry in divergences(result, strict)}


def test_google_genai_raises_on_an_error_chunk():
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    data = sse(gemini_chunk({"text": "hi"}), (None, error))
    frames, _ = read(data, "gemini")
    result = run_lens("google-genai", frames, dialect="gemini")
    assert result.error is not None and "overloaded" in result.error


def test_google_genai_reads_a_json_array_served_as_sse_and_says_so():
    body = json.dumps(
        [gemini_chunk({"functionCall": {"name": "read", "args": {"path": "/a"}}}, finish="STOP")[1]]
    ).encode()
    frames, strict = read_frames_and_result(body, "json-array")
    result = run_lens("google-genai", frames, dialect=strict.dialect)
    assert calls(result) == [(None, "read", {"path": "/a"}, "function")]
    assert any("served to the SDK as SSE" in note for note in result.notes)


# -- which lenses read which dialect -----------------------------------------------------


def test_each_dialect_has_the_lenses_of_the_libraries_that_read_it():
    assert lenses_for("chat") == ["openai", "vercel", "litellm", "langchain"]
    assert lenses_for("responses") == ["openai", "vercel", "litellm", "langchain"]
    assert lenses_for("messages") == ["anthropic", "vercel", "litellm", "langchain"]
    assert lenses_for("gemini") == ["google-genai", "vercel", "langchain"]
    frames, _ = read(MESSAGES_OK, "messages")
    assert list(run_all(frames, dialect="messages")) == lenses_for("messages")


def test_a_lens_asked_about_a_dialect_it_does_not_read_says_so():
    frames, _ = read_frames_and_result(
        sse(gemini_chunk({"functionCall": {"name": "read", "args": {}}}, finish="STOP")), "sse"
    )
    result = run_lens("litellm", frames, dialect="gemini")
    assert not result.available
    assert result.notes == ["LiteLLM does not read gemini streams"]


@pytest.mark.parametrize("name", ["anthropic", "google-genai"])
def test_a_missing_sdk_makes_its_lens_unavailable_not_a_crash(monkeypatch, name):
    module = {"anthropic": "anthropic_sdk", "google-genai": "google_genai"}[name]
    import importlib

    lens_module = importlib.import_module(f"inspector.lenses.{module}")

    def missing():
        raise ImportError("No module named 'sdk'")

    monkeypatch.setattr(lens_module, "_load", missing)
    lens = LENSES[name]
    assert not lens.available()
    assert lens.current_version() == "not installed"
    result = lens.run([], dialect=lens.dialects[0])
    assert not result.available
    assert "not installed" in result.notes[0] and "[lenses]" in result.notes[0]
