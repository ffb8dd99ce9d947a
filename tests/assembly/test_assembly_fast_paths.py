"""The assembler's shortcuts give the results of the general path.

`assemble()` reads SSE and JSON arrays without making a `Frame` of the common frames
(`StreamAssembler.consume`), while `StreamAssembler.feed` (uploads, live
capture) returns every frame; the chat adapter takes a plain continuation
(`ChatDialect.chunk`) to the one unsettled call holding its index
without building the candidate list.  Both must change nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streams import DONE, USAGE, calls, chunk, finish, sse, tool

from inspector.assembly import POLICIES, assemble, read_stream

CASES = sorted((Path(__file__).resolve().parent.parent / "conformance").rglob("*.sse"))
FIXTURES = sorted((Path(__file__).resolve().parent / "fixtures").glob("*.sse"))


def by_frames(data: bytes, policy: str, size: int | None = None) -> dict:
    """The result through `StreamAssembler.feed`, which makes every frame."""
    _, results = read_stream(data, "sse", (policy,), chunk_bytes=size)
    return results[policy].to_dict()


@pytest.mark.parametrize("path", CASES + FIXTURES, ids=lambda path: path.stem)
@pytest.mark.parametrize("policy", POLICIES)
def test_assemble_without_frames_gives_the_result_of_feeding_every_frame(path, policy):
    data = path.read_bytes()
    expected = by_frames(data, policy)
    assert assemble(data, fmt="sse", policy=policy).to_dict() == expected
    assert assemble(data, fmt="sse", policy=policy, chunk_bytes=1).to_dict() == expected
    assert by_frames(data, policy, 3) == expected


ARRAYS = sorted((Path(__file__).resolve().parent.parent / "conformance").rglob("*.json"))
ARRAYS = [path for path in ARRAYS if not path.name.endswith(".expect.json")]


@pytest.mark.parametrize("path", ARRAYS, ids=lambda path: path.stem)
def test_a_json_array_assembled_without_frames_gives_the_result_of_every_frame(path):
    data = path.read_bytes()
    _, results = read_stream(data, "json-array", ("strict",))
    expected = results["strict"].to_dict()
    assert assemble(data, fmt="json-array").to_dict() == expected
    assert assemble(data, fmt="json-array", chunk_bytes=1).to_dict() == expected
    _, results = read_stream(data, "json-array", ("strict",), chunk_bytes=2)
    assert results["strict"].to_dict() == expected


def both_ways(*items: object, policy: str = "strict") -> dict:
    data = sse(*items)
    result = assemble(data, fmt="sse", policy=policy).to_dict()
    assert result == by_frames(data, policy)
    assert result == assemble(data, fmt="sse", policy=policy, chunk_bytes=1).to_dict()
    return result


def test_a_continuation_at_an_index_two_open_calls_hold_is_still_ambiguous():
    result = both_ways(
        calls(tool(0, "call_a", "read", '{"p":')),
        calls(tool(0, args="1")),  # a plain continuation of call_a
        calls(tool(0, "call_b", "write", '{"q":')),  # a new id at index 0: index_reused
        calls(tool(0, args="2}")),
        finish(),
        DONE,
    )
    assert result["refusal"]["code"] == "AMBIGUOUS_CONTINUATION"
    assert result["refusal"]["frame"] == 3
    assert [a["kind"] for a in result["anomalies"]] == ["index_reused"]


def test_under_lenient_the_guess_between_two_open_calls_is_the_general_one():
    result = both_ways(
        calls(tool(0, "call_a", "read", '{"p":')),
        calls(tool(0, args="1")),
        calls(tool(0, "call_b", "write", '{"q":')),
        calls(tool(0, args="2}")),
        calls(tool(0, args="}")),
        finish(),
        DONE,
        policy="lenient",
    )
    assert [a["kind"] for a in result["anomalies"]][:2] == ["index_reused", "guessed_continuation"]
    # "2}" went to call_b (started last) and closed it; "}" then had one candidate.
    assert [c["arguments_text"] for c in result["calls"]] == ['{"p":1}', '{"q":2}']


def test_after_a_call_settles_the_next_call_at_its_index_takes_the_continuations():
    result = both_ways(
        calls(tool(0, "call_a", "read", '{"p":')),
        calls(tool(0, args="1}")),  # settles call_a
        calls(tool(0, "call_b", "write", "")),
        calls(tool(0, args='{"q":')),
        calls(tool(0, args="2}")),
        finish(),
        DONE,
    )
    assert result["outcome"] == "ok"
    assert [(c["id"], c["arguments_text"]) for c in result["calls"]] == [
        ("call_a", '{"p":1}'),
        ("call_b", '{"q":2}'),
    ]
    assert [c["frames"] for c in result["calls"]] == [[0, 1], [2, 3, 4]]


def test_text_after_a_settled_call_at_its_index_is_a_provisional_call_as_before():
    result = both_ways(
        calls(tool(0, "call_a", "read", '{"p":1}')),
        calls(tool(0, args=" ")),  # after the close: a provisional call? no, blank: dropped
        calls(tool(0, args="x")),  # not blank: a new call without identity
        finish(),
        DONE,
    )
    assert result["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert result["dropped"] == [{"frame": 1, "choice": 0, "reason": "empty_delta"}]


def test_continuations_of_other_shapes_take_the_general_path_to_the_same_call():
    odd = [
        chunk({"tool_calls": [tool(0, args='"a":1')], "content": "hi"}),
        chunk({"tool_calls": [tool(0, args=",")]}, finish="tool_calls"),
        chunk({"tool_calls": [tool(0, args='"b":')]}, usage=USAGE),
        chunk({"tool_calls": [tool(True, args="2")]}),  # a bool is no index: rule 3 without
        chunk({"tool_calls": [tool(0, args="}"), tool(1, "call_b", "write", "{}")]}),
    ]
    result = both_ways(calls(tool(0, "call_a", "read", "{")), *odd, DONE)
    assert result["outcome"] == "ok"
    assert [c["arguments_text"] for c in result["calls"]] == ['{"a":1,"b":2}', "{}"]
    assert result["usage"] == USAGE
    assert result["text"] == "hi"


def test_a_continuation_of_another_choice_goes_to_that_choice():
    result = both_ways(
        calls(tool(0, "call_a", "read", "{")),
        calls(tool(0, "call_b", "write", "{"), index=1),
        calls(tool(0, args="}"), index=1),
        calls(tool(0, args="}")),
        chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        chunk(choices=[{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]),
        DONE,
    )
    assert [(c["choice"], c["settled_frame"]) for c in result["calls"]] == [(0, 3), (1, 2)]
