"""store.py: one stream stored as a capture, its frames, one assembly per
policy, their calls and the strict calls' fragments."""

from __future__ import annotations

import orjson
import pytest
from capture_streams import DONE, chunk, sse, tool

from inspector.assembly import assemble
from inspector.assembly.jsontext import dumps
from inspector.captures import models
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db


USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}

# 0 chunk (call 0 starts), 1 comment, 2 chunk (empty delta: dropped),
# 3 chunk (fragment), 4 finish + usage, 5 done.
MIXED = sse(
    chunk(tool(0, "call_A", "read", '{"path": "/tm')),
    ": keep-alive\n\n",
    chunk(tool(1)),
    chunk(tool(0, args='p"}')),
    chunk(finish="tool_calls", usage=USAGE),
    DONE,
)

# Two unsettled calls hold index 0, then an id-less fragment: strict refuses
# AMBIGUOUS_CONTINUATION at frame 2, lenient guesses call_B (started last).
AMBIGUOUS = sse(
    chunk(tool(0, "call_A", "read", '{"p":')),
    chunk(tool(0, "call_B", "write", '{"q":')),
    chunk(tool(0, args="1}")),
    chunk(tool(0, "call_A", args="2}")),
    chunk(finish="tool_calls"),
    DONE,
)


def assemblies(capture: models.Capture) -> dict[str, models.Assembly]:
    return {row.policy: row for row in capture.assemblies.all()}


def test_capture_row_summarises_the_stream():
    capture = store_stream(MIXED, stream_format="sse", title="t" * 300, provider="p" * 150)
    capture.refresh_from_db()
    assert bytes(capture.raw) == MIXED
    assert capture.byte_size == len(MIXED)
    assert capture.frame_count == 6
    assert capture.model == "gpt-test"
    assert capture.outcome == "ok" and capture.lenient_outcome == "ok"
    assert capture.refusal_code == ""
    assert capture.input_format == capture.stream_format == "sse"
    assert capture.source == "upload"
    assert len(capture.title) == 200 and len(capture.provider) == 100
    assert len(capture.slug) >= 20
    assert not capture.policies_disagree


def test_frames_are_stored_with_kind_raw_calls_and_marks():
    capture = store_stream(MIXED, stream_format="sse", arrived_ms=[0, 1.5, 2, 3, 4, 5])
    frames = list(capture.frames.all())
    assert [f.number for f in frames] == list(range(6))
    assert [f.kind for f in frames] == ["chunk", "comment", "chunk", "chunk", "chunk", "done"]
    assert frames[1].raw == ": keep-alive"
    assert frames[5].raw == "data: [DONE]"
    assert frames[0].raw == MIXED.decode().split("\n\n")[0]
    assert [f.calls for f in frames] == [[0], [], [], [0], [], []]
    assert [f.marks for f in frames] == [[], [], ["empty_delta"], [], [], []]
    assert [f.arrived_ms for f in frames] == [0, 1.5, 2, 3, 4, 5]


def test_frame_marks_hold_anomalies_and_the_refusal_code():
    capture = store_stream(AMBIGUOUS, stream_format="sse")
    marks = {f.number: f.marks for f in capture.frames.all()}
    assert marks[1] == ["index_reused"]
    assert marks[2] == ["AMBIGUOUS_CONTINUATION"]
    assert marks[0] == marks[3] == marks[5] == []
    calls = {f.number: f.calls for f in capture.frames.all()}
    assert calls[0] == [0] and calls[1] == [1]


def test_jsonl_stream_is_stored_like_sse():
    data = (
        b"\n".join(orjson.dumps(c) for c in (chunk(content="hi", finish="stop"),)) + b"\n[DONE]\n"
    )
    capture = store_stream(data, stream_format="jsonl", input_format="jsonl")
    assert capture.outcome == "ok"
    assert [f.kind for f in capture.frames.all()] == ["chunk", "done"]
    strict = assemblies(capture)["strict"]
    assert strict.text == "hi"
    assert strict.finish_reason == "stop"


def test_each_assembly_keeps_the_result_the_command_prints():
    capture = store_stream(MIXED, stream_format="sse")
    rows = assemblies(capture)
    assert set(rows) == {"strict", "lenient"}
    for policy, row in rows.items():
        expected = dumps(assemble(MIXED, fmt="sse", policy=policy).to_dict()).decode()
        assert row.document() == expected
        assert row.outcome == "ok"
        assert row.finish_reason == "tool_calls"
        assert row.usage == USAGE
        assert row.refusal_code == "" and row.refusal_frame is None
    call = rows["strict"].calls.get()
    assert call.call_id == "call_A" and call.name == "read" and call.index == 0
    assert call.arguments == {"path": "/tmp"}
    assert call.arguments_text == '{"path": "/tmp"}'
    assert call.started_frame == 0 and call.settled_frame == 3
    assert call.fragment_count == 2
    assert call.invalid_at is None


