"""Storing a stream: assemble it once under every policy, then save the
capture, its frames, its assemblies, their calls and the strict calls'
argument fragments in one transaction.  A failure leaves nothing behind.

Data flows one way: intake hands bytes here, the pure assembler says what
they mean, and this module writes it down for the pages to read.
"""

from __future__ import annotations

import heapq
import re
from array import array
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence, Set
from itertools import groupby, repeat
from operator import itemgetter
from typing import IO, Any

import orjson
from django.db import transaction
from django.utils import timezone

from inspector.assembly import (
    AUTO_DIALECT,
    JSON_ARRAY,
    JSONL,
    LENIENT,
    POLICIES,
    STRICT,
    FrameKind,
    Result,
    read_stream,
)
from inspector.assembly import Call as AssembledCall
from inspector.assembly import Frame as StreamFrame
from inspector.assembly.jsontext import compact, dumps

from . import models
from .blob_io import write_json_text, write_raw
from .call_forms import call_columns
from .dialects import dialect_basis
from .fast_rows import IN_PROCESS, RowSink, insert_rows
from .fragment_rows import FRAGMENT_FIELDS, FragmentLog, fragment_text
from .frame_did import FrameDid, carries_text, did_by_frame
from .spill import EventSpill
from .timeline_data import ProseFrames, arrival_times, frame_marks, summarize
from .timelines import Timelines, timelines, with_refusal
from .twin_rows import copy_twin
from .writes import write_step, writing

BATCH = 2000


def assemble_stream(
    data: bytes, stream_format: str, dialect: str = AUTO_DIALECT, hint: str | None = None
) -> tuple[list[StreamFrame], dict[str, Result]]:
    """Read the stream once and assemble it under every stored policy."""
    return read_stream(data, stream_format, POLICIES, dialect=dialect, hint=hint)


def store_stream(
    data: bytes,
    *,
    stream_format: str,
    input_format: str | None = None,
    arrived_ms: Sequence[float | None] | None = None,
    dialect: str = AUTO_DIALECT,
    hint: str | None = None,
    **meta: Any,
) -> models.Capture:
    """Assemble `data` and store it all; returns the saved capture.

    `dialect` forces one (else `auto`); `hint` is the dialect the input names
    (a HAR entry's request URL).  `meta` are further Capture fields (title,
    source, har_upload, source_url, ...).
    """
    # Assembled before the transaction opens: on SQLite (BEGIN IMMEDIATE, see settings)
    # the transaction holds the database's one write lock, for writing only.
    frames, results = assemble_stream(data, stream_format, dialect, hint)
    with writing(), transaction.atomic():
        capture = models.Capture.objects.create(
            input_format=input_format or stream_format,
            stream_format=stream_format,
            dialect_basis=dialect_basis(frames, dialect, hint),
            **_summary(data, model_name(frames), results),
            **_clean_meta(meta),
        )
        touched, marks = _frame_marks(results[STRICT])
        did = stored_did(results[STRICT])
        _store_frames(capture, frames, arrived_ms, touched, marks, did)
        _store_results(capture, results, fragments=FragmentLog())
    return capture


def open_capture(
    *, stream_format: str, input_format: str | None = None, **meta: Any
) -> models.Capture:
    """A capture whose bytes are still arriving (proxy, ingest)."""
    return models.Capture.objects.create(
        input_format=input_format or stream_format,
        stream_format=stream_format,
        outcome=models.Capture.Outcome.LIVE,
        raw=b"",
        **_clean_meta(meta),
    )


