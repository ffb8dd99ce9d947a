"""Section 3 of the assembly spec: normalising a tool-call delta, resolving it to a
call (rules 1-3), applying identity, appending arguments, and starting calls."""

from __future__ import annotations

import pytest
from streams import (
    DONE,
    calls,
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


def call_events(result, frame):
    """(type, call) of the call events of one frame, in order."""
    call_types = {"identity", "identity_ignored", "toolcall_start", "toolcall_delta", "settled"}
    return [
        (e["type"], e["call"])
        for e in result["events"]
        if e["frame"] == frame and e["type"] in call_types
    ]


# -- rule 1: an explicit id re-associates ----------------------------------------------------


def test_an_explicit_id_reaches_its_call_even_after_it_settled():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"path":"/a"}')),
        calls(tool(1, "call_B", "read", '{"path":')),
        calls(tool(id="call_A", args="  ")),
        calls(tool(1, args='"/b"}')),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    first, second = result["calls"]
    assert first["frames"] == [0, 2]
    assert first["arguments_text"] == '{"path":"/a"}  '
    assert first["settled_frame"] == 0
    assert second["arguments"] == {"path": "/b"}


def test_text_sent_to_a_settled_call_by_its_id_is_checked_with_it():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"path":"/a"}')),
        calls(tool(0, "call_A", args="}")),
        finish(),
        DONE,
    )
    assert code(result) == "INVALID_ARGUMENTS"
    assert result["calls"][0]["invalid_at"]["frame"] == 1
    assert result["calls"][0]["invalid_at"]["offset"] == 13


def test_an_id_less_delta_never_reaches_a_settled_call():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"path":"/a"}')),
        calls(tool(args='{"more":1}')),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["calls"][0]["frames"] == [0]
    assert result["dropped"] == [{"frame": 1, "choice": 0, "reason": "orphan_continuation"}]


# -- rule 2: a new id ------------------------------------------------------------------------


