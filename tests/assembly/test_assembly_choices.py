"""Section 2 of the assembly spec: per-choice state (text, reasoning, refusal text,
finish reasons, usage) and the shapes that are ignored, never refused."""

from __future__ import annotations

import pytest
from streams import (
    DONE,
    USAGE,
    calls,
    choice,
    chunk,
    code,
    events_of,
    finish,
    kinds,
    run_sse,
    text,
    tool,
    types,
)


def test_content_strings_append_to_the_choice_text():
    result = run_sse(text("Hel"), text("lo"), text(", world.", finish="stop"), DONE)
    assert result["text"] == "Hello, world."
    assert result["choices"][0]["text"] == "Hello, world."
    deltas = [e["delta"] for e in events_of(result, "text_delta")]
    assert deltas == ["Hel", "lo", ", world."]


def test_null_empty_and_non_string_content_add_nothing():
    result = run_sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"content": ""}),
        chunk({"content": 42}),
        chunk({"content": ["a"]}),
        text("ok", finish="stop"),
        DONE,
    )
    assert result["text"] == "ok"
    assert len(events_of(result, "text_delta")) == 1


def test_reasoning_content_appends_to_the_reasoning():
    result = run_sse(
        chunk({"reasoning_content": "think "}),
        chunk({"reasoning_content": "hard"}),
        text("42", finish="stop"),
        DONE,
    )
    assert result["reasoning"] == "think hard"
    assert [e["delta"] for e in events_of(result, "reasoning_delta")] == ["think ", "hard"]


def test_reasoning_is_the_fallback_when_reasoning_content_is_absent_or_empty():
    result = run_sse(
        chunk({"reasoning": "a"}),
        chunk({"reasoning_content": "", "reasoning": "b"}),
        chunk({"reasoning_content": None, "reasoning": "c"}),
        text("x", finish="stop"),
        DONE,
    )
    assert result["reasoning"] == "abc"


def test_reasoning_content_wins_over_reasoning_when_both_are_sent():
    result = run_sse(
        chunk({"reasoning_content": "kept", "reasoning": "dropped"}),
        text("x", finish="stop"),
        DONE,
    )
    assert result["reasoning"] == "kept"


def test_refusal_deltas_append_to_refusal_text_and_are_not_an_assembler_refusal():
    result = run_sse(
        chunk({"refusal": "I can't help "}),
        chunk({"refusal": "with that."}, finish="stop"),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["refusal"] is None
    assert result["choices"][0]["refusal_text"] == "I can't help with that."
    assert result["text"] == ""


def test_the_last_non_empty_finish_reason_wins_and_is_kept_verbatim():
    result = run_sse(
        text("a", finish="stop"),
        chunk({}, finish=None),
        chunk({}, finish=""),
        chunk({}, finish=7),
        chunk({}, finish="length"),
        DONE,
    )
    assert result["finish_reason"] == "length"
    assert [e["finish_reason"] for e in events_of(result, "finish")] == ["stop", "length"]


@pytest.mark.parametrize("reason", ["length", "content_filter", "end_turn", "STOP"])
def test_unusual_finish_reasons_are_not_normalised(reason):
    result = run_sse(text("a", finish=reason), DONE)
    assert result["finish_reason"] == reason
    assert result["outcome"] == "ok"


def test_finish_stop_with_calls_stays_stop_and_records_finish_mismatch():
    result = run_sse(calls(tool(0, "call_A", "read", "{}")), finish("stop"), DONE)
    assert result["outcome"] == "ok"
    assert result["finish_reason"] == "stop"
    assert result["anomalies"] == [{"frame": 2, "kind": "finish_mismatch", "choice": 0}]


def test_finish_tool_calls_without_calls_records_finish_mismatch():
    result = run_sse(text("no calls here"), finish("tool_calls"), DONE)
    assert result["outcome"] == "ok"
    assert kinds(result) == ["finish_mismatch"]


def test_matching_finish_reasons_record_no_mismatch():
    assert kinds(run_sse(calls(tool(0, "c", "f", "{}")), finish("tool_calls"), DONE)) == []
    assert kinds(run_sse(text("hi", finish="stop"), DONE)) == []


def test_finish_reason_error_is_kept_then_refused_upstream_error():
    result = run_sse(text("partial"), chunk({}, finish="error"), DONE)
    assert code(result) == "UPSTREAM_ERROR"
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["retryable"] is True
    assert result["finish_reason"] == "error"
    assert events_of(result, "finish") == [
        {"type": "finish", "frame": 1, "choice": 0, "finish_reason": "error"}
    ]


def test_usage_objects_are_kept_last_one_wins_each_giving_a_usage_event():
    early = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
    result = run_sse(
        chunk({"content": "Hi"}, usage=None),
        chunk({}, finish="stop", usage=early),
        chunk(choices=[], usage=USAGE),
        DONE,
    )
    assert result["usage"] == USAGE
    assert [e["usage"] for e in events_of(result, "usage")] == [early, USAGE]
    assert [e["frame"] for e in events_of(result, "usage")] == [1, 2]


def test_usage_that_is_not_an_object_is_ignored():
    result = run_sse(chunk({"content": "Hi"}, finish="stop", usage="many"), DONE)
    assert result["usage"] is None
    assert events_of(result, "usage") == []


# -- shapes that are ignored, never refused -------------------------------------------------


@pytest.mark.parametrize(
    "odd",
    [
        chunk(choices=[{"index": 0, "finish_reason": None}]),  # delta missing
        chunk({"tool_calls": None}),
        chunk({"tool_calls": "not a list"}),
        chunk({"tool_calls": []}),
        chunk({"role": "assistant", "annotations": [], "audio": None}),
        chunk(choices=[{"index": 0, "message": {"content": "full message"}}]),
        chunk(choices=["not a dict", 3, None]),
        chunk(choices=None),
        {"id": "chatcmpl-x", "object": "chat.completion.chunk"},  # no choices at all
        chunk("delta is a string"),
    ],
    ids=[
        "delta-missing",
        "tool-calls-null",
        "tool-calls-string",
        "tool-calls-empty",
        "other-keys",
        "message-instead-of-delta",
        "non-dict-choices",
        "choices-null",
        "no-choices",
        "delta-string",
    ],
)
def test_unexpected_shapes_are_ignored_not_refused(odd):
    result = run_sse(text("Hi"), odd, text("!", finish="stop"), DONE)
    assert result["outcome"] == "ok"
    assert result["text"] == "Hi!"
    assert result["calls"] == []
    assert result["anomalies"] == []
    assert result["dropped"] == []


def test_a_message_instead_of_a_delta_contributes_no_text():
    result = run_sse(
        chunk(choices=[{"index": 0, "message": {"content": "x"}, "finish_reason": "stop"}]), DONE
    )
    assert result["finish_reason"] == "stop"
    assert code(result) == "EMPTY_RESPONSE"


@pytest.mark.parametrize("entry", [None, 3, "call", ["index", 0], True])
def test_a_tool_call_entry_that_is_not_an_object_is_skipped_as_malformed_entry(entry):
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"a":1}'), entry),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["anomalies"] == [{"frame": 0, "kind": "malformed_entry", "choice": 0}]
    assert len(result["calls"]) == 1
    assert result["calls"][0]["arguments"] == {"a": 1}