def append_frames(
    capture: models.Capture,
    frames: list[StreamFrame],
    arrived_ms: Sequence[float | None],
    did: FrameDid | None = None,
    *,
    live: bool = False,
    calls: dict[int, list[int]] | None = None,
    rows: RowSink = IN_PROCESS,
) -> None:
    """Store frames as they complete (a live recording's batch, an upload's
    step), with what they did (`did`: `frame_did.did_by_frame` of the events
    they caused) and the calls they touched as far as known (`calls`: the
    positions of the started calls each touched); their marks, and the calls
    of frames whose calls were not known yet, are written when the capture
    closes (`close_capture`'s `rewrite`).

    Through the database's fast path, not `bulk_create` (a model instance per
    row and an INSERT compiled per batch cost several times the writing):
    `fast_rows.insert_rows`, COPY on PostgreSQL; on SQLite `executemany`, or
    INSERTs of many rows when `live` (other threads wait less).  The JSON
    columns get compact JSON text (`jsontext.compact`: orjson's, 13x
    faster than `json.dumps` on a frame's items); a frame's calls are
    mostly one call, so each list of positions is written once.  `rows`:
    where they go (this process's connection, or a step a writer process
    writes: `step_writers.py`)."""
    did, calls = did or {}, calls or {}
    call_texts: dict[tuple[int, ...], str] = {}
    for positions in calls.values():
        key = tuple(positions)
        if key not in call_texts:
            call_texts[key] = compact(positions)
    calls_text = {number: call_texts[tuple(positions)] for number, positions in calls.items()}
    no_items: list[list[Any]] = []
    capture_pk = capture.pk  # a property: asked once, not per row
    values = (
        (capture_pk, frame.number, frame.kind.value, _text(frame.raw), at,
         calls_text.get(frame.number, "[]"), "[]",
         compact(items := did.get(frame.number, no_items)), carries_text(items))
        for frame, at in zip(frames, arrived_ms, strict=True)
    )  # fmt: skip
    rows.insert(models.Frame, FRAME_FIELDS, values, one_statement=live)


# A frame row's columns in the order `append_frames` writes them.
FRAME_FIELDS = (
    *("capture", "number", "kind", "raw", "arrived_ms"),
    *("calls", "marks", "did", "has_text"),
)


def stored_did(result: Result) -> FrameDid:
    """What each frame did, from a result that still holds all its events."""
    calls = result.calls
    return did_by_frame(result.events.items, lambda position: calls[position].name)


def close_capture(
    capture: models.Capture,
    data: bytes,
    model: str,
    results: dict[str, Result],
    *,
    finished: bool = True,
    spills: dict[str, EventSpill] | None = None,
    untitled: Callable[[models.Capture], str] | None = None,
    rewrite: Set[int] | None = None,
    late_did: FrameDid | None = None,
    arrived: Sequence[float] | None = None,
    fragments: FragmentLog | None = None,
    **meta: Any,
) -> models.Capture:
    """Write what the assembly of a finished capture says (`model`: its
    frames' `model_name`; `spills`: per policy, the events the writer
    drained as it went, the rest drained here).  The frames' calls and marks are written in
    transactions of BATCH frames each (a capture of a million tool-call frames
    never holds the write lock for the whole update); the capture's summary
    and its assemblies in one last transaction.  Each step can be run again,
    so a capture whose closing failed stays live for `recover_live`.
    `finished=False` (an upload) leaves `finished` unset.  `untitled` names a
    capture left without a title, from its summary: here, before its raw
    bytes are written, since on SQLite any later UPDATE of the row builds
    the whole row in memory again, raw bytes included.  `rewrite`: when
    the frames were stored with the calls they touched (`append_frames`'s
    `calls`), the frames whose calls may have changed since; only they and
    the marked frames are written again.  None: those of every frame that
    touched a call or has a mark (the others keep what they were stored
    with: no call is taken from a frame, since a call's frames only grow).
    `late_did`: items of frames stored before the events that name them
    were filed (the end's own: a missing `[DONE]` names the last frame),
    added to what those frames did.  `arrived`: each frame's arrival time
    by number, when the caller holds them all (a live writer); else the
    timeline reads them back from the stored frames.  `fragments`: what of
    the strict calls' fragments a live writer wrote as it went (the close
    writes the rest); None: rows may be stored that nobody here wrote (a
    recovered capture), so they are all written again."""
    _update_frame_marks(capture, results[STRICT], rewrite)
    with writing(), transaction.atomic():
        _add_frame_did(capture, late_did or {})
        for field, value in {**_summary(data, model, results), **_clean_meta(meta)}.items():
            setattr(capture, field, value)
        if untitled is not None and not capture.title:
            capture.title = _text(untitled(capture)[:200])
        if finished:
            capture.finished = timezone.now()
        capture.raw = b""
        capture.save()
        write_raw(capture, data)
        _store_results(capture, results, spills, arrived, fragments or FragmentLog(known=False))
    return capture


def _add_frame_did(capture: models.Capture, late: FrameDid) -> None:
    """Append `late`'s items to the stored frames' `did` (a few frames)."""
    # Not `capture.frames` with `only()`: a related manager reads each row's deferred
    # `capture_id` back, a query a frame.
    late_frames = models.Frame.objects.filter(capture=capture, number__in=list(late))
    for frame in late_frames.only("number", "did"):
        did = [*frame.did, *late[frame.number]]
        capture.frames.filter(pk=frame.pk).update(did=did, has_text=carries_text(did))


