"""Sections 5, 6 and 9 of the assembly spec: the end of the stream, the end checks,
the batch rule, and refusals."""

from __future__ import annotations

from pathlib import Path

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
    run,
    run_sse,
    sse,
    text,
    tool,
    types,
)

from inspector.assembly import REFUSAL_CODES, RETRYABLE

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CALL_EVENTS = {"identity", "identity_ignored", "toolcall_start", "toolcall_delta", "settled"}


# -- done, after done, missing done ----------------------------------------------------------


def test_the_stream_ends_at_the_done_frame_with_a_done_event():
    result = run_sse(text("Hi", finish="stop"), DONE)
    assert result["outcome"] == "ok"
    assert result["events"][-1] == {"type": "done", "frame": 1}


def test_frames_after_done_are_counted_but_ignored_usage_included():
    result = run_sse(
        text("Hi", finish="stop"),
        DONE,
        text(" more", finish="length"),
        chunk(choices=[], usage=USAGE),
        calls(tool(0, "call_late", "f", "{}")),
    )
    assert result["frames"] == 5
    assert result["text"] == "Hi"
    assert result["finish_reason"] == "stop"
    assert result["usage"] is None
    assert result["calls"] == []
    assert [e["frame"] for e in result["events"] if e["frame"] > 1] == [2]  # data_after_done
    assert kinds(result) == ["data_after_done"]


def test_the_first_frame_after_done_gives_one_data_after_done_anomaly():
    result = run_sse(text("Hi", finish="stop"), DONE, ": ping\n\n", text("x"), DONE)
    assert result["anomalies"] == [{"frame": 2, "kind": "data_after_done"}]
    assert result["outcome"] == "ok"


def test_a_finish_reason_without_done_is_complete_with_missing_done():
    result = run_sse(calls(tool(0, "call_A", "read", "{}")), finish("tool_calls"))
    assert result["outcome"] == "ok"
    assert result["anomalies"] == [{"frame": 1, "kind": "missing_done"}]
    assert [(e["frame"], e["call"]) for e in events_of(result, "toolcall_end")] == [(1, 0)]


def test_neither_done_nor_finish_reason_is_incomplete_stream_at_the_last_frame():
    result = run_sse(calls(tool(0, "call_A", "read", "{}")), ": ping\n\n")
    assert result["refusal"]["code"] == "INCOMPLETE_STREAM"
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["retryable"] is True
    assert result["refusal"]["call"] is None
    assert "missing_done" not in kinds(result)
    assert events_of(result, "toolcall_end") == []


@pytest.mark.parametrize("data", [b"", b"\n\n\n", b"event: ping\n\n", b"\xef\xbb\xbf"])
def test_an_empty_input_is_zero_frames_and_incomplete_stream_with_a_null_frame(data):
    result = run(data)
    assert result["frames"] == 0
    assert result["refusal"]["code"] == "INCOMPLETE_STREAM"
    assert result["refusal"]["frame"] is None
    assert result["choices"] == []
    assert result["events"][-1]["type"] == "refusal"


def test_an_empty_json_lines_input_is_also_incomplete():
    result = run(b"", fmt="jsonl")
    assert (result["frames"], code(result)) == (0, "INCOMPLETE_STREAM")


def test_a_last_block_cut_in_the_middle_of_its_json_is_incomplete_stream_at_that_frame():
    result = run((FIXTURES / "cut_mid_frame.sse").read_bytes())
    assert result["refusal"]["code"] == "INCOMPLETE_STREAM"
    assert result["refusal"]["frame"] == 2
    assert result["refusal"]["retryable"] is True
    # unterminated_frame is recorded just before the refusal.
    assert result["anomalies"] == [{"frame": 2, "kind": "unterminated_frame"}]
    assert result["text"] == "Hello"


def test_a_cut_frame_is_incomplete_even_when_a_finish_reason_was_seen():
    result = run(sse(text("Hi", finish="stop")) + b'data: {"choices":[{"delta"')
    assert code(result) == "INCOMPLETE_STREAM"
    assert result["refusal"]["frame"] == 1


