"""A stored call's timeline: the events that tell how its identity evolved
(identity, start, settling, end, the anomalies about it, the refusal),
read from the result document's events, one event at a time."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

Timelines = dict[int, list[dict[str, Any]]]  # call position -> its entries

_TIMELINE_EVENTS = {"identity", "identity_ignored", "toolcall_start", "settled", "toolcall_end"}
_CALL_ANOMALIES = {"index_reused", "index_changed", "guessed_continuation", "arguments_not_string"}
_CALL_ANOMALIES |= {  # the dialects' anomalies about one call
    "item_id_changed",
    "call_id_changed",
    "item_not_done",
    "arguments_only_in_done",
    "block_not_stopped",
    "arguments_only_in_start",
    "start_input_discarded",
}


def new_timelines() -> Timelines:
    return defaultdict(list)


def add_event(out: Timelines, event: dict[str, Any]) -> None:
    """Note one event of the result document, if it is about a call."""
    kind = event["type"]
    if kind in _TIMELINE_EVENTS and event.get("call") is not None:
        entry = {"frame": event["frame"], "event": kind}
        if "field" in event:
            entry["field"] = event["field"]
            entry["value"] = event["value"]
        out[event["call"]].append(entry)
    elif kind == "anomaly":
        # An anomaly event carries the anomaly itself under "anomaly".
        anomaly = event.get("anomaly") or {}
        if anomaly.get("call") is not None and anomaly.get("kind") in _CALL_ANOMALIES:
            out[anomaly["call"]].append({"frame": event["frame"], "event": anomaly["kind"]})


def add_refusal(out: Timelines, refusal: dict[str, Any] | None) -> None:
    """Note the document's refusal, last, on the call it names."""
    if refusal and refusal["call"] is not None:
        out[refusal["call"]].append(
            {"frame": refusal["frame"], "event": "refusal", "value": refusal["code"]}
        )


def with_refusal(out: Timelines, refusal: dict[str, Any] | None) -> Timelines:
    """`out` with the document's refusal noted (`add_refusal`), `out` itself
    unchanged: the spill of events two policies share is read by both."""
    if not refusal or refusal["call"] is None:
        return out
    noted = new_timelines()
    noted.update(out)
    noted[refusal["call"]] = list(out.get(refusal["call"], []))
    add_refusal(noted, refusal)
    return noted


def timelines(events: Iterable[dict[str, Any]], refusal: dict[str, Any] | None) -> Timelines:
    """Per call, the events that tell how its identity evolved."""
    out = new_timelines()
    for event in events:
        add_event(out, event)
    add_refusal(out, refusal)
    return out