def test_policies_that_disagree_get_two_different_assemblies():
    capture = store_stream(AMBIGUOUS, stream_format="sse")
    assert capture.outcome == "refused"
    assert capture.refusal_code == "AMBIGUOUS_CONTINUATION"
    assert capture.lenient_outcome == "ok"
    assert capture.policies_disagree

    rows = assemblies(capture)
    strict, lenient = rows["strict"], rows["lenient"]
    assert strict.result_json == dumps(assemble(AMBIGUOUS, fmt="sse").to_dict()).decode()
    assert (
        lenient.result_json
        == dumps(assemble(AMBIGUOUS, fmt="sse", policy="lenient").to_dict()).decode()
    )
    assert strict.outcome == "refused"
    assert strict.refusal_code == "AMBIGUOUS_CONTINUATION"
    assert strict.refusal_frame == 2
    assert strict.refusal_call is None and strict.refusal_choice is None
    assert strict.refusal_retryable is False
    assert "2 unsettled calls" in strict.refusal_message
    assert orjson.loads(strict.result_json)["refusal"] == {
        "code": "AMBIGUOUS_CONTINUATION",
        "message": strict.refusal_message,
        "frame": 2,
        "call": None,
        "choice": None,
        "retryable": False,
    }
    assert lenient.outcome == "ok" and lenient.refusal_code == ""

    strict_calls = list(strict.calls.all())
    lenient_calls = list(lenient.calls.all())
    assert [(c.call_id, c.arguments_text) for c in strict_calls] == [
        ("call_A", '{"p":'),
        ("call_B", '{"q":'),
    ]
    assert [c.arguments for c in strict_calls] == [None, None]
    assert [(c.call_id, c.arguments) for c in lenient_calls] == [
        ("call_A", {"p": 2}),
        ("call_B", {"q": 1}),
    ]
    # only the strict assembly keeps fragments: one of each call
    fragments = models.Fragment.objects.filter(capture=capture)
    assert list(fragments.values_list("position", "seq")) == [(0, 0), (1, 0)]


def test_call_timelines_tell_how_identity_evolved():
    capture = store_stream(AMBIGUOUS, stream_format="sse")
    rows = assemblies(capture)
    strict = [c.timeline for c in rows["strict"].calls.all()]
    assert strict[0] == [
        {"frame": 0, "event": "identity", "field": "id", "value": "call_A"},
        {"frame": 0, "event": "identity", "field": "name", "value": "read"},
        {"frame": 0, "event": "toolcall_start"},
    ]
    assert strict[1] == [
        {"frame": 1, "event": "index_reused"},
        {"frame": 1, "event": "identity", "field": "id", "value": "call_B"},
        {"frame": 1, "event": "identity", "field": "name", "value": "write"},
        {"frame": 1, "event": "toolcall_start"},
    ]
    lenient = [c.timeline for c in rows["lenient"].calls.all()]
    assert lenient[1][4:] == [
        {"frame": 2, "event": "guessed_continuation"},
        {"frame": 2, "event": "settled"},
        {"frame": 5, "event": "toolcall_end"},
    ]
    assert lenient[0][3:] == [
        {"frame": 3, "event": "settled"},
        {"frame": 5, "event": "toolcall_end"},
    ]


