"""EventLog.drain (events handed out and forgotten as a stream goes), and
equal frames held as one while `auto` has not decided the dialect."""

from __future__ import annotations

import orjson
import pytest

from inspector.assembly import STRICT, Assembler, StreamAssembler, assemble
from inspector.assembly.frames import FrameKind, classify


def _sse(*payloads: dict) -> bytes:
    return b"".join(b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)


def _chat(delta: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


ID_LESS = _chat({"tool_calls": [{"index": 0, "id": "", "function": {"arguments": "{"}}]})
STREAM = (
    _sse(_chat({"content": "a"}), _chat({"content": "b"}), ID_LESS)
    + _sse(*(_chat({"content": "c"}) for _ in range(5)))
    + _sse(_chat({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f"}}]}))
    + _sse(_chat({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}))
    + _sse(_chat({}, "tool_calls"))
    + b"data: [DONE]\n\n"
)


def _drained_document(data: bytes) -> tuple[list[dict], dict]:
    stream = StreamAssembler("sse", (STRICT,))
    events: list[dict] = []
    for start in range(0, len(data), 40):
        stream.feed(data[start : start + 40])
        events += stream.assemblers[STRICT].events.drain()
    stream.close()
    result = stream.results[STRICT]
    events += result.events.drain()
    return events, result.to_dict(events=False)


def test_drained_events_are_the_documents_events_in_order():
    events, document = _drained_document(STREAM)
    whole = assemble(STREAM, fmt="sse").to_dict()
    assert events == whole.pop("events")
    assert document == whole


def test_drain_stops_at_an_event_naming_a_call_without_its_number():
    stream = StreamAssembler("sse", (STRICT,))
    stream.feed(STREAM[: STREAM.index(b"c1") - 60])  # the id-less call has not started
    log = stream.assemblers[STRICT].events
    drained = log.drain()
    assert [event["type"] for event in drained] == ["text_delta", "text_delta"]
    held = len(log.items)
    assert held > 1 and log[log.drained].type == "identity_ignored"
    assert log.drain() == [] and len(log) == 2 + held


def test_numbered_events_are_what_drain_hands_out_but_kept():
    stream = StreamAssembler("sse", (STRICT,))
    stream.feed(STREAM[: STREAM.index(b"c1") - 60])  # the id-less call has not started
    log = stream.assemblers[STRICT].events
    kept = log.numbered(0)
    assert [event["type"] for event in kept] == ["text_delta", "text_delta"]
    assert log.numbered(1) == kept[1:] and log.drained == 0 and log[0].type == "text_delta"
    assert log.drain() == kept and log.numbered(2) == []
    with pytest.raises(IndexError):
        log.numbered(1)


def test_drained_events_are_not_read_again():
    stream = StreamAssembler("sse", (STRICT,))
    stream.feed(STREAM)
    stream.close()
    result = stream.results[STRICT]
    first = len(result.events)
    result.events.drain()
    assert len(result.events) == first
    with pytest.raises(IndexError):
        result.events[0]
    with pytest.raises(IndexError):
        result.to_dict()


def test_equal_undecided_frames_are_held_as_one_and_replayed_each():
    assembler = Assembler(STRICT)
    raw = 'data: {"x": 1}'
    for number in range(1000):
        assembler.feed(classify(number, raw, '{"x": 1}'))
    assert assembler._held is not None and len(assembler._held) == 1
    decided = '{"type": "response.created", "sequence_number": 0, "response": {}}'
    assembler.feed(classify(1000, decided, decided, event="response.created"))
    result = assembler.finish()
    data = b'data: {"x": 1}\n\n' * 1000 + b"event: response.created\ndata: " + decided.encode()
    assert result.to_dict() == assemble(data + b"\n\n", fmt="sse").to_dict()
    assert result.dialect == "responses" and result.frames == 1001


def test_a_held_run_breaks_where_frames_differ():
    assembler = Assembler(STRICT)
    for number, data in enumerate(["{}", "{}", "[]", "{}", "{}"]):
        assembler.feed(classify(number, "data: " + data, data))
    assert [count for _, count in assembler._held or []] == [2, 1, 2]
    assert assembler.finish().frames == 5
    assert classify(0, "data: []", "[]").kind is FrameKind.INVALID
