"""Sections 7 and 8 of the assembly spec: the result contract and the policies."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest
from streams import (
    CALL_EVENT_TYPES,
    DONE,
    EVENT_TYPES,
    USAGE,
    calls,
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
)

from inspector.assembly import (
    ANOMALY_KINDS,
    DROP_REASONS,
    Assembler,
    StreamAssembler,
    assemble,
)
from inspector.assembly.result import Call

FIXTURES = Path(__file__).resolve().parent / "fixtures"

TOP_KEYS = {
    "policy",
    "outcome",
    "refusal",
    "frames",
    "finish_reason",
    "usage",
    "text",
    "reasoning",
    "choices",
    "calls",
    "dropped",
    "anomalies",
    "events",
}
CHOICE_KEYS = {"index", "text", "reasoning", "refusal_text", "finish_reason"}
CALL_KEYS = {
    "choice",
    "id",
    "name",
    "index",
    "arguments",
    "arguments_text",
    "started_frame",
    "settled_frame",
    "invalid_at",
    "frames",
}
REFUSAL_KEYS = {"code", "message", "frame", "call", "choice", "retryable"}
SPEC_ANOMALY_KINDS = {
    "unterminated_frame",
    "malformed_entry",
    "arguments_not_string",
    "index_reused",
    "index_changed",
    "guessed_continuation",
    "missing_done",
    "data_after_done",
    "finish_mismatch",
    # assembly.md section 10
    "no_finish_reason",
    "unknown_finish_reason",
    # dialects.md section 6
    "event_type_mismatch",
    "event_name_missing",
    "foreign_frame",
    "item_id_changed",
    "call_id_changed",
    "sequence_gap",
    "sequence_disorder",
    "resumed_stream",
    "item_not_done",
    "arguments_only_in_done",
    "block_not_stopped",
    "arguments_only_in_start",
    "start_input_discarded",
    "repeated_start",
}


def weather() -> dict:
    return run((FIXTURES / "weather_call.sse").read_bytes())


# -- the contract ----------------------------------------------------------------------------


def test_the_result_document_has_every_contract_key():
    result = weather()
    assert TOP_KEYS <= set(result)
    assert all(CHOICE_KEYS <= set(c) for c in result["choices"])
    assert all(CALL_KEYS <= set(c) for c in result["calls"])


def test_a_whole_realistic_stream_gives_the_documented_result():
    result = weather()
    assert result["policy"] == "strict"
    assert result["outcome"] == "ok"
    assert result["refusal"] is None
    assert result["frames"] == 9
    assert result["finish_reason"] == "tool_calls"
    assert result["usage"] == {"prompt_tokens": 31, "completion_tokens": 17, "total_tokens": 48}
    assert result["text"] == ""
    assert result["reasoning"] == ""
    assert result["choices"] == [
        {
            "index": 0,
            "text": "",
            "reasoning": "",
            "refusal_text": "",
            "finish_reason": "tool_calls",
            "finish_detail": None,
        }
    ]
    assert result["calls"] == [
        {
            "choice": 0,
            "id": "call_w1",
            "name": "get_weather",
            "index": 0,
            "kind": "function",
            "item_id": None,
            "block": None,
            "arguments": {"city": "Zürich", "unit": "celsius"},
            "arguments_text": '{"city": "Zürich", "unit": "celsius"}',
            "started_frame": 1,
            "settled_frame": 5,
            "invalid_at": None,
            "frames": [1, 3, 4, 5],
        }
    ]
    assert result["dropped"] == []
    assert result["anomalies"] == []
    assert [e["type"] for e in result["events"]] == [
        "identity",
        "identity",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "settled",
        "finish",
        "usage",
        "done",
        "toolcall_end",
    ]


def test_the_result_document_is_plain_json():
    result = weather()
    assert orjson.loads(orjson.dumps(result)) == result


def test_a_refusal_has_every_contract_key():
    result = run_sse(calls(tool(0, "c", "f", "[]")), finish(), DONE)
    assert set(result["refusal"]) >= REFUSAL_KEYS
    assert set(result["calls"][0]["invalid_at"]) == {"frame", "offset", "message"}
    assert isinstance(result["refusal"]["message"], str) and result["refusal"]["message"]


def test_every_event_has_a_known_type_and_a_frame_and_call_events_a_call():
    result = run_sse(
        chunk({"reasoning_content": "plan", "content": "ok"}),
        calls(tool(0, "c", "f", ""), tool(1, args="")),
        calls(tool(0, id=None, args="{}"), 5),
        calls(tool(args="x")),
        finish(usage=USAGE),
        DONE,
        text("after"),
    )
    for event in result["events"]:
        assert event["type"] in EVENT_TYPES
        assert "frame" in event
        if event["type"] in CALL_EVENT_TYPES:
            assert isinstance(event["call"], int)
    # every type but `refusal` (this stream is accepted) is given
    assert {e["type"] for e in result["events"]} >= EVENT_TYPES - {"refusal"}


def test_anomaly_kinds_are_exactly_the_spec_list():
    assert set(ANOMALY_KINDS) == SPEC_ANOMALY_KINDS
    assert set(DROP_REASONS) == {"empty_delta", "orphan_continuation"}


def test_anomaly_events_mirror_the_anomalies_list():
    result = run_sse(
        calls(tool(0, "a", "f", {"x": 1}), None),
        calls(tool(0, "b", "f", "{}")),
        finish("stop"),
    )
    assert [e["anomaly"] for e in events_of(result, "anomaly")] == result["anomalies"]
    assert kinds(result) == [
        "arguments_not_string",
        "malformed_entry",
        "index_reused",
        "missing_done",
        "finish_mismatch",
    ]
    assert {a["kind"] for a in result["anomalies"]} <= SPEC_ANOMALY_KINDS


def test_the_top_level_text_reasoning_and_finish_reason_are_choice_zeros():
    result = run_sse(
        chunk(
            choices=[
                {"index": 1, "delta": {"content": "one", "reasoning": "r1"}, "finish_reason": "x"},
                {"index": 0, "delta": {"content": "zero", "reasoning": "r0"}, "finish_reason": "y"},
            ]
        ),
        DONE,
    )
    assert (result["text"], result["reasoning"], result["finish_reason"]) == ("zero", "r0", "y")


def test_arguments_are_null_unless_the_call_passed_its_check():
    refused = run_sse(calls(tool(0, "c", "f", '{"a":1}')), calls(tool(1, "d", "f", "[]")))
    assert code(refused) == "INCOMPLETE_STREAM"
    assert [c["arguments"] for c in refused["calls"]] == [None, None]


def test_frames_lists_every_frame_where_a_delta_resolved_to_the_call_once():
    result = run_sse(
        calls(tool(0, "c", "f", "")),
        text("between"),
        calls(tool(0, args="{"), tool(0, args="")),
        calls(tool(0, args="}")),
        finish(),
        DONE,
    )
    assert result["calls"][0]["frames"] == [0, 2, 3]


# -- call order and numbering ----------------------------------------------------------------


def test_started_calls_come_in_start_order_then_never_started_calls_in_first_seen_order():
    result = run_sse(
        calls(tool(0, id=None, args='{"x":1}')),  # X: seen first, never starts
        calls(tool(1, args='{"y":1}')),  # Y: seen second, starts at frame 3
        calls(tool(2, "call_B", "list", "{}")),  # B: seen third, starts at frame 2
        calls(tool(1, name="read")),
        calls(tool(3, args={"z": 1})),  # Z: seen fourth, never starts
        finish(),
        DONE,
    )
    assert [(c["id"], c["name"], c["index"]) for c in result["calls"]] == [
        ("call_B", "list", 2),
        (None, "read", 1),
        (None, None, 0),
        (None, None, 3),
    ]
    assert [c["started_frame"] for c in result["calls"]] == [2, 3, None, None]
    # Events and anomalies name calls by their final position.
    assert events_of(result, "identity_ignored")[0]["call"] == 2
    assert result["anomalies"] == [{"frame": 4, "kind": "arguments_not_string", "call": 3}]
    starts = [(e["frame"], e["call"]) for e in events_of(result, "toolcall_start")]
    assert starts == [(2, 0), (3, 1)]
    # The first call in list order without an id is Y (position 1).
    assert result["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert result["refusal"]["call"] == 1


def test_a_call_seen_first_but_started_later_is_listed_after_the_earlier_start():
    result = run_sse(
        calls(tool(0, args='{"a":')),
        calls(tool(1, "call_B", "b", "{}")),
        calls(tool(0, "call_A", "a", "1}")),
        finish(),
        DONE,
    )
    assert [c["id"] for c in result["calls"]] == ["call_B", "call_A"]
    ends = [e["call"] for e in events_of(result, "toolcall_end")]
    assert ends == [0, 1]
    settled = [(e["frame"], e["call"]) for e in events_of(result, "settled")]
    assert settled == [(1, 0), (2, 1)]


def test_calls_of_every_choice_share_one_list():
    result = run_sse(
        chunk({"tool_calls": [tool(0, "c1", "f", "{}")]}, index=1),
        chunk({"tool_calls": [tool(0, "c0", "g", "{}")]}, index=0),
        chunk({}, index=0, finish="tool_calls"),
        chunk({}, index=1, finish="tool_calls"),
        DONE,
    )
    assert [(c["choice"], c["id"]) for c in result["calls"]] == [(1, "c1"), (0, "c0")]
    assert result["outcome"] == "ok"


def test_ids_are_per_choice():
    result = run_sse(
        chunk({"tool_calls": [tool(0, "same", "f", '{"a":')]}, index=0),
        chunk({"tool_calls": [tool(0, "same", "f", "{}")]}, index=1),
        chunk({"tool_calls": [tool(0, "same", args="1}")]}, index=0),
        chunk({}, index=0, finish="tool_calls"),
        chunk({}, index=1, finish="tool_calls"),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [c["arguments"] for c in result["calls"]] == [{"a": 1}, {}]


# -- policies --------------------------------------------------------------------------------


def test_the_default_policy_is_strict_and_the_result_carries_it():
    data = sse(text("x", finish="stop"), DONE)
    assert assemble(data, fmt="sse").to_dict()["policy"] == "strict"
    assert assemble(data, fmt="sse", policy="lenient").to_dict()["policy"] == "lenient"


def test_an_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="policy"):
        Assembler("relaxed")


def test_lenient_guesses_the_most_recently_started_candidate():
    data = (FIXTURES / "ambiguous_continuation.sse").read_bytes()
    strict = run(data)
    lenient = run(data, policy="lenient")
    assert code(strict) == "AMBIGUOUS_CONTINUATION"
    assert lenient["anomalies"][0] == {"frame": 2, "kind": "guessed_continuation", "call": 1}
    assert lenient["calls"][1]["arguments_text"] == '{"path":"/etc/hosts"}'
    # call_a never got the rest of its arguments: lenient refuses it at the end.
    assert code(lenient) == "INVALID_ARGUMENTS"
    assert lenient["refusal"]["call"] == 0


def test_lenient_guesses_the_most_recently_seen_candidate_when_none_has_started():
    stream = [
        calls(tool(0, args='{"a":')),
        calls(tool(1, args='{"b":')),
        calls(tool(args="1}")),
        finish(),
        DONE,
    ]
    assert code(run_sse(*stream)) == "AMBIGUOUS_CONTINUATION"
    result = run_sse(*stream, policy="lenient")
    assert [c["arguments_text"] for c in result["calls"]] == ['{"a":', '{"b":1}']
    assert result["anomalies"] == [{"frame": 2, "kind": "guessed_continuation", "call": 1}]


def test_lenient_records_one_guess_per_guessed_delta():
    result = run_sse(
        calls(tool(id="call_a", name="f", args='{"a":')),
        calls(tool(id="call_b", name="g", args='{"b":')),
        calls(tool(args="1")),
        calls(tool(args="}")),
        calls(tool(id="call_a", args="2}")),
        finish(),
        DONE,
        policy="lenient",
    )
    assert result["outcome"] == "ok"
    guesses = [a for a in result["anomalies"] if a["kind"] == "guessed_continuation"]
    assert guesses == [
        {"frame": 2, "kind": "guessed_continuation", "call": 1},
        {"frame": 3, "kind": "guessed_continuation", "call": 1},
    ]
    assert [c["arguments"] for c in result["calls"]] == [{"a": 2}, {"b": 1}]


def test_lenient_prefers_a_started_candidate_over_a_more_recently_seen_unstarted_one():
    result = run_sse(
        calls(tool(0, "call_a", "f", '{"a":')),
        calls(tool(3, args='{"x":')),
        calls(tool(args="1}")),
        finish(),
        DONE,
        policy="lenient",
    )
    assert result["anomalies"][0] == {"frame": 2, "kind": "guessed_continuation", "call": 0}
    assert result["calls"][0]["arguments_text"] == '{"a":1}'


@pytest.mark.parametrize(
    "fixture", ["weather_call.sse", "mismatched_bracket.sse", "cut_mid_frame.sse"]
)
def test_the_policies_agree_wherever_no_delta_is_ambiguous(fixture):
    data = (FIXTURES / fixture).read_bytes()
    strict = run(data)
    lenient = run(data, policy="lenient")
    assert lenient.pop("policy") == "lenient"
    assert strict.pop("policy") == "strict"
    assert lenient == strict


def test_one_pass_can_follow_both_policies_with_the_same_results_as_two_passes():
    data = (FIXTURES / "ambiguous_continuation.sse").read_bytes()
    stream = StreamAssembler("sse", ("strict", "lenient"))
    frames = stream.feed(data[:100]) + stream.feed(data[100:])
    frames += stream.close()
    assert [frame.number for frame in frames] == list(range(5))
    assert stream.results["strict"].to_dict() == run(data)
    assert stream.results["lenient"].to_dict() == run(data, policy="lenient")


def test_events_read_while_streaming_already_carry_the_final_call_numbers():
    data = sse(
        calls(tool(0, args='{"x":')),  # seen first, starts last
        calls(tool(1, "call_B", "b", "{}")),
        calls(tool(0, "call_A", "a", "1}")),
        finish(),
        DONE,
    )
    stream = StreamAssembler("sse")
    live = stream.assemblers["strict"]
    snapshots = []
    for start in range(0, len(data), 40):
        stream.feed(data[start : start + 40])
        snapshots.append([e.to_dict() for e in live.events])
    stream.close()
    final = stream.results["strict"].to_dict()["events"]
    assert [c["id"] for c in stream.results["strict"].to_dict()["calls"]] == ["call_B", "call_A"]
    for snapshot in snapshots:
        assert snapshot == final[: len(snapshot)]


def test_the_event_log_reads_as_events_and_keeps_deltas_out_of_the_cyclic_gc():
    import gc

    from inspector.assembly.result import Event

    data = sse(
        calls(tool(0, "call_A", "read", '{"path":')),
        *[calls(tool(0, args=piece)) for piece in (' "/a', "/b", '"}')],
        finish(),
        DONE,
    )
    result = assemble(data, fmt="sse")
    log = result.events
    events = list(log)
    assert all(type(event) is Event for event in events)
    deltas = [event for event in events if event.type == "toolcall_delta"]
    assert [event.fields for event in deltas] == ['{"path":', ' "/a', "/b", '"}']
    assert all(event.call is result.calls[0] for event in deltas)
    assert [event.to_dict() for event in events] == log.to_dicts()
    assert [e.to_dict() for e in log[1:3]] == [e.to_dict() for e in events[1:3]]
    assert log[-1].to_dict() == events[-1].to_dict() and len(log) == len(events)
    # One per fragment after the first: bare tuples, which the GC stops tracking.
    stored = [item for item in log.items if type(item) is tuple]
    assert len(stored) == 3
    gc.collect()
    assert not any(gc.is_tracked(item) for item in stored)


@pytest.mark.parametrize("seed", range(20))
def test_a_compacted_calls_fragments_from_any_start_are_its_fragments(seed):
    """`Call.iter_fragments(start)` after `compact` joined some of the pieces
    (as an upload does every step) cuts the same fragments as before, reading
    the text from the start-th fragment on."""
    rng = random.Random(seed)
    call = Call(0, 0)
    expected, offset = [], 0
    for frame in range(rng.randint(1, 60)):
        piece = "".join(rng.choice('ab{}":') for _ in range(rng.randint(1, 5)))
        call.pieces.append(piece)
        call.fragment_frames.append(frame)
        call.fragment_starts.append(offset)
        expected.append((frame, offset, piece))
        offset += len(piece)
        if rng.random() < 0.3:
            call.compact()
    assert len(call.pieces) < len(expected)  # some were joined
    for start in range(len(expected) + 1):
        assert list(call.iter_fragments(start)) == expected[start:]
