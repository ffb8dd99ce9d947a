"""Properties of the assembler over generated streams (hypothesis): cutting the bytes
anywhere or changing line endings changes nothing, and whatever the deltas, the
events keep the spec's invariants."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streams import CALL_EVENT_TYPES, DONE, EVENT_TYPES, OMIT, USAGE, chunk, data_line, sse, tool

from inspector.assembly import ANOMALY_KINDS, StreamAssembler, assemble, lenient_twin

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- strategies ------------------------------------------------------------------------------

fragments = st.text(alphabet='{}[]":,\\ a1é\n', max_size=8)
ids = st.sampled_from([OMIT, None, "", 5, "call_a", "call_b", "call_c"])
names = st.sampled_from([OMIT, None, "", 7, "read", "write"])
indexes = st.sampled_from([OMIT, None, 0, 1, 2, True, False, -1, 0.0])
arguments = st.one_of(
    st.just(OMIT),
    st.none(),
    fragments,
    st.sampled_from(['{"a":1}', "{", "}", '"x"', {"k": "v"}, [1], 3]),
)


@st.composite
def tool_entries(draw):
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from([None, 1, "x", []]))
    return tool(draw(indexes), draw(ids), draw(names), draw(arguments))


@st.composite
def chunks(draw):
    delta = {}
    if draw(st.booleans()):
        delta["tool_calls"] = draw(st.lists(tool_entries(), min_size=1, max_size=3))
    if draw(st.integers(0, 4)) == 0:
        delta["content"] = draw(st.sampled_from(["Hi", "", None, "ü"]))
    if draw(st.integers(0, 9)) == 0:
        delta["reasoning"] = "r"
    finish = draw(st.sampled_from([None] * 6 + ["stop", "tool_calls", "length", "error"]))
    usage = draw(st.sampled_from([OMIT] * 6 + [USAGE, None]))
    index = draw(st.sampled_from([0] * 5 + [1]))
    return chunk(delta, finish=finish, usage=usage, index=index)


odd_frames = st.sampled_from(
    [": keep-alive\n\n", "data: not json\n\n", 'data: {"error":{"message":"x"}}\n\n', DONE]
)


@st.composite
def noisy_streams(draw):
    """Anything goes: random entries, odd frames, cut anywhere."""
    items = draw(
        st.lists(
            st.one_of(chunks(), chunks(), chunks(), odd_frames),
            min_size=0,
            max_size=10,
        )
    )
    if draw(st.booleans()):
        items.append(DONE)
    data = sse(*items)
    if draw(st.integers(0, 5)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return data


argument_objects = st.dictionaries(
    st.sampled_from(["path", "q", "ü", "n"]),
    st.one_of(st.integers(-5, 5), st.text(alphabet='ab{}[]"\\ é', max_size=6), st.booleans()),
    max_size=3,
)


@st.composite
def planned_streams(draw):
    """One to three calls sent the way providers do (a header, then id-less
    continuations by index, interleaved), with a little noise."""
    count = draw(st.integers(1, 3))
    plans, expected = [], []
    for i in range(count):
        value = draw(argument_objects)
        text = orjson.dumps(value).decode()
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        name = draw(st.sampled_from(["read", "write"]))
        expected.append((f"call_{i}", name, value))
        deltas = [tool(i, f"call_{i}", name, pieces[0])]
        for piece in pieces[1:]:
            noise = draw(st.integers(0, 9))
            if noise == 0:
                deltas.append(tool(i, None, None, piece))  # null identity, ignored
            elif noise == 1:
                deltas.append(tool(OMIT, f"call_{i}", OMIT, piece))  # by id, no index
            else:
                deltas.append(tool(i, args=piece))
        plans.append(deltas)
    items = [chunk({"role": "assistant", "content": None})]
    while any(plans):
        plan = draw(st.sampled_from([plan for plan in plans if plan]))
        items.append(chunk({"tool_calls": [plan.pop(0)]}))
        if draw(st.integers(0, 7)) == 0:
            items.append(": keep-alive\n\n")
    items.append(chunk({}, finish=draw(st.sampled_from(["tool_calls", "tool_calls", "stop"]))))
    if draw(st.booleans()):
        items.append(chunk(choices=[], usage=USAGE))
    if draw(st.integers(0, 3)):
        items.append(DONE)
    return sse(*items), expected


tool_streams = st.one_of(noisy_streams(), planned_streams().map(lambda planned: planned[0]))


def assemble_in_pieces(data: bytes, cuts: list[int], policy: str = "strict") -> dict:
    stream = StreamAssembler("sse", (policy,))
    start = 0
    for cut in sorted(set(cuts)):
        stream.feed(data[start:cut])
        start = cut
    stream.feed(data[start:])
    stream.close()
    return stream.results[policy].to_dict()


def whole(data: bytes, policy: str = "strict") -> dict:
    return assemble(data, fmt="sse", policy=policy).to_dict()


# -- cutting and line endings ----------------------------------------------------------------

REALISTIC = [
    (FIXTURES / name).read_bytes()
    for name in (
        "weather_call.sse",
        "ambiguous_continuation.sse",
        "mismatched_bracket.sse",
        "cut_mid_frame.sse",
    )
] + [
    '\ufeff: hi\n\ndata: {"choices":[{"delta":{"content":"Zürich 東京 😀"}}]}\n\n'
    'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'.encode(),
    b'data: {"choices":[{"delta":{"content":"\xff bad byte"},"finish_reason":"stop"}]}\n\n',
]


@SETTINGS
@given(st.sampled_from(REALISTIC), st.lists(st.integers(0, 2000), max_size=40))
def test_any_split_of_realistic_bytes_gives_the_same_result(data, cuts):
    cuts = [cut % (len(data) + 1) for cut in cuts]
    assert assemble_in_pieces(data, cuts) == whole(data)


@SETTINGS
@given(tool_streams, st.lists(st.integers(0, 5000), max_size=30))
def test_any_split_of_generated_bytes_gives_the_same_result(data, cuts):
    cuts = [cut % (len(data) + 1) for cut in cuts]
    assert assemble_in_pieces(data, cuts) == whole(data)


def test_feeding_byte_by_byte_gives_the_same_result_for_every_fixture():
    for data in REALISTIC:
        assert assemble_in_pieces(data, list(range(len(data)))) == whole(data)


@SETTINGS
@given(tool_streams, st.sampled_from(["\r\n", "\r"]), st.integers(1, 9))
def test_lf_crlf_and_cr_line_endings_give_the_same_result(data, newline, size):
    other = data.replace(b"\n", newline.encode())
    expected = whole(data)
    assert whole(other) == expected
    assert assemble(other, fmt="sse", chunk_bytes=size).to_dict() == expected


# -- invariants of generated tool-call streams -----------------------------------------------


def check_invariants(result: dict) -> None:
    events = result["events"]
    calls = result["calls"]
    assert {e["type"] for e in events} <= EVENT_TYPES
    assert {a["kind"] for a in result["anomalies"]} <= set(ANOMALY_KINDS)
    for event in events:
        if event["type"] in CALL_EVENT_TYPES:
            assert 0 <= event["call"] < len(calls)

    starts = [e for e in events if e["type"] == "toolcall_start"]
    assert sorted(e["call"] for e in starts) == [
        position for position, call in enumerate(calls) if call["started_frame"] is not None
    ]
    for event in starts:
        assert event["frame"] == calls[event["call"]]["started_frame"]
    # Started calls come first, in start order.
    started = [call["started_frame"] for call in calls if call["started_frame"] is not None]
    assert started == sorted(started)
    assert all(call["started_frame"] is None for call in calls[len(started) :])
    assert [e["call"] for e in starts] == list(range(len(started)))
    for call in calls:
        if call["settled_frame"] is not None:
            assert call["started_frame"] is not None
            assert call["settled_frame"] >= call["started_frame"]

    ends = [i for i, e in enumerate(events) if e["type"] == "toolcall_end"]
    refusals = [i for i, e in enumerate(events) if e["type"] == "refusal"]
    if result["outcome"] == "refused":
        assert result["refusal"] is not None
        assert refusals == [len(events) - 1]
        assert events[-1]["refusal"] == result["refusal"]
        assert ends == []
    else:
        assert result["outcome"] == "ok"
        assert result["refusal"] is None
        assert refusals == []
        assert [events[i]["call"] for i in ends] == list(range(len(calls)))
        start_at = {e["call"]: i for i, e in enumerate(events) if e["type"] == "toolcall_start"}
        for i in ends:
            assert start_at[events[i]["call"]] < i
        for call in calls:
            assert call["id"] and call["name"]
            assert isinstance(call["arguments"], dict)
            assert call["invalid_at"] is None
    # Events come in frame order, but for those the end of the stream adds.
    end_kinds = ("missing_done", "finish_mismatch")
    ordered = [
        e["frame"]
        for e in events
        if e["type"] not in ("refusal", "toolcall_end")
        and not (e["type"] == "anomaly" and e["anomaly"]["kind"] in end_kinds)
    ]
    assert ordered == sorted(ordered)


@SETTINGS
@given(tool_streams, st.sampled_from(["strict", "lenient"]))
def test_random_tool_call_deltas_always_give_a_result_that_keeps_the_invariants(data, policy):
    check_invariants(whole(data, policy))


@SETTINGS
@given(planned_streams(), st.integers(1, 64))
def test_well_formed_interleaved_calls_assemble_to_exactly_the_planned_calls(planned, size):
    data, expected = planned
    result = assemble(data, fmt="sse", chunk_bytes=size).to_dict()
    assert result["outcome"] == "ok", result["refusal"]
    got = sorted((c["id"], c["name"], c["arguments"]) for c in result["calls"])
    assert got == sorted(expected, key=lambda call: call[0])
    check_invariants(result)


@SETTINGS
@given(tool_streams)
def test_lenient_equals_strict_whenever_it_made_no_guess(data):
    strict = whole(data, "strict")
    lenient = whole(data, "lenient")
    guessed = any(a["kind"] == "guessed_continuation" for a in lenient["anomalies"])
    if strict["refusal"] and strict["refusal"]["code"] == "AMBIGUOUS_CONTINUATION":
        assert guessed
    if not guessed:
        strict.pop("policy")
        lenient.pop("policy")
        assert lenient == strict
    twin = lenient_twin(assemble(data, fmt="sse"))
    assert (twin is None) == guessed
    if twin is not None:
        assert twin.to_dict() == whole(data, "lenient")


@SETTINGS
@given(st.lists(chunks(), max_size=8))
def test_json_lines_and_sse_agree_on_the_same_chunks(items):
    as_sse = sse(*items, DONE)
    as_jsonl = ("\n".join([data_line(item)[6:] for item in items] + ["[DONE]"]) + "\n").encode()
    from_sse = whole(as_sse)
    from_jsonl = assemble(as_jsonl, fmt="jsonl").to_dict()
    assert from_jsonl == from_sse