def _update_frame_marks(
    capture: models.Capture, result: Result, rewrite: Set[int] | None = None
) -> None:
    """Write each frame's calls and marks (with `rewrite`, only those of the
    marked frames and of the frames it holds: see `close_capture`): one
    UPDATE per run of frames that share a value (a call's fragments are
    mostly one long run), at most BATCH frames per transaction.
    (`bulk_update`, a CASE per row, took 4x the whole upload's time for 100k
    tool-call frames.)  The frames of each value are kept as an array of
    numbers (8 bytes a frame)."""
    groups: dict[tuple, array[int]] = {}
    values = _frame_values(result) if rewrite is None else _chosen_values(result, rewrite)
    for number, calls, kinds in values:
        numbers = groups.get((calls, kinds))
        if numbers is None:
            numbers = groups[(calls, kinds)] = array("q")
        numbers.append(number)
    for (calls, kinds), numbers in groups.items():
        for start in range(0, len(numbers), BATCH):
            batch = numbers[start : start + BATCH]
            with write_step():  # the close's last commit waits
                _frames_numbered(capture, batch).update(calls=list(calls), marks=list(kinds))


def _frame_values(result: Result) -> Iterator[tuple[int, tuple[int, ...], tuple[str, ...]]]:
    """(frame, the calls it touched, its marks) of each frame that has
    either, in frame order: what `_frame_marks` says, without a dict entry
    per frame (each call's frames are in order; merged, not collected)."""
    marks = frame_marks(result)
    touched = heapq.merge(*(zip(call.frames, repeat(call.position)) for call in result.calls))
    marked = ((number, None) for number in sorted(marks))
    merged = heapq.merge(touched, marked, key=itemgetter(0))
    for number, entries in groupby(merged, key=itemgetter(0)):
        calls = tuple(position for _, position in entries if position is not None)
        yield number, calls, tuple(marks.get(number, ()))


# Frames a close looks up one by one (`_chosen_values`) at most, times the
# calls: past it, it walks every frame (`_frame_values`) and skips.
LOOKUPS = 1_000_000


def _chosen_values(
    result: Result, rewrite: Set[int]
) -> Iterator[tuple[int, tuple[int, ...], tuple[str, ...]]]:
    """`_frame_values` of the marked frames and of those in `rewrite` only:
    each looked up in the calls' (ordered) frames, not every frame of the
    stream merged (most of a live close's walk, for a few frames written)."""
    marks = frame_marks(result)
    wanted = rewrite | marks.keys()
    if len(wanted) * max(1, len(result.calls)) > LOOKUPS:
        for number, calls, kinds in _frame_values(result):
            if kinds or number in rewrite:
                yield number, calls, kinds
        return
    for number in sorted(wanted):
        calls = tuple(call.position for call in result.calls if _holds(call.frames, number))
        kinds = tuple(marks.get(number, ()))
        if calls or kinds:
            yield number, calls, kinds


def _holds(frames: Sequence[int], number: int) -> bool:
    at = bisect_left(frames, number)
    return at < len(frames) and frames[at] == number


def _frames_numbered(capture: models.Capture, numbers: Sequence[int]) -> Any:
    """The capture's frames with these (sorted) numbers: a range when they
    follow each other."""
    if numbers[-1] - numbers[0] == len(numbers) - 1:
        return capture.frames.filter(number__gte=numbers[0], number__lte=numbers[-1])
    return capture.frames.filter(number__in=list(numbers))


def stored_stream(capture: models.Capture) -> bytes:
    """A capture's stored frames joined back into a stream: each SSE block
    ends in a blank line, each JSON Lines line in LF.  (What a live capture
    has before it closes; NULs were stored as U+FFFD, CRLF as LF.)"""
    rows = capture.frames.order_by("number").values_list("raw", flat=True).iterator()
    if capture.stream_format == JSON_ARRAY:
        text = "[" + ",\r\n".join(rows) + "]"
    else:
        separator = "\n" if capture.stream_format == JSONL else "\n\n"
        text = "".join(raw + separator for raw in rows)
    return text.encode("utf-8", "surrogatepass")


