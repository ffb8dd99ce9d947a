"""An upload is stored as it is read without holding the stream's events and
small texts to the end (captures/spill.py, `StreamAssembler.compact`), and
what it stores is exactly what assembling it whole stores."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from inspector.assembly import POLICIES, STRICT, StreamAssembler
from inspector.captures import models, spill, store
from inspector.captures.intake import store_upload
from inspector.captures.writer import CaptureWriter

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"


def _sse(*payloads: dict, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return b"".join(head + b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads)


def _chat(delta: dict, finish: str | None = None, index: int = 0) -> dict:
    return {"model": "m", "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def _piece(index: int, arguments: str, **fields: str) -> dict:
    return _chat({"tool_calls": [{"index": index, **fields, "function": {"arguments": arguments}}]})


LONG_TEXT = _sse(*(_chat({"content": f"w{n} "}) for n in range(300)), _chat({}, "stop"))
LONG_TOOL = (
    _sse(_piece(0, '{"a": "', id="call_1"))
    + _sse(_chat({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": ""}}]}))
    + _sse(*(_piece(0, "x\\u00e9y") for _ in range(200)))
    + _sse(_piece(0, '"}'), _chat({}, "tool_calls"))
    + b"data: [DONE]\n\n"
)
# A call with no id or name yet when an anomaly names it (its number comes at
# the end), then many frames after it: the drain must hold back from it on.
UNSTARTED_FIRST = (
    _sse(_chat({"tool_calls": [{"index": 0, "function": {"arguments": '{"k"'}}]}))
    + _sse(*(_chat({"content": "t"}) for _ in range(50)))
    + _sse(_piece(0, ": 1}", id="late", **{}), _chat({}, "tool_calls"))
    + b"data: [DONE]\n\n"
)
# Frames that name no dialect, held (as one run) until a Responses frame decides.
UNDECIDED_THEN_RESPONSES = b"data: {}\n\n" * 40 + _sse(
    {"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "x"}},
    event="response.created",
)
STREAMS = {
    **{path.stem: path.read_bytes() for path in sorted(DEMO.glob("*.sse"))},
    "long_text": LONG_TEXT,
    "long_tool": LONG_TOOL,
    "unstarted_first": UNSTARTED_FIRST,
    "undecided_then_responses": UNDECIDED_THEN_RESPONSES,
    "only_undecided": b"data: {}\n\n" * 30,
}


def _stored(capture: models.Capture) -> dict:
    """Everything a capture's pages and API read, but ids and times."""
    assemblies = capture.assemblies.order_by("policy")
    calls = models.Call.objects.filter(assembly__capture=capture).order_by("assembly__policy")
    fragments = models.Fragment.objects.filter(capture=capture)
    return {
        "capture": models.Capture.objects.filter(pk=capture.pk).values(
            "frame_count", "outcome", "refusal_code", "lenient_outcome", "dialect", "model"
        )[0],
        "raw": bytes(models.Capture.objects.get(pk=capture.pk).raw),
        "frames": list(
            capture.frames.order_by("number").values_list(
                "number", "kind", "raw", "arrived_ms", "calls", "marks"
            )
        ),
        "assemblies": list(assemblies.values().order_by("policy")),
        "calls": list(calls.order_by("assembly__policy", "position").values()),
        "fragments": list(fragments.order_by("position", "seq").values()),
    }


def _without_ids(record: dict) -> dict:
    dropped = {"id", "capture_id", "assembly_id", "call_id", "created"}
    if "calls" in record:
        record["calls"] = [
            {k: v for k, v in row.items() if k not in dropped or k == "call_id" and "name" in row}
            for row in record["calls"]
        ]
    for key in ("assemblies", "fragments"):
        record[key] = [{k: v for k, v in row.items() if k not in dropped} for row in record[key]]
    return record


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_a_batched_upload_stores_what_assembling_it_whole_stores(name, settings, monkeypatch):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 7  # many batches, drains and compactions
    monkeypatch.setattr(spill, "SPOOL_BYTES", 64)  # and the events' file on disk
    data = STREAMS[name]
    (uploaded,) = store_upload(data, name="stream.sse")
    reference = store.store_stream(data, stream_format="sse")
    assert _without_ids(_stored(uploaded)) == _without_ids(_stored(reference))


def test_a_spilling_writer_keeps_no_event_or_piece_per_frame(settings):
    writer = CaptureWriter.open(stream_format="sse", keep_bytes=False, spill=True)
    for start in range(0, len(LONG_TOOL), 3000):  # about 30 frames a batch
        writer.feed(LONG_TOOL[start : start + 3000])
        writer.flush()
    strict = writer.stream.assemblers[STRICT]
    (call,) = strict.calls
    assert len(call.fragment_frames) == 202  # every fragment is still told
    assert len(call.pieces) < 15 and len(strict.events.items) < 15
    assert strict.events.drained > 200
    writer.finish(LONG_TOOL, finished=False)
    row = models.Call.objects.get(assembly__capture=writer.capture, assembly__policy=STRICT)
    assert row.fragment_count == 202 and row.fragments.count() == 202


def test_text_is_joined_as_the_stream_goes_and_the_result_is_unchanged():
    stream = StreamAssembler("sse", POLICIES)
    for start in range(0, len(LONG_TEXT), 5000):  # about 60 frames at a time
        stream.feed(LONG_TEXT[start : start + 5000])
        stream.compact()
    stream.close()
    choice = stream.results[STRICT].choices[0]
    whole = StreamAssembler("sse", POLICIES)
    whole.feed(LONG_TEXT)
    whole.close()
    assert len(choice.text) < 10 < 300 == len(whole.results[STRICT].choices[0].text)
    for policy in POLICIES:
        assert stream.results[policy].to_dict() == whole.results[policy].to_dict()


def test_a_body_is_read_in_the_size_it_declared_and_still_held_to_the_limit(settings):
    import io

    from inspector.captures.uploads import TooLarge, read_capped

    settings.INSPECTOR_MAX_UPLOAD_BYTES = 100
    asked: list[int] = []

    def reader(body: bytes):
        stream = io.BytesIO(body)

        def read(size: int) -> bytes:
            asked.append(size)
            return stream.read(size)

        return read

    assert read_capped(reader(b"x" * 10), 10) == b"x" * 10 and asked == [11]
    assert read_capped(reader(b"x" * 30), 10) == b"x" * 30  # longer than declared: read on
    with pytest.raises(TooLarge):
        read_capped(reader(b"x" * 101), 10)
    with pytest.raises(TooLarge):
        read_capped(reader(b"x" * 101))