def test_a_new_id_binds_to_the_single_id_less_candidate_started_by_name():
    result = run_sse(
        calls(tool(0, name="read", args='{"path":')),
        calls(tool(0, id="call_late", args='"/a"}')),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    (call,) = result["calls"]
    assert call["id"] == "call_late"
    assert call["started_frame"] == 0
    assert call["settled_frame"] == 1
    assert [e for e in events_of(result, "identity") if e["field"] == "id"] == [
        {"type": "identity", "frame": 1, "call": 0, "field": "id", "value": "call_late"}
    ]


def test_a_new_id_binds_to_an_arguments_first_call_and_starts_it():
    result = run_sse(
        calls(tool(0, args='{"path":')),
        calls(tool(0, args='"/a"}')),
        calls(tool(0, "call_A", "read")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    (call,) = result["calls"]
    assert (call["id"], call["name"]) == ("call_A", "read")
    assert call["frames"] == [0, 1, 2]
    assert call["started_frame"] == 2
    assert call["settled_frame"] == 2
    assert types(result, frame=0) == []
    assert types(result, frame=1) == []


def test_a_new_id_with_several_id_less_candidates_starts_a_new_call():
    result = run_sse(
        calls(tool(0, name="read", args="{")),
        calls(tool(1, name="write", args="{")),
        calls(tool(id="call_C", name="list", args="{}")),
        finish(),
        DONE,
    )
    ids = [call["id"] for call in result["calls"]]
    assert ids == [None, None, "call_C"]
    assert code(result) == "MALFORMED_TOOL_CALL"
    assert result["refusal"]["call"] == 0


def test_a_new_id_on_an_index_another_call_holds_starts_a_new_call_with_index_reused():
    result = run_sse(
        calls(tool(0, "call_p1", "get_weather", '{"city":"Paris"}')),
        calls(tool(0, "call_p2", "get_weather", '{"city":"Rome"}')),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [call["id"] for call in result["calls"]] == ["call_p1", "call_p2"]
    assert [call["index"] for call in result["calls"]] == [0, 0]
    assert result["anomalies"] == [{"frame": 1, "kind": "index_reused", "call": 1}]


def test_a_new_id_never_takes_over_an_unsettled_call_holding_another_id():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"path":')),
        calls(tool(0, "call_B", "stat", "{}")),
        calls(tool(0, args='"/a"}')),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    first, second = result["calls"]
    assert (first["id"], first["arguments"]) == ("call_A", {"path": "/a"})
    assert (second["id"], second["arguments"]) == ("call_B", {})
    assert kinds(result) == ["index_reused"]


def test_index_reused_counts_settled_calls_holding_the_index():
    result = run_sse(
        calls(tool(1, "call_B", "f", "{}")),
        calls(tool(1, "call_C", "f", "{}")),
        calls(tool(2, "call_D", "f", "{}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["anomalies"] == [{"frame": 1, "kind": "index_reused", "call": 1}]


def test_a_new_id_without_index_binds_to_the_single_id_less_unsettled_call():
    result = run_sse(
        calls(tool(0, name="read", args='{"p":1}')),
        calls(tool(id="call_X")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [call["id"] for call in result["calls"]] == ["call_X"]
    assert result["calls"][0]["settled_frame"] == 1


# -- rule 3: no id ---------------------------------------------------------------------------


def test_an_id_less_delta_with_one_candidate_continues_it():
    result = run_sse(
        calls(tool(0, "call_A", "read", "")),
        calls(tool(0, args='{"pa')),
        calls(tool(0, args='th":"/a"}')),
        finish(),
        DONE,
    )
    assert result["calls"][0]["arguments"] == {"path": "/a"}
    assert result["calls"][0]["frames"] == [0, 1, 2]


def test_an_id_less_delta_with_an_index_prefers_the_call_holding_that_index():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(id="call_B", name="write", args='{"q":')),
        calls(tool(0, args="1}")),
        calls(tool(5, args="2}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    first, second = result["calls"]
    assert first["arguments"] == {"p": 1}
    assert second["arguments"] == {"q": 2}
    # The index-5 delta went to the only call holding no index, which takes it.
    assert second["index"] == 5


def test_an_id_less_delta_with_several_candidates_is_refused_ambiguous_continuation():
    result = run_sse(
        calls(tool(id="call_a", name="read", args='{"path":')),
        calls(tool(id="call_b", name="read", args='{"path":')),
        calls(tool(args='"/etc/hosts"}')),
        finish(),
        DONE,
    )
    assert result["refusal"] == {
        "code": "AMBIGUOUS_CONTINUATION",
        "message": result["refusal"]["message"],
        "frame": 2,
        "call": None,
        "choice": None,
        "retryable": False,
    }
    assert [call["arguments_text"] for call in result["calls"]] == ['{"path":'] * 2


def test_an_id_less_delta_with_a_name_and_no_candidate_starts_a_call_without_id():
    result = run_sse(
        calls(tool(name="read", args='{"p":1}')),
        finish(),
        DONE,
    )
    (call,) = result["calls"]
    assert (call["id"], call["name"], call["started_frame"]) == (None, "read", 0)
    assert code(result) == "MALFORMED_TOOL_CALL"


def test_arguments_that_come_first_with_an_index_start_a_call_that_has_not_started():
    result = run_sse(calls(tool(3, args='{"p":1}')), finish(), DONE)
    (call,) = result["calls"]
    assert (call["id"], call["name"], call["index"]) == (None, None, 3)
    assert call["started_frame"] is None
    assert events_of(result, "toolcall_start") == []
    assert code(result) == "MALFORMED_TOOL_CALL"


@pytest.mark.parametrize("args", ["", "  \t\r\n", None])
def test_a_blank_id_less_nameless_delta_with_an_index_is_dropped_as_empty_delta(args):
    result = run_sse(calls(tool(0, args=args)), text("ok", finish="stop"), DONE)
    assert result["calls"] == []
    assert result["dropped"] == [{"frame": 0, "choice": 0, "reason": "empty_delta"}]
    assert events_of(result, "dropped") == [
        {"type": "dropped", "frame": 0, "choice": 0, "reason": "empty_delta"}
    ]
    assert result["outcome"] == "ok"


@pytest.mark.parametrize("args", ['{"a":1}', "", "}"])
def test_an_id_less_delta_without_index_or_name_and_no_candidate_is_an_orphan(args):
    result = run_sse(calls(tool(args=args)), text("ok", finish="stop"), DONE)
    assert result["calls"] == []
    assert result["dropped"] == [{"frame": 0, "choice": 0, "reason": "orphan_continuation"}]
    assert result["outcome"] == "ok"


def test_an_orphan_after_a_settled_call_does_not_invent_a_phantom_call():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":1}')),
        calls(tool(args="}")),
        finish(),
        DONE,
    )
    assert len(result["calls"]) == 1
    assert result["outcome"] == "ok"
    assert [d["reason"] for d in result["dropped"]] == ["orphan_continuation"]


# -- normalisation ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, "", 123, ["call_A"], {"id": "x"}, False], ids=repr)
def test_an_unusable_id_is_absent_and_recorded_as_identity_ignored(bad):
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(0, id=bad, args="1}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["calls"][0]["id"] == "call_A"
    assert events_of(result, "identity_ignored") == [
        {"type": "identity_ignored", "frame": 1, "call": 0, "field": "id", "value": bad}
    ]


@pytest.mark.parametrize("bad", [None, "", 7, {"n": 1}], ids=repr)
def test_an_unusable_name_is_absent_and_recorded_as_identity_ignored(bad):
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(0, name=bad, args="1}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["calls"][0]["name"] == "read"
    assert [(e["field"], e["value"]) for e in events_of(result, "identity_ignored")] == [
        ("name", bad)
    ]


def test_null_and_empty_identity_never_erase_what_is_established():
    result = run_sse(
        calls(tool(0, "call_A", "read", "")),
        calls(tool(0, id=None, name=None, args='{"p"')),
        calls(tool(0, id="", name="", args=":1}")),
        finish(),
        DONE,
    )
    (call,) = result["calls"]
    assert (call["id"], call["name"], call["arguments"]) == ("call_A", "read", {"p": 1})
    assert len(events_of(result, "identity_ignored")) == 4
    assert len(events_of(result, "identity")) == 2


def test_keys_that_are_missing_give_no_identity_ignored_event():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p"')),
        calls(tool(0, args=":1}")),
        finish(),
        DONE,
    )
    assert events_of(result, "identity_ignored") == []


def test_a_null_id_does_not_make_a_new_call():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(1, id=None, name=None, args="")),
        calls(tool(0, args="1}")),
        finish(),
        DONE,
    )
    # No call holds index 1 and the only unsettled call holds another index:
    # no candidate, no name, blank arguments -> dropped, no phantom call.
    assert len(result["calls"]) == 1
    assert result["dropped"] == [{"frame": 1, "choice": 0, "reason": "empty_delta"}]


@pytest.mark.parametrize("index", [True, False, 0.0, 1.5, -1, "0", None], ids=repr)
def test_an_index_that_is_not_a_non_negative_integer_is_no_index(index):
    result = run_sse(calls(tool(index, "call_A", "read", "{}")), finish(), DONE)
    assert result["calls"][0]["index"] is None
    assert result["outcome"] == "ok"


@pytest.mark.parametrize("index", [True, 0.0, -2], ids=repr)
def test_arguments_first_need_a_real_index_else_they_are_an_orphan(index):
    result = run_sse(calls(tool(index, args='{"a":1}')), text("x", finish="stop"), DONE)
    assert result["calls"] == []
    assert [d["reason"] for d in result["dropped"]] == ["orphan_continuation"]


def test_index_zero_is_a_real_index():
    result = run_sse(calls(tool(0, args='{"a":1}')), finish(), DONE)
    assert result["calls"][0]["index"] == 0
    assert result["dropped"] == []


def test_non_string_arguments_are_serialised_compactly_and_recorded():
    result = run_sse(
        calls(tool(0, "call_o", "list_files", {"path": "/tmp", "city": "Zürich", "n": [1, 2]})),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    (call,) = result["calls"]
    assert call["arguments_text"] == '{"path":"/tmp","city":"Zürich","n":[1,2]}'
    assert call["arguments"] == {"path": "/tmp", "city": "Zürich", "n": [1, 2]}
    assert result["anomalies"] == [{"frame": 0, "kind": "arguments_not_string", "call": 0}]


@pytest.mark.parametrize(
    ("value", "as_text"), [(True, "true"), (12.5, "12.5"), ([1, "a"], '[1,"a"]'), ({}, "{}")]
)
def test_any_non_string_arguments_value_becomes_its_compact_json(value, as_text):
    result = run_sse(calls(tool(0, "call_A", "f", value)), finish(), DONE)
    assert result["calls"][0]["arguments_text"] == as_text
    assert "arguments_not_string" in kinds(result)


def test_non_string_arguments_nested_deeper_than_orjson_writes_are_still_compact():
    depth = 300
    value = {"a": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    result = run_sse(calls(tool(0, "call_A", "f", value)), finish(), DONE)
    assert result["outcome"] == "ok"
    assert result["calls"][0]["arguments_text"] == '{"a":' * depth + "1" + "}" * depth


def test_null_or_missing_arguments_are_an_empty_fragment_without_an_anomaly():
    result = run_sse(
        calls(tool(0, "call_A", "f", None)),
        calls(tool(0, function={})),
        calls(tool(0, args='{"a":1}')),
        finish(),
        DONE,
    )
    assert result["calls"][0]["arguments_text"] == '{"a":1}'
    assert kinds(result) == []


# -- apply identity --------------------------------------------------------------------------


def test_a_different_name_for_an_established_call_is_refused_identity_conflict():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(0, name="write", args="1}")),
        finish(),
        DONE,
    )
    assert result["refusal"]["code"] == "IDENTITY_CONFLICT"
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["call"] == 0
    assert result["refusal"]["retryable"] is False
    # The conflicting delta's fragment is not appended.
    assert result["calls"][0]["arguments_text"] == '{"p":'
    assert call_events(result, 1) == []


def test_a_conflicting_name_sent_with_the_calls_own_id_is_refused_too():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(0, "call_A", "delete", "1}")),
        finish(),
        DONE,
    )
    assert code(result) == "IDENTITY_CONFLICT"


def test_binding_an_id_to_a_call_with_another_name_is_refused_identity_conflict():
    result = run_sse(
        calls(tool(0, name="read", args='{"p":')),
        calls(tool(0, "call_A", "write", "1}")),
        finish(),
        DONE,
    )
    assert code(result) == "IDENTITY_CONFLICT"
    assert result["calls"][0]["id"] == "call_A"
    assert result["calls"][0]["name"] == "read"


def test_the_same_name_again_is_inert():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(0, "call_A", "read", "1}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [e["frame"] for e in events_of(result, "identity")] == [0, 0]
    assert events_of(result, "identity_ignored") == []


def test_the_first_index_is_kept_and_a_different_one_is_index_changed():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"p":')),
        calls(tool(4, "call_A", args="1}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert result["calls"][0]["index"] == 0
    assert result["anomalies"] == [{"frame": 1, "kind": "index_changed", "call": 0}]


def test_an_index_arriving_after_the_start_is_the_first_index_seen():
    result = run_sse(
        calls(tool(id="call_A", name="read", args='{"p":')),
        calls(tool(2, args="1}")),
        finish(),
        DONE,
    )
    assert result["calls"][0]["index"] == 2
    assert kinds(result) == []


# -- start and event order -------------------------------------------------------------------


def test_events_within_one_delta_come_identity_start_delta_settled():
    result = run_sse(
        calls(tool(0, args='{"a":')),
        calls(tool(0, "call_A", "read", "1}")),
        finish(),
        DONE,
    )
    assert call_events(result, 1) == [
        ("identity", 0),
        ("identity", 0),
        ("toolcall_start", 0),
        ("toolcall_delta", 0),
        ("settled", 0),
    ]
    (delta,) = [e for e in events_of(result, "toolcall_delta")]
    assert delta["delta"] == '{"a":1}'


def test_identity_ignored_comes_before_the_delta_of_the_same_entry():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"a":')),
        calls(tool(0, id=None, args="1}")),
        finish(),
        DONE,
    )
    assert call_events(result, 1) == [
        ("identity_ignored", 0),
        ("toolcall_delta", 0),
        ("settled", 0),
    ]


def test_a_call_starts_exactly_once_when_it_first_holds_an_id_or_a_name():
    result = run_sse(
        calls(tool(0, args='{"a"')),
        calls(tool(0, name="read", args=":")),
        calls(tool(0, id="call_A", args="1")),
        calls(tool(0, args="}")),
        finish(),
        DONE,
    )
    starts = events_of(result, "toolcall_start")
    assert starts == [{"type": "toolcall_start", "frame": 1, "call": 0}]
    deltas = [(e["frame"], e["delta"]) for e in events_of(result, "toolcall_delta")]
    # Text buffered before the start follows at once as one delta.
    assert deltas == [(1, '{"a":'), (2, "1"), (3, "}")]
    assert result["calls"][0]["started_frame"] == 1
    assert result["calls"][0]["settled_frame"] == 3


def test_a_start_with_no_text_yet_gives_no_delta_and_empty_fragments_give_none():
    result = run_sse(
        calls(tool(0, "call_A", "read", "")),
        calls(tool(0, args="")),
        calls(tool(0, args="{}")),
        finish(),
        DONE,
    )
    deltas = [(e["frame"], e["delta"]) for e in events_of(result, "toolcall_delta")]
    assert deltas == [(2, "{}")]
    assert result["calls"][0]["frames"] == [0, 1, 2]


def test_a_call_settles_only_when_it_holds_id_name_and_a_closed_root():
    result = run_sse(
        calls(tool(0, name="read", args='{"a":1}')),
        calls(tool(0, id="call_A")),
        finish(),
        DONE,
    )
    assert result["calls"][0]["settled_frame"] == 1
    assert [e["frame"] for e in events_of(result, "settled")] == [1]


def test_a_call_with_an_id_and_a_closed_root_but_no_name_has_not_settled():
    result = run_sse(
        calls(tool(0, "call_A", args='{"a":1}')),
        calls(tool(0, name="read")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    (call,) = result["calls"]
    assert call["name"] == "read"
    assert call["settled_frame"] == 1


def test_parallel_calls_by_index_interleave():
    result = run_sse(
        chunk({"role": "assistant", "content": None}),
        calls(tool(0, "call_1", "get_weather", ""), tool(1, "call_2", "get_time", "")),
        calls(tool(0, args='{"city":'), tool(1, args='{"tz":')),
        calls(tool(1, args='"CET"}'), tool(0, args='"Oslo"}')),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [c["arguments"] for c in result["calls"]] == [{"city": "Oslo"}, {"tz": "CET"}]
    assert [c["settled_frame"] for c in result["calls"]] == [3, 3]
    assert [e["call"] for e in events_of(result, "settled")] == [1, 0]