def _summary(data: bytes, model: str, results: dict[str, Result]) -> dict:
    strict = results[STRICT]
    return {
        "model": _text(model[:200]),
        "byte_size": len(data),
        "frame_count": strict.frames,
        "outcome": strict.outcome,
        "refusal_code": strict.refusal.code if strict.refusal else "",
        "retryable": strict.refusal.retryable if strict.refusal else None,
        "lenient_outcome": results[LENIENT].outcome,
        "dialect": strict.dialect,
        "raw": data,
    }


def _clean_meta(meta: dict[str, Any]) -> dict[str, Any]:
    limits = {"title": 200, "provider": 100, "upstream": 100}
    return {k: _text(v[: limits[k]] if k in limits and v else v) for k, v in meta.items()}


# PostgreSQL's text and jsonb can't hold NUL (U+0000); SQLite can.  Columns
# read by pages get U+FFFD in its place, on every database; the exact stream
# stays in Capture.raw and the exact result in Assembly.result_json (JSON
# text, where NUL is escaped).
_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def _text(value: Any) -> Any:
    return fragment_text(value) if type(value) is str else value


# Integer columns hold 32 bits on PostgreSQL (64 on SQLite), but a stream may
# number a choice or a tool call with any non-negative integer.  Columns read
# by pages hold such a number clamped to the largest they take; the exact one
# stays in Assembly.result_json.
_INT_MAX = 2**31 - 1


def _int(value: Any) -> Any:
    if type(value) is int and value > _INT_MAX:
        return _INT_MAX
    return value


def _json(value: Any) -> Any:
    if value is None or type(value) in (int, float, bool):
        return value
    text = dumps(value)
    if b"\\u0000" not in text:
        return value
    return orjson.loads(_NUL_ESCAPE.sub(rb"\1\\ufffd", text))


def _store_results(
    capture: models.Capture,
    results: dict[str, Result],
    spills: dict[str, EventSpill] | None = None,
    arrived: Sequence[float] | None = None,
    fragments: FragmentLog | None = None,
) -> None:
    """Each policy's assembly; the strict one's fragments as `fragments`
    says they stand (see `close_capture`).  A policy whose result is
    strict's twin (sharing its events) is copied from strict's rows in the
    database, with no document of its own (`twin_rows.copy_twin`)."""
    stored: models.Assembly | None = None  # strict's
    for policy, result in results.items():
        if stored is not None and result.events is results[STRICT].events:
            copy_twin(stored, policy)
            continue
        spill = spills.get(policy) if spills else None
        assembly = _store_assembly(
            capture,
            policy,
            result,
            _documented(result, spill),
            fragments=fragments if policy == STRICT else None,
            arrived=arrived,
        )
        if policy == STRICT:
            stored = assembly


def model_name(frames: Sequence[StreamFrame]) -> str:
    """The model the stream says answered, in any dialect: a chat chunk's
    `model`, Gemini's `modelVersion`, or the `model` of the response (OpenAI
    Responses) or message (Anthropic) a start event carries ("" when none)."""
    for frame in frames:
        if frame.kind is FrameKind.CHUNK:
            payload = frame.payload
            holders = (payload, payload.get("response"), payload.get("message"))
            for holder in holders:
                if type(holder) is dict:
                    model = holder.get("model") or holder.get("modelVersion")
                    if type(model) is str and model:
                        return model
    return ""


def _frame_marks(result: Result) -> tuple[dict[int, list[int]], dict[int, list[str]]]:
    touched: dict[int, list[int]] = defaultdict(list)
    for call in result.calls:
        for number in call.frames:
            touched[number].append(call.position)
    return touched, frame_marks(result)


def _store_frames(
    capture: models.Capture,
    frames: list[StreamFrame],
    arrived_ms: Sequence[float | None] | None,
    touched: dict[int, list[int]],
    marks: dict[int, list[str]],
    did: FrameDid,
) -> None:
    """A whole stream's frames (`store_stream`); `arrived_ms[n]` is frame
    n's arrival time."""
    rows = [
        models.Frame(
            capture=capture,
            number=frame.number,
            kind=frame.kind.value,
            raw=_text(frame.raw),
            arrived_ms=arrived_ms[frame.number] if arrived_ms else None,
            calls=touched.get(frame.number, []),
            marks=marks.get(frame.number, []),
            did=did.get(frame.number, []),
            has_text=carries_text(did.get(frame.number, ())),
        )
        for frame in frames
    ]
    models.Frame.objects.bulk_create(rows, batch_size=BATCH)


