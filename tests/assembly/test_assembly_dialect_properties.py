"""Properties of the Responses, Messages and Gemini adapters and of the JSON-array
reader over generated streams (hypothesis): whatever the events, assembly never
raises and keeps the event invariants, and cutting the bytes anywhere changes
nothing."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector.assembly import (
    ANOMALY_KINDS,
    KINDS,
    LENIENT,
    REFUSAL_CODES,
    STRICT_ONLY_REFUSALS,
    assemble,
    lenient_twin,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

fragments = st.sampled_from(['{"a":', "1}", "{}", '"x', "]", "", " ", '{"k":"ü"}', "[1]", None, 5])
names = st.sampled_from(["f", "g", "", None])
ids = st.sampled_from(["call_1", "call_2", "", None])
small = st.integers(0, 2)


def dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def sse(frames: list[tuple[str | None, dict]]) -> bytes:
    out = []
    for event, data in frames:
        out.append((f"event: {event}\n" if event else "") + "data: " + dumps(data) + "\n\n")
    return "".join(out).encode()


# -- Responses -------------------------------------------------------------------------------

item_types = st.sampled_from(
    ["function_call", "custom_tool_call", "local_shell_call", "web_search_call", "message"]
)


@st.composite
def responses_events(draw) -> dict:
    kind = draw(
        st.sampled_from(
            [
                "response.created",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.custom_tool_call_input.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_text.delta",
                "response.completed",
                "response.failed",
                "error",
            ]
        )
    )
    event: dict = {"type": kind}
    if draw(st.booleans()):
        event["sequence_number"] = draw(st.integers(0, 6))
    if "output_item" in kind:
        item = {"type": draw(item_types), "id": draw(st.sampled_from(["fc_1", "fc_2"]))}
        item.update({"call_id": draw(ids), "name": draw(names), "arguments": draw(fragments)})
        event.update(output_index=draw(small), item=item)
    elif kind.endswith((".delta", ".done")):
        if draw(st.booleans()):
            event["output_index"] = draw(small)
        event["item_id"] = draw(st.sampled_from(["fc_1", "fc_2", None]))
        event["delta" if kind.endswith(".delta") else "arguments"] = draw(fragments)
    elif kind.startswith("response.") and kind != "response.created":
        output = [{"type": "function_call", "name": draw(names), "arguments": draw(fragments)}]
        event["response"] = {"status": "completed", "output": draw(st.sampled_from([[], output]))}
    elif kind == "error":
        event["message"] = "boom"
    return event


@st.composite
def responses_streams(draw) -> bytes:
    events = draw(st.lists(responses_events(), max_size=10))
    return sse([(e["type"] if draw(st.booleans()) else None, e) for e in events])


# -- Messages --------------------------------------------------------------------------------


@st.composite
def messages_events(draw) -> dict:
    kind = draw(
        st.sampled_from(
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "ping",
            ]
        )
    )
    event: dict = {"type": kind}
    index = draw(small)
    if kind == "message_start":
        event["message"] = {"id": draw(st.sampled_from(["msg_1", "msg_2"])), "content": []}
    elif kind == "content_block_start":
        block_type = draw(st.sampled_from(["tool_use", "server_tool_use", "text"]))
        event.update(
            index=index,
            content_block={"type": block_type, "id": draw(ids), "name": draw(names), "input": {}},
        )
    elif kind == "content_block_delta":
        delta = draw(
            st.sampled_from(
                [
                    {"type": "input_json_delta", "partial_json": draw(fragments)},
                    {"type": "text_delta", "text": "hi"},
                ]
            )
        )
        event.update(index=index, delta=delta)
    elif kind == "content_block_stop":
        event["index"] = index
    elif kind == "message_delta":
        reason = draw(st.sampled_from(["tool_use", "end_turn", None, "weird"]))
        event.update(delta={"stop_reason": reason}, usage={"output_tokens": 3})
    return event


@st.composite
def messages_streams(draw) -> bytes:
    events = draw(st.lists(messages_events(), max_size=12))
    return sse([(e["type"] if draw(st.integers(0, 5)) else None, e) for e in events])


# -- Gemini ----------------------------------------------------------------------------------

pieces = st.fixed_dictionaries(
    {"jsonPath": st.sampled_from(["$.a", "$.b[0]", "$['c']", "$..x", "a"])},
    optional={
        "stringValue": st.sampled_from(["x", ""]),
        "numberValue": st.sampled_from([1, 2.5, 3.0]),
        "willContinue": st.booleans(),
    },
)
function_calls = st.fixed_dictionaries(
    {},
    optional={
        "name": names,
        "id": ids,
        "args": st.sampled_from([{}, {"a": 1}, [1], "x"]),
        "willContinue": st.booleans(),
        "partialArgs": st.lists(pieces, max_size=2),
    },
)
parts = st.one_of(
    st.builds(lambda f: {"functionCall": f}, function_calls),
    st.sampled_from([{"text": "hi"}, {"text": "t", "thought": True}, {"toolCall": {}}]),
)


@st.composite
def gemini_frames(draw) -> dict:
    candidate: dict = {"content": {"parts": draw(st.lists(parts, max_size=3))}}
    if draw(st.integers(0, 3)) == 0:
        candidate["finishReason"] = draw(st.sampled_from(["STOP", "MALFORMED_FUNCTION_CALL", "X"]))
    frame: dict = {"candidates": [candidate]}
    if draw(st.booleans()):
        frame["usageMetadata"] = draw(
            st.sampled_from([{"totalTokenCount": 3}, {"trafficType": "ON_DEMAND"}])
        )
    return frame


@st.composite
def gemini_sse(draw) -> bytes:
    return sse([(None, frame) for frame in draw(st.lists(gemini_frames(), max_size=8))])


@st.composite
def gemini_arrays(draw) -> bytes:
    frames = draw(st.lists(gemini_frames(), max_size=6))
    data = ("[" + ",\r\n".join(dumps(f) for f in frames) + "]").encode()
    if draw(st.integers(0, 2)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return data


# -- the properties --------------------------------------------------------------------------


def check(result) -> dict:
    document = result.to_dict()
    assert document["outcome"] in ("ok", "refused")
    assert {a["kind"] for a in document["anomalies"]} <= set(ANOMALY_KINDS)
    assert all(call["kind"] in KINDS for call in document["calls"])
    events = document["events"]
    if document["outcome"] == "refused":
        assert document["refusal"]["code"] in REFUSAL_CODES
        assert [e["type"] for e in events].count("refusal") == 1
        assert events[-1]["type"] == "refusal"
    else:
        ends = [e["call"] for e in events if e["type"] == "toolcall_end"]
        assert ends == list(range(len(document["calls"])))
    return document


def same_whatever_the_cut(data: bytes, fmt: str, dialect: str, size: int) -> None:
    whole = check(assemble(data, fmt=fmt, dialect=dialect))
    cut = assemble(data, fmt=fmt, dialect=dialect, chunk_bytes=size).to_dict()
    assert cut == whole
    assert assemble(data, fmt=fmt).to_dict()["dialect"] in (dialect, "chat")


@SETTINGS
@given(responses_streams(), st.integers(1, 9))
def test_responses_streams_never_raise_and_cut_anywhere_the_same(data, size):
    same_whatever_the_cut(data, "sse", "responses", size)


@SETTINGS
@given(messages_streams(), st.integers(1, 9))
def test_messages_streams_never_raise_and_cut_anywhere_the_same(data, size):
    same_whatever_the_cut(data, "sse", "messages", size)


@SETTINGS
@given(gemini_sse(), st.integers(1, 9))
def test_gemini_streams_never_raise_and_cut_anywhere_the_same(data, size):
    same_whatever_the_cut(data, "sse", "gemini", size)


@SETTINGS
@given(gemini_arrays(), st.integers(1, 9))
def test_json_array_streams_never_raise_and_cut_anywhere_the_same(data, size):
    same_whatever_the_cut(data, "json-array", "gemini", size)


@SETTINGS
@given(st.binary(max_size=200), st.sampled_from(["responses", "messages", "gemini", "auto"]))
def test_any_bytes_as_a_json_array_never_raise(data, dialect):
    check(assemble(b"[" + data, fmt="json-array", dialect=dialect))
    check(assemble(data, fmt="json-array", dialect=dialect, chunk_bytes=3))


tricky_text = st.text(alphabet='{}[],:" \\\r\na', max_size=12)


@SETTINGS
@given(st.lists(tricky_text, max_size=5), st.integers(1, 9), st.booleans())
def test_json_array_elements_with_brackets_in_strings_read_the_same_cut_anywhere(texts, size, cut):
    frames = [{"candidates": [{"content": {"parts": [{"text": text}]}}]} for text in texts]
    data = ("[" + ", ".join(dumps(f) for f in frames) + "]").encode()
    if cut:
        data = data[: len(data) // 2]
    whole = check(assemble(data, fmt="json-array", dialect="gemini"))
    assert assemble(data, fmt="json-array", dialect="gemini", chunk_bytes=size).to_dict() == whole
    if not cut:
        assert whole["text"] == "".join(texts)


# -- lenient as strict's twin ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
STREAM_FILES = sorted(
    path
    for folder in ("tests/conformance", "tests/assembly/fixtures", "inspector/captures/demo")
    for path in (ROOT / folder).rglob("*")
    if path.suffix in (".sse", ".jsonl", ".json") and not path.name.endswith(".expect.json")
)


def twin_is_lenient(data: bytes, fmt: str = "auto", dialect: str = "auto") -> bool:
    """Strict's twin is lenient's own result, or strict made a refusal only
    strict makes; whether the policies parted."""
    strict = assemble(data, fmt=fmt, dialect=dialect)
    lenient = assemble(data, fmt=fmt, dialect=dialect, policy=LENIENT)
    twin = lenient_twin(strict)
    if twin is None:
        assert strict.refusal.code in STRICT_ONLY_REFUSALS
        return True
    assert twin.to_dict() == lenient.to_dict()
    return False


def test_lenient_is_strict_twin_on_every_stream_file_short_of_a_strict_only_refusal():
    parted = [path.name for path in STREAM_FILES if twin_is_lenient(path.read_bytes())]
    assert len(STREAM_FILES) > 70
    assert "ambiguous_continuation.sse" in parted  # the demo and the fixture


@SETTINGS
@given(
    st.one_of(
        responses_streams().map(lambda data: (data, "sse", "responses")),
        messages_streams().map(lambda data: (data, "sse", "messages")),
        gemini_sse().map(lambda data: (data, "sse", "gemini")),
        gemini_arrays().map(lambda data: (data, "json-array", "gemini")),
    )
)
def test_lenient_is_strict_twin_on_generated_dialect_streams(stream):
    twin_is_lenient(*stream)