# -- choice index ----------------------------------------------------------------------------


def test_each_choice_is_assembled_on_its_own():
    result = run_sse(
        chunk(choices=[choice({"content": "zero"}), choice({"content": "one"}, index=1)]),
        chunk(
            choices=[
                choice({"tool_calls": [tool(0, "call_1", "f", "{}")]}, index=1),
                choice({"content": "!"}, finish="stop"),
            ]
        ),
        chunk(choices=[choice({}, finish="tool_calls", index=1)]),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [c["index"] for c in result["choices"]] == [0, 1]
    assert [c["text"] for c in result["choices"]] == ["zero!", "one"]
    assert [c["finish_reason"] for c in result["choices"]] == ["stop", "tool_calls"]
    assert result["calls"][0]["choice"] == 1
    assert result["text"] == "zero!"
    assert result["finish_reason"] == "stop"


@pytest.mark.parametrize("index", [None, -1, True, 1.0, "1", [1]], ids=repr)
def test_a_choice_index_that_is_not_a_non_negative_integer_means_choice_zero(index):
    result = run_sse(
        chunk(choices=[choice({"content": "a"}, index=index)]),
        chunk(choices=[choice({"content": "b"}, index=0, finish="stop")]),
        DONE,
    )
    assert [c["index"] for c in result["choices"]] == [0]
    assert result["text"] == "ab"


def test_choices_are_listed_by_index_not_by_first_appearance():
    result = run_sse(
        chunk(choices=[choice({"content": "two"}, index=2, finish="stop")]),
        chunk(choices=[choice({"content": "zero"}, index=0, finish="stop")]),
        DONE,
    )
    assert [c["index"] for c in result["choices"]] == [0, 2]


def test_without_a_choice_zero_text_is_empty_and_finish_reason_null():
    result = run_sse(chunk(choices=[choice({"content": "x"}, index=3, finish="stop")]), DONE)
    assert result["outcome"] == "ok"
    assert result["finish_reason"] is None
    assert result["text"] == ""
    assert result["reasoning"] == ""
    assert result["choices"][0]["text"] == "x"


def test_text_and_tool_calls_in_the_same_delta_both_count():
    result = run_sse(
        chunk({"content": "Let me check.", "tool_calls": [tool(0, "call_A", "read", "{}")]}),
        finish(),
        DONE,
    )
    assert result["text"] == "Let me check."
    assert result["calls"][0]["arguments"] == {}
    assert types(result, frame=0)[:2] == ["text_delta", "identity"]