def _store_assembly(
    capture: models.Capture,
    policy: str,
    result: Result,
    documented: Documented,
    *,
    fragments: FragmentLog | None,
    arrived: Sequence[float] | None = None,
) -> models.Assembly:
    """`documented`: `_documented` of the result;
    `fragments`: for the strict assembly, what of its fragments is written
    (the rest is written here), None for the others; `arrived`: the frames'
    arrival times, when the caller has them."""
    document, result_text, call_timelines, prose = documented
    del documented
    refusal = result.refusal
    first = result.choice0
    assembly = models.Assembly.objects.create(
        capture=capture,
        policy=policy,
        outcome=result.outcome,
        refusal_code=refusal.code if refusal else "",
        refusal_message=_text(refusal.message) if refusal else "",
        refusal_frame=refusal.frame if refusal else None,
        refusal_call=document["refusal"]["call"] if refusal else None,
        refusal_choice=_int(refusal.choice) if refusal else None,
        refusal_retryable=refusal.retryable if refusal else None,
        finish_reason=_text((first.finish_reason or "")[:40]) if first else "",
        usage=_json(result.usage),
        text=_text(document["text"]),
        result_json=result_text if type(result_text) is str else "",
        timeline=_timeline(capture, result, prose, arrived) if policy == STRICT else None,
    )
    del document
    if type(result_text) is not str:
        with result_text:
            write_json_text(assembly, result_text)
    del result_text
    models.Call.objects.bulk_create(
        [
            models.Call(
                assembly=assembly,
                arguments=_json(call.arguments),
                arguments_text=_text(call.arguments_text),
                timeline=_json(call_timelines.get(call.position, [])),
                **call_fields(call, result.dialect),
            )
            for call in result.calls
        ]
    )
    if fragments is not None:
        _store_fragments(capture, result, fragments)
    return assembly


def _store_fragments(capture: models.Capture, result: Result, fragments: FragmentLog) -> None:
    """The strict calls' fragments `fragments` has not written (those it
    wrote as other calls go first)."""
    calls, dialect = result.calls, result.dialect
    stale = fragments.stale(calls, dialect)
    if stale is None:
        models.Fragment.objects.filter(capture=capture).delete()
    elif stale:
        models.Fragment.objects.filter(capture=capture, position__in=stale).delete()
    insert_rows(models.Fragment, FRAGMENT_FIELDS, fragments.rest(capture.pk, calls, dialect))


def _timeline(
    capture: models.Capture,
    result: Result,
    prose: ProseFrames,
    arrived: Sequence[float] | None,
) -> dict[str, Any]:
    """The strict assembly's timeline summary (`arrived`: the frames' arrival
    times when the caller holds them, else read back from the stored frames)."""
    return summarize(result, prose, arrived if arrived is not None else arrival_times(capture))


def call_fields(call: AssembledCall, dialect: str) -> dict[str, Any]:
    """A Call row's fields that say who the call is and how far it got
    (not its arguments nor its timeline): what the store writes when the
    capture closes, and what a live viewer's card is rendered from before."""
    return {
        "position": call.position,
        "choice": _int(call.choice),
        "call_id": _text(call.id or ""),
        "name": _text(call.name or ""),
        "index": _int(call.index),
        "started_frame": call.started_frame,
        "settled_frame": call.settled_frame,
        "invalid_at": _json(call.invalid_at),
        "fragment_count": len(call.fragment_frames),
        **call_columns(call, dialect),
    }


# A result document without its events, its JSON text (whole, or a file
# holding it), the calls' timelines and the frames of its text and reasoning.
Documented = tuple[dict[str, Any], str | IO[bytes], Timelines, ProseFrames]


def _documented(result: Result, spill: EventSpill | None) -> Documented:
    """The result document without its events (nor the calls' frames, when
    spilled), its JSON text (whole, or spilled: a file holding it), the
    calls' timelines and the frames of its text and reasoning."""
    if spill is None:
        document = result.to_dict()
        result_json = dumps(document).decode()
        call_timelines = timelines(document["events"], document["refusal"])
        prose = ProseFrames().add_all(document["events"])
        del document["events"]
        return document, result_json, call_timelines, prose
    spill.follow(result.events)
    document = result.to_dict(events=False, frames=False)
    result_file = spill.result_file(result, document)
    call_timelines = with_refusal(spill.timelines, document["refusal"])
    return document, result_file, call_timelines, spill.prose