def test_timeline_ends_with_a_refusal_about_the_call_and_ignored_identity():
    data = sse(
        chunk(tool(0, "call_A", "read", '{"a":1}')),
        chunk(tool(0, "call_A", "", "")),
        chunk(tool(0, "call_A", "write")),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(data, stream_format="sse")
    assert capture.refusal_code == "IDENTITY_CONFLICT"
    timeline = assemblies(capture)["strict"].calls.get().timeline
    assert {"frame": 1, "event": "identity_ignored", "field": "name", "value": ""} in timeline
    assert timeline[-1] == {"frame": 2, "event": "refusal", "value": "IDENTITY_CONFLICT"}


def test_fragments_keep_the_scanner_state_after_each_one():
    data = sse(
        chunk(tool(0, "call_A", "find", '{"q": "a{')),
        chunk(tool(0, args='b", "tags": [1, ')),
        chunk(tool(0, args="{")),
        chunk(tool(0, args='"x": 2}]}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(data, stream_format="sse")
    assert capture.outcome == "ok"
    call = assemblies(capture)["strict"].calls.get()
    fragments = list(call.fragments.all())
    assert [(f.seq, f.frame, f.offset) for f in fragments] == [
        (0, 0, 0),
        (1, 1, 9),
        (2, 2, 25),
        (3, 3, 26),
    ]
    assert "".join(f.text for f in fragments) == call.arguments_text
    assert [f.depth for f in fragments] == [1, 2, 3, 0]
    assert [f.in_string for f in fragments] == [True, False, False, False]
    assert [f.complete for f in fragments] == [False, False, False, True]
    assert [f.invalid_from for f in fragments] == [None] * 4
    assert call.arguments == {"q": "a{b", "tags": [1, {"x": 2}]}


def test_fragments_mark_where_arguments_went_invalid():
    data = sse(
        chunk(tool(0, "call_A", "read", '{"a": [1')),
        chunk(tool(0, args="}")),
        chunk(tool(0, args="]}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(data, stream_format="sse")
    assert capture.refusal_code == "INVALID_ARGUMENTS"
    strict = assemblies(capture)["strict"]
    assert strict.refusal_frame == 1 and strict.refusal_call == 0
    call = strict.calls.get()
    assert call.invalid_at["frame"] == 1 and call.invalid_at["offset"] == 8
    fragments = list(call.fragments.all())
    assert [f.invalid_from for f in fragments] == [None, 8, 8]
    assert [f.complete for f in fragments] == [False, False, False]
    assert fragments[0].depth == 2 and not fragments[0].in_string


def test_a_stream_with_no_frames_is_stored_refused():
    capture = store_stream(b"", stream_format="sse")
    assert capture.frame_count == 0
    assert capture.frames.count() == 0
    assert capture.outcome == "refused"
    assert (
        assemblies(capture)["strict"].result_json
        == dumps(assemble(b"", fmt="sse").to_dict()).decode()
    )


def test_text_with_nul_and_non_ascii_is_stored_on_every_database():
    """PostgreSQL's text and jsonb hold no NUL: the page columns get U+FFFD,
    while the raw bytes and the result JSON stay exact."""
    args = '{"a": "x\\u0000y", "lit": "\\\\u0000", "k\\u0000": ["\\u0000"]}'
    data = sse(
        chunk(content="caf\u00e9 \u2603 \U0001f600 \x00!"),
        chunk(tool(0, "call_\x00", "n\x00", args)),
        'data: {"choices": []}\x00\n\n',  # a literal NUL in a frame's raw text
        chunk(finish="tool_calls", usage={"n\x00": 1}),
        DONE,
    )
    capture = store_stream(data, stream_format="sse", title="t\x00")
    capture.refresh_from_db()
    assert bytes(capture.raw) == data
    assert capture.title == "t\ufffd"
    strict = assemblies(capture)["strict"]
    expected = assemble(data, fmt="sse").to_dict()
    assert strict.result_json == dumps(expected).decode()
    assert expected["outcome"] == "refused"  # the NUL frame is not a JSON object
    assert strict.text == "caf\u00e9 \u2603 \U0001f600 \ufffd!"
    assert strict.usage == {"n\ufffd": 1}
    frames = list(capture.frames.all())
    assert frames[2].raw.endswith("\ufffd")
    lenient = assemblies(capture)["lenient"]
    call = strict.calls.get()
    assert call.call_id == "call_\ufffd" and call.name == "n\ufffd"
    assert "\x00" not in call.arguments_text
    assert call.arguments_text == expected["calls"][0]["arguments_text"].replace("\x00", "\ufffd")
    fragment = call.fragments.get()
    assert fragment.text == call.arguments_text
    assert call.timeline[0]["value"] == "call_\ufffd"
    assert lenient.calls.get().call_id == "call_\ufffd"


def test_nul_in_parsed_arguments_and_usage():
    args = '{"a": "x\\u0000y", "lit": "\\\\u0000", "k\\u0000": ["\\u0000", 1]}'
    data = sse(
        chunk(tool(0, "call_A", "read", args)),
        chunk(finish="tool_calls", usage={"n\x00": "v\x00"}),
        DONE,
    )
    capture = store_stream(data, stream_format="sse")
    assert capture.outcome == "ok"
    strict = assemblies(capture)["strict"]
    assert strict.result_json == dumps(assemble(data, fmt="sse").to_dict()).decode()
    assert strict.usage == {"n\ufffd": "v\ufffd"}
    call = strict.calls.get()
    assert call.arguments == {"a": "x\ufffdy", "lit": "\\u0000", "k\ufffd": ["\ufffd", 1]}
