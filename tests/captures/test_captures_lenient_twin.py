"""The stored lenient assembly when the writer reads a stream under strict only
(`CaptureWriter._results`): strict's twin, sharing its events and their spill,
or read again from the bytes where strict made a refusal lenient does not
make.  Either way it is what assembling the stream under lenient stores."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
from migrations_helper import migrate_to, migrate_to_latest

from inspector.assembly import LENIENT, STRICT, assemble
from inspector.captures.intake import store_upload
from inspector.captures.models import Assembly, Call, Capture, twin_document
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db

HERE = Path(__file__).resolve().parent
DEMO = HERE.parents[1] / "inspector/captures/demo"
STREAMS = {
    # strict refuses AMBIGUOUS_CONTINUATION: lenient guesses and goes on
    "ambiguous": (HERE.parents[1] / "inspector/captures/demo/ambiguous_continuation.sse"),
    # strict refuses SPLICED_STREAM: lenient closes the first message and goes on
    "spliced": HERE.parent / "conformance/messages/spliced_message_start_strict.sse",
    # refused by both alike, naming a call (its timeline notes the refusal): the twin
    "conflict": HERE.parent / "conformance/gemini/different_name_while_streaming_conflict.sse",
    "cut": HERE.parent / "conformance/responses/cut_before_terminal_incomplete_stream.sse",
    "ok": HERE.parent / "conformance/gemini/parallel_whole_calls_with_ids.sse",
}

CALL_FIELDS = ("position", "call_id", "name", "arguments_text", "fragment_count", "timeline")


def stored_assembly(capture: Capture, policy: str) -> tuple:
    assembly = capture.assemblies.get(policy=policy)
    calls = list(assembly.calls.order_by("position").values_list(*CALL_FIELDS))
    return orjson.loads(assembly.document()), assembly.outcome, assembly.refusal_code, calls


@pytest.mark.parametrize("name", list(STREAMS))
@pytest.mark.parametrize("batch", [1, 1000])
def test_the_stored_lenient_assembly_is_lenient_s_own(settings, name, batch):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = batch  # 1: every frame's events spilled apart
    data = STREAMS[name].read_bytes()
    (capture,) = store_upload(data, name=f"{name}.sse")
    for policy in (STRICT, LENIENT):
        document, outcome, code, calls = stored_assembly(capture, policy)
        expected = assemble(data, fmt="sse", policy=policy).to_dict()
        assert document == expected
        assert (outcome, code) == (expected["outcome"], (expected["refusal"] or {}).get("code", ""))
        assert [call[:4] for call in calls] == [
            (position, c["id"] or "", c["name"] or "", c["arguments_text"])
            for position, c in enumerate(expected["calls"])
        ]
    strict, lenient = (stored_assembly(capture, policy) for policy in (STRICT, LENIENT))
    parted = name in ("ambiguous", "spliced")
    assert (strict[0]["events"] != lenient[0]["events"]) == parted
    # The refusal is noted once on the call it names, whichever policy is stored last.
    for document, _, _, calls in (strict, lenient):
        named = (document["refusal"] or {}).get("call")
        for call in calls:
            noted = [entry["event"] for entry in call[5]].count("refusal")
            assert noted == (call[0] == named)
    assert capture.lenient_outcome == lenient[1]


LIVE_STREAMS = {**STREAMS, "thinking": DEMO / "messages_parallel_calls_ok.sse"}


@pytest.mark.parametrize("name", list(LIVE_STREAMS))
def test_a_live_capture_stores_lenient_s_own_assembly_too(name):
    """A live recording keeps its events in memory and writes their text
    down batch by batch (`EventSpill.follow`): what it stores, for each
    policy, is what an upload of the same bytes stores, the calls'
    timelines and the text lane included."""
    data = LIVE_STREAMS[name].read_bytes()
    live = LiveCapture.open(stream_format="sse")
    for start in range(0, len(data), 37):  # reads cut anywhere
        live.append_reads([(data[start : start + 37], time.monotonic())])
    live.close()
    capture = Capture.objects.get(pk=live.capture.pk)
    (uploaded,) = store_upload(data, name=f"{name}.sse")
    for policy in (STRICT, LENIENT):
        document, outcome, _, calls = stored_assembly(capture, policy)
        assert document == assemble(data, fmt="sse", policy=policy).to_dict()
        assert outcome == document["outcome"] and len(calls) == len(document["calls"])
        assert calls == stored_assembly(uploaded, policy)[3]
    prose = [c.assemblies.get(policy=STRICT).timeline["prose"] for c in (capture, uploaded)]
    assert prose[0] == prose[1]


def test_a_live_capture_writes_down_events_held_for_a_call_not_started_yet():
    """Events naming an id-less call are held until the call gets its
    number (`EventLog.numbered`); written down later, they keep their place."""
    chat = [
        {"content": "a"},
        {"tool_calls": [{"index": 0, "id": "", "function": {"arguments": "{"}}]},
        {"content": "b"},
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f"}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]},
    ]
    frames = [{"choices": [{"index": 0, "delta": delta}]} for delta in chat]
    data = b"".join(b"data: " + orjson.dumps(f) + b"\n\n" for f in frames) + b"data: [DONE]\n\n"
    live = LiveCapture.open(stream_format="sse")
    for line in data.splitlines(keepends=True):
        live.append_reads([(line, time.monotonic())])
    log = live.writer.strict.events
    assert any(type(item) is not tuple and item.type == "identity_ignored" for item in log.items)
    live.close()
    document = orjson.loads(
        Capture.objects.get(pk=live.capture.pk).assemblies.get(policy=STRICT).result_json
    )
    assert document == assemble(data, fmt="sse").to_dict()


@pytest.mark.parametrize("name", ["conflict", "ok"])
def test_a_twin_is_strict_s_rows_under_lenient_s_name(name):
    """The twin is copied from strict's rows in the database (`twin_rows`):
    every column but its name, its document's and the timeline drawn for
    strict only."""
    (capture,) = store_upload(STREAMS[name].read_bytes(), name=f"{name}.sse")
    strict, lenient = (capture.assemblies.get(policy=policy) for policy in (STRICT, LENIENT))
    own = {"id", "policy", "timeline", "result_json"}
    columns = [f.attname for f in Assembly._meta.concrete_fields if f.name not in own]
    assert [getattr(lenient, c) for c in columns] == [getattr(strict, c) for c in columns]
    assert strict.timeline is not None and lenient.timeline is None
    assert lenient.result_json is None  # no document of its own: strict's, under its name
    assert lenient.document().replace('"policy":"lenient"', '"policy":"strict"', 1) == (
        strict.result_json
    )
    fields = Call._meta.concrete_fields
    call_columns = [f.attname for f in fields if f.name not in ("id", "assembly", "twin_copy")]
    strict_calls, lenient_calls = (
        list(a.calls.order_by("position").values_list(*call_columns)) for a in (strict, lenient)
    )
    assert lenient_calls == strict_calls and strict_calls
    # Marked as copies (the search's indexes leave them out), strict's not.
    assert set(lenient.calls.values_list("twin_copy", flat=True)) == {True}
    assert set(strict.calls.values_list("twin_copy", flat=True)) == {False}


@pytest.mark.django_db(transaction=True)
def test_before_0021_a_twin_gets_its_document_written_back():
    """Migration 0021 back: the twin's document (NULL) is written out as
    strict's renamed copy before the column is NOT NULL again."""
    (capture,) = store_upload(STREAMS["ok"].read_bytes(), name="ok.sse")
    expected = capture.assemblies.get(policy=LENIENT).document()
    assert orjson.loads(expected)["policy"] == LENIENT
    try:
        apps = migrate_to(("captures", "0020_call_twin_copy"))
        old = apps.get_model("captures", "Assembly").objects.get(
            capture_id=capture.pk, policy=LENIENT
        )
        assert old.result_json == expected
    finally:
        migrate_to_latest()
    twin = Assembly.objects.get(capture=capture, policy=LENIENT)
    assert twin.result_json == expected and twin.document() == expected  # its copy kept


def test_a_twin_document_is_strict_s_text_under_its_name_or_an_error():
    """`twin_document` renames the document's first key, and refuses a text
    that does not begin with strict's policy (it would misname the twin)."""
    strict = assemble(STREAMS["ok"].read_bytes(), fmt="sse").to_dict()
    text = orjson.dumps(strict).decode()
    assert orjson.loads(twin_document(text, LENIENT)) == {**strict, "policy": LENIENT}
    with pytest.raises(ValueError, match="begins with its policy"):
        twin_document(text.replace('"policy":"strict"', '"policy":"lenient"', 1), LENIENT)
