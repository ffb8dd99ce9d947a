"""A call's identity timeline as the pages show it (its card, and the state
at one frame): what happened to its id, name and index, frame by frame."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TIMELINE_SHOWN = 60  # identity timeline rows shown per call

EVENT_LABELS = {
    "toolcall_start": ("started", "ok"),
    "settled": (
        "settled: its arguments are complete (their JSON closed, or its closing event came)",
        "ok",
    ),
    "toolcall_end": ("ended: every call passed its checks", "ok"),
    "index_reused": ("index reused: a new id on an index another call holds", "warn"),
    "index_changed": (
        "index changed: a later delta sent another index (the first is kept)",
        "warn",
    ),
    "guessed_continuation": ("continuation guessed (lenient)", "warn"),
    "arguments_not_string": ("arguments were not a string (serialised as JSON)", "warn"),
    "item_id_changed": ("item id changed: a delta named another item (output_index kept)", "warn"),
    "call_id_changed": ("call_id changed in a later copy (the first one stays)", "warn"),
    "item_not_done": ("item not done: still open at the terminal event", "warn"),
    "arguments_only_in_done": ("arguments only in the final copy: no delta came", "warn"),
    "block_not_stopped": ("block never stopped: no content_block_stop came", "warn"),
    "arguments_only_in_start": ("input only in content_block_start: no delta came", "warn"),
    "start_input_discarded": ("deltas replaced the input sent in content_block_start", "warn"),
}


@dataclass
class TimelineRow:
    frame: int | None
    last_frame: int | None
    count: int
    label: str
    tone: str


def timeline_rows(
    timeline: list[dict[str, Any]], *, upto: int | None = None, refusal_message: str = ""
) -> tuple[list[TimelineRow], int]:
    """The call's identity timeline; a run of ignored repeats (`"id": ""`
    in every delta, say) is folded into one row per field and value.  At
    most TIMELINE_SHOWN rows, and how many were left out."""
    rows: list[TimelineRow] = []
    run: dict[tuple[str, str], TimelineRow] = {}  # the current run of ignored repeats
    for entry in timeline:
        frame = entry.get("frame")
        if upto is not None and (frame is None or frame > upto):
            continue
        if entry.get("event") != "identity_ignored":
            run = {}
        else:
            key = (str(entry.get("field")), json.dumps(entry.get("value")))
            if key in run:
                run[key].count += 1
                run[key].last_frame = frame
                continue
        label, tone = timeline_label(entry, refusal_message)
        rows.append(TimelineRow(frame, frame, 1, label, tone))
        if entry.get("event") == "identity_ignored":
            run[key] = rows[-1]
    hidden = max(0, len(rows) - TIMELINE_SHOWN)
    return rows[:TIMELINE_SHOWN], hidden


def timeline_label(entry: dict[str, Any], refusal_message: str = "") -> tuple[str, str]:
    """One timeline entry as (sentence, tone)."""
    event = entry.get("event", "")
    field_name = entry.get("field", "")
    value = entry.get("value")
    if event == "identity":
        return f"{field_name} established: {value}", "ok"
    if event == "identity_ignored":
        return f"{field_name} {json.dumps(value)} ignored (identity is never erased)", "muted"
    if event == "refusal":
        text = f"refused {value}"
        return (f"{text}: {refusal_message}" if refusal_message else text), "bad"
    if event in EVENT_LABELS:
        return EVENT_LABELS[event]
    return event, "muted"


def identity_at(timeline: list[dict[str, Any]], upto: int | None = None) -> dict[str, Any]:
    """The id and name a call held (and where each was established) by frame `upto`."""
    held: dict[str, Any] = {"id": None, "id_frame": None, "name": None, "name_frame": None}
    for entry in timeline:
        frame = entry.get("frame")
        if upto is not None and (frame is None or frame > upto):
            continue
        if entry.get("event") == "identity" and entry.get("field") in ("id", "name"):
            if held[entry["field"]] is None:
                held[entry["field"]] = entry.get("value")
                held[entry["field"] + "_frame"] = frame
    return held