@pytest.mark.parametrize("tail", ["data: [1,2]", 'data: "text"', "data: 42", "data: null"])
def test_an_unterminated_last_block_of_valid_json_that_is_not_an_object_is_invalid_frame(tail):
    result = run(sse(text("Hi", finish="stop")) + tail.encode())
    assert result["refusal"]["code"] == "INVALID_FRAME"
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["retryable"] is False
    assert kinds(result) == ["unterminated_frame"]


def test_an_unterminated_chunk_before_a_finish_gives_unterminated_then_missing_done():
    result = run(sse(text("Hi")) + b'data: {"choices":[{"index":0,"finish_reason":"stop"}]}')
    assert result["outcome"] == "ok"
    assert result["anomalies"] == [
        {"frame": 1, "kind": "unterminated_frame"},
        {"frame": 1, "kind": "missing_done"},
    ]


def test_an_error_frame_is_refused_upstream_error_at_its_frame():
    result = run_sse(
        text("Hi"),
        {"error": {"message": "Rate limit reached", "type": "rate_limit", "code": 429}},
        DONE,
    )
    assert result["refusal"]["code"] == "UPSTREAM_ERROR"
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["retryable"] is True
    assert "Rate limit reached" in result["refusal"]["message"]


def test_an_object_error_frame_is_refused_upstream_error():
    result = run_sse(text("Hi"), {"object": "error", "message": "boom"}, DONE)
    assert code(result) == "UPSTREAM_ERROR"


# -- end checks ------------------------------------------------------------------------------


def test_finish_mismatch_is_recorded_at_the_last_frame_after_missing_done():
    result = run_sse(calls(tool(0, "call_A", "read", "{}")), finish("stop"), ": ping\n\n")
    assert result["anomalies"] == [
        {"frame": 2, "kind": "missing_done"},
        {"frame": 2, "kind": "finish_mismatch", "choice": 0},
    ]


def test_finish_mismatch_is_per_choice_and_comes_before_the_call_checks():
    result = run_sse(
        chunk(
            choices=[
                choice({"tool_calls": [tool(0, "call_A", "read", "{}")]}, finish="stop"),
                choice({"content": "hi"}, index=1, finish="stop"),
                choice({}, index=2, finish="tool_calls"),
            ]
        ),
        DONE,
    )
    mismatches = [a for a in result["anomalies"] if a["kind"] == "finish_mismatch"]
    assert mismatches == [
        {"frame": 1, "kind": "finish_mismatch", "choice": 0},
        {"frame": 1, "kind": "finish_mismatch", "choice": 2},
    ]
    assert result["refusal"]["code"] == "EMPTY_RESPONSE"
    assert result["refusal"]["choice"] == 2


def test_a_call_without_a_name_fails_malformed_tool_call_at_the_last_frame():
    result = run_sse(calls(tool(0, id="call_A", args="{}")), finish(), DONE)
    assert result["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert result["refusal"]["frame"] == 2
    assert result["refusal"]["call"] == 0
    assert result["refusal"]["choice"] is None
    assert result["refusal"]["retryable"] is True


def test_end_checks_refuse_at_the_done_frame_even_with_frames_after_it():
    result = run_sse(calls(tool(0, id="call_A", args="{}")), finish(), DONE, text("late"))
    assert result["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert result["refusal"]["frame"] == 2
    assert result["frames"] == 4


def test_a_call_without_an_id_fails_malformed_tool_call():
    result = run_sse(calls(tool(0, name="read", args="{}")), finish())
    assert result["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert result["refusal"]["frame"] == 1
    assert kinds(result) == ["missing_done"]


def test_identity_is_checked_before_arguments_within_a_call():
    result = run_sse(calls(tool(0, name="read", args="[not json")), finish(), DONE)
    assert code(result) == "MALFORMED_TOOL_CALL"
    assert result["calls"][0]["invalid_at"] is None


def test_calls_are_checked_in_list_order_each_wholly_before_the_next():
    bad_args_first = run_sse(
        calls(tool(0, "call_A", "read", "[1]")),
        calls(tool(1, name="stat", args="{}")),
        finish(),
        DONE,
    )
    assert code(bad_args_first) == "INVALID_ARGUMENTS"
    assert bad_args_first["refusal"]["call"] == 0
    assert bad_args_first["refusal"]["frame"] == 0

    nameless_first = run_sse(
        calls(tool(0, "call_A", args="{}")),
        calls(tool(1, "call_B", "stat", "[1]")),
        finish(),
        DONE,
    )
    assert code(nameless_first) == "MALFORMED_TOOL_CALL"
    assert nameless_first["refusal"]["call"] == 0

    unstarted_first_seen = run_sse(
        calls(tool(0, args="{}")),
        calls(tool(1, "call_B", "stat", "[1]")),
        finish(),
        DONE,
    )
    # The id-less, nameless call never started, so it is listed (and checked)
    # after call_B.
    assert [c["id"] for c in unstarted_first_seen["calls"]] == ["call_B", None]
    assert code(unstarted_first_seen) == "INVALID_ARGUMENTS"
    assert unstarted_first_seen["refusal"]["call"] == 0


def test_invalid_arguments_refusal_frame_is_the_invalid_at_frame_not_the_last_frame():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"a":')),
        calls(tool(0, args="]")),
        text("filler"),
        finish(),
        DONE,
    )
    assert result["refusal"]["frame"] == 1
    assert result["calls"][0]["invalid_at"]["frame"] == 1


def test_a_choice_with_no_text_no_refusal_text_and_no_calls_is_empty_response():
    result = run_sse(finish("stop"), DONE)
    assert result["refusal"]["code"] == "EMPTY_RESPONSE"
    assert result["refusal"]["choice"] == 0
    assert result["refusal"]["call"] is None
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["retryable"] is True


def test_reasoning_alone_is_an_empty_response():
    result = run_sse(chunk({"reasoning_content": "hmm"}, finish="stop"), DONE)
    assert code(result) == "EMPTY_RESPONSE"


def test_refusal_text_alone_is_not_an_empty_response():
    result = run_sse(chunk({"refusal": "No."}, finish="stop"), DONE)
    assert result["outcome"] == "ok"


def test_a_stream_with_no_choice_at_all_is_an_empty_response_for_choice_zero():
    result = run_sse(chunk(choices=[], usage=USAGE), DONE)
    assert result["refusal"]["code"] == "EMPTY_RESPONSE"
    assert result["refusal"]["choice"] == 0


def test_every_choice_seen_is_checked_for_emptiness():
    result = run_sse(
        chunk(choices=[choice({"content": "hi"}, finish="stop"), choice({}, index=1)]),
        DONE,
    )
    assert result["refusal"]["code"] == "EMPTY_RESPONSE"
    assert result["refusal"]["choice"] == 1


def test_empty_response_comes_after_the_call_checks():
    result = run_sse(
        chunk(choices=[choice({}, index=1)]),
        calls(tool(0, "call_A", args="{}")),
        finish(),
        DONE,
    )
    assert code(result) == "MALFORMED_TOOL_CALL"


# -- batch rule ------------------------------------------------------------------------------


def test_every_call_gets_a_toolcall_end_in_order_when_all_pass():
    result = run_sse(
        calls(tool(0, "call_1", "a", "{}"), tool(1, "call_2", "b", '{"x":1}')),
        finish(),
        DONE,
    )
    ends = events_of(result, "toolcall_end")
    assert [(e["frame"], e["call"]) for e in ends] == [(2, 0), (2, 1)]
    assert types(result)[-3:] == ["done", "toolcall_end", "toolcall_end"]


def test_when_one_call_fails_no_call_gets_a_toolcall_end_and_the_good_call_keeps_its_arguments():
    result = run_sse(
        calls(tool(0, "call_good", "read", '{"path":"/ok"}')),
        calls(tool(1, "call_bad", "read", '{"path":')),
        calls(tool(1, args='"/bad"}}')),
        finish(),
        DONE,
    )
    assert result["refusal"]["code"] == "INVALID_ARGUMENTS"
    assert result["refusal"]["call"] == 1
    assert result["refusal"]["frame"] == 2
    good, bad = result["calls"]
    assert good["arguments"] == {"path": "/ok"}
    assert good["invalid_at"] is None
    assert bad["arguments"] is None
    assert bad["invalid_at"]["offset"] == 15
    assert events_of(result, "toolcall_end") == []


def test_only_the_call_whose_check_failed_gets_an_invalid_at():
    result = run_sse(
        calls(tool(0, "call_1", "read", "[1]")),
        calls(tool(1, "call_2", "read", "x")),
        finish(),
        DONE,
    )
    assert result["refusal"]["call"] == 0
    assert result["calls"][0]["invalid_at"]["frame"] == 0
    assert result["calls"][1]["invalid_at"] is None


def test_a_call_after_the_failing_one_is_left_unchecked():
    result = run_sse(
        calls(tool(0, "call_bad", "read", "[]")),
        calls(tool(1, "call_next", "read", '{"a":1}')),
        finish(),
        DONE,
    )
    assert code(result) == "INVALID_ARGUMENTS"
    assert result["calls"][1]["arguments"] is None


# -- refusals --------------------------------------------------------------------------------


def ambiguous_prefix():
    return [
        calls(tool(id="call_a", name="read", args='{"p":')),
        calls(tool(id="call_b", name="read", args='{"p":')),
        calls(tool(args="1}")),
    ]


def test_the_refusal_event_is_last_and_every_usage_event_comes_before_it():
    result = run_sse(
        *ambiguous_prefix(),
        chunk({"content": "late text"}, finish="tool_calls", usage={"total_tokens": 5}),
        chunk(choices=[], usage=USAGE),
        DONE,
        chunk(choices=[], usage={"total_tokens": 999}),
    )
    assert result["refusal"]["frame"] == 2
    assert result["events"][-1]["type"] == "refusal"
    assert result["events"][-1]["refusal"] == result["refusal"]
    usage_frames = [e["frame"] for e in events_of(result, "usage")]
    assert usage_frames == [3, 4]
    assert result["usage"] == USAGE


def test_no_call_event_text_or_finish_follows_a_refusal():
    result = run_sse(
        *ambiguous_prefix(),
        calls(tool(0, "call_c", "write", "{}")),
        chunk({"content": "late text"}, finish="tool_calls"),
        DONE,
    )
    after = [e for e in result["events"] if e["frame"] >= 2 and e["type"] != "refusal"]
    assert after == []
    assert result["text"] == ""
    assert result["finish_reason"] is None
    assert len(result["calls"]) == 2
    assert events_of(result, "toolcall_end") == []


def test_the_refusing_frames_own_usage_counts():
    result = run_sse(
        text("Hi"),
        {"error": {"message": "overloaded"}, "usage": USAGE},
        DONE,
    )
    assert code(result) == "UPSTREAM_ERROR"
    assert result["usage"] == USAGE
    assert types(result)[-2:] == ["usage", "refusal"]


def test_a_chunk_that_refuses_still_counts_its_own_usage():
    *prefix, ambiguous = ambiguous_prefix()
    result = run_sse(*prefix, {**ambiguous, "usage": USAGE}, DONE)
    assert code(result) == "AMBIGUOUS_CONTINUATION"
    assert result["usage"] == USAGE
    assert [e["frame"] for e in events_of(result, "usage")] == [2]


def test_finish_error_with_usage_in_the_same_chunk_counts_the_usage():
    result = run_sse(text("Hi"), chunk({}, finish="error", usage=USAGE), DONE)
    assert code(result) == "UPSTREAM_ERROR"
    assert result["usage"] == USAGE


def test_the_first_refusal_wins():
    result = run_sse(
        {"error": {"message": "first"}},
        {"error": {"message": "second"}},
        "data: not json\n\n",
    )
    assert result["refusal"]["frame"] == 0
    assert "first" in result["refusal"]["message"]
    assert len(events_of(result, "refusal")) == 1


def test_no_end_of_stream_anomaly_is_recorded_after_a_refusal():
    result = run(sse(*ambiguous_prefix(), finish()) + b": unterminated keep-alive")
    assert code(result) == "AMBIGUOUS_CONTINUATION"
    assert kinds(result) == []


def test_a_refusal_stops_later_frames_before_done_from_adding_anomalies():
    result = run_sse(
        *ambiguous_prefix(),
        calls(tool(0, "call_c", "f", {"not": "a string"})),
        DONE,
    )
    assert kinds(result) == []


def test_a_done_frame_after_a_refusal_ends_the_stream_without_a_done_event():
    # docs/assembly-decisions.md, 2 and 3: no done event and no data_after_done
    # once refused.
    result = run_sse(*ambiguous_prefix(), DONE, chunk(choices=[], usage=USAGE))
    assert result["frames"] == 5
    assert events_of(result, "done") == []
    assert kinds(result) == []
    assert result["usage"] is None


# -- the retryable table ---------------------------------------------------------------------


RETRYABLE_TABLE = {
    "MALFORMED_TOOL_CALL": True,
    "EMPTY_RESPONSE": True,
    "INCOMPLETE_STREAM": True,
    "UPSTREAM_ERROR": True,
    "AMBIGUOUS_CONTINUATION": False,
    "IDENTITY_CONFLICT": False,
    "INVALID_ARGUMENTS": False,
    "INVALID_FRAME": False,
    # dialects.md section 6
    "INCONSISTENT_CALL": True,
    "SPLICED_STREAM": True,
}

STREAMS_BY_CODE = {
    "MALFORMED_TOOL_CALL": sse(calls(tool(0, name="f", args="{}")), finish(), DONE),
    "EMPTY_RESPONSE": sse(finish("stop"), DONE),
    "INCOMPLETE_STREAM": sse(text("Hi")),
    "UPSTREAM_ERROR": sse({"error": {"message": "boom"}}, DONE),
    "AMBIGUOUS_CONTINUATION": sse(*ambiguous_prefix(), finish(), DONE),
    "IDENTITY_CONFLICT": sse(
        calls(tool(0, "c", "f", "{")), calls(tool(0, name="g")), finish(), DONE
    ),
    "INVALID_ARGUMENTS": sse(calls(tool(0, "c", "f", "[]")), finish(), DONE),
    "INVALID_FRAME": sse("data: nope\n\n", finish(), DONE),
    # Anthropic Messages: a block's input after its stop; a second message inside the first.
    "INCONSISTENT_CALL": sse(
        {"type": "message_start", "message": {"id": "msg_1", "content": []}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta"}},
        {"type": "message_stop"},
    ),
    "SPLICED_STREAM": sse(
        {"type": "message_start", "message": {"id": "msg_1", "content": []}},
        {"type": "message_start", "message": {"id": "msg_2", "content": []}},
        {"type": "message_stop"},
    ),
}


def test_the_refusal_codes_are_exactly_the_spec_table():
    assert set(REFUSAL_CODES) == set(RETRYABLE_TABLE)
    assert RETRYABLE == RETRYABLE_TABLE


@pytest.mark.parametrize("refusal_code", sorted(STREAMS_BY_CODE))
def test_each_refusal_carries_its_default_retryable_flag(refusal_code):
    result = run(STREAMS_BY_CODE[refusal_code])
    assert result["outcome"] == "refused"
    assert result["refusal"]["code"] == refusal_code
    assert result["refusal"]["retryable"] is RETRYABLE_TABLE[refusal_code]
    if refusal_code != "EMPTY_RESPONSE":
        assert result["refusal"]["choice"] is None
    assert result["events"][-1]["type"] == "refusal"


def test_no_call_event_follows_an_identity_conflict():
    result = run_sse(
        calls(tool(0, "c", "f", "{")),
        calls(tool(0, name="g", args="}"), tool(1, "d", "h", "{}")),
        finish(),
        DONE,
    )
    assert code(result) == "IDENTITY_CONFLICT"
    late = [e for e in result["events"] if e["type"] in CALL_EVENTS and e["frame"] > 0]
    assert late == []
    assert len(result["calls"]) == 1
