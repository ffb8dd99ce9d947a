"""What each frame did, as the strict assembler's events say: the compact
items the frames table shows parsed (`Frame.did`), written when the frame is
stored.  Nothing here reads a frame: the assembler already resolved which
call each delta went to, which identity fields counted or were ignored, and
what was text, reasoning, a finish reason or usage; this only files its
events by frame.

An item is a short JSON list, its first element its kind:

    ["start", call, name]                a call started (got an id or a name)
    ["id", call, name, value]            an id established
    ["name", call, name, value]          a name established
    ["ignored", call, name, field, value]  an empty or non-string id or name
    ["args", call, name, text, cut]      an argument fragment (`cut`: characters not kept)
    ["settled", call, name]              its arguments closed and identity complete
    ["text", choice, text, cut]          text; ["reasoning", choice, text, cut] likewise
    ["finish", choice, reason]           a finish reason
    ["usage", [[key, value], ...]]       a usage object, in its order
    ["dropped", choice, reason]          a delta dropped
    ["anomaly", kind, call]              an anomaly recorded here
    ["done"]                             the done frame

`call` is the call's position in the strict result (None for a call not
started when the frame was stored); `name` the call's name as known then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from inspector.assembly.result import Delta, Event

ITEM_TEXT = 300  # characters of a fragment, text or reasoning piece kept per item
USAGE_KEYS = 12  # keys of a usage object kept

FrameDid = dict[int, list[list[Any]]]
TEXT_KINDS = ("text", "reasoning")


def did_by_frame(
    events: Iterable[Event | Delta],
    name_of: Callable[[int], str | None],
    seen: dict[str, Any] | None = None,
) -> FrameDid:
    """The items of each frame the events name; `name_of(position)` is the
    name of a started call (for the bare fragment tuples, which carry only
    its position).  A usage object equal to the one before is left out:
    Gemini repeats it on every chunk, envelope rather than news (`seen`
    keeps the last one across calls, for a stream filed batch by batch)."""
    did: FrameDid = {}
    seen = {} if seen is None else seen
    for event in events:
        if type(event) is tuple:  # a bare fragment, the most common item
            frame, position, text = event
            did_at = did.get(frame)
            if did_at is None:
                did_at = did[frame] = []
            did_at.append(_args_item(position, name_of(position), text))
            continue
        frame, item = event.frame, _item(event)  # type: ignore[union-attr]
        if item is not None and item[0] == "usage":
            if item[1] == seen.get("usage"):
                continue
            seen["usage"] = item[1]
        if frame is not None and item is not None:
            did.setdefault(frame, []).append(_nul_free(item))
    return did


def _args_item(position: int, name: str | None, text: str) -> list[Any]:
    """`["args", call, name, text, cut]` of a bare fragment, NUL-free: what
    `_nul_free` of the general item gives, in one call."""
    name = name or ""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if "\x00" in name:
        name = name.replace("\x00", "\ufffd")
    if len(text) <= ITEM_TEXT:
        return ["args", position, name, text, 0]
    return ["args", position, name, text[:ITEM_TEXT], len(text) - ITEM_TEXT]


def _nul_free(item: list[Any]) -> list[Any]:
    """The item itself when none of its texts holds a NUL (the common case,
    told without a call per part), else `_without_nul` of it."""
    for part in item:
        if (type(part) is str and "\x00" in part) or type(part) is list:
            return _without_nul(item)
    return item


def _without_nul(value: Any) -> Any:
    """NUL as U+FFFD, as the store keeps text: PostgreSQL's jsonb refuses \\u0000."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, list):
        return [_without_nul(part) for part in value]
    return value


def carries_text(items: Iterable[list[Any]]) -> bool:
    """Whether a frame's items hold text or reasoning."""
    return any(item[0] in TEXT_KINDS for item in items)


def _cut(text: str) -> tuple[str, int]:
    return text[:ITEM_TEXT], max(0, len(text) - ITEM_TEXT)


def _call(event: Event) -> tuple[int | None, str]:
    call = event.call
    if call is None:
        return None, ""
    return call.position, call.name or ""


def _item(event: Event) -> list[Any] | None:
    kind, fields = event.type, event.fields
    if kind in ("toolcall_start", "settled"):
        return [kind.removeprefix("toolcall_"), *_call(event)]
    if kind == "toolcall_delta":
        return ["args", *_call(event), *_cut(str(fields))]
    if not isinstance(fields, dict):
        return ["done"] if kind == "done" else None
    return _fields_item(event, kind, fields)


def _fields_item(event: Event, kind: str, fields: dict[str, Any]) -> list[Any] | None:
    if kind == "identity":
        return [fields["field"], *_call(event), fields["value"]]
    if kind == "identity_ignored":
        return ["ignored", *_call(event), fields["field"], _json_value(fields["value"])]
    if kind in ("text_delta", "reasoning_delta"):
        return [kind.removesuffix("_delta"), fields.get("choice"), *_cut(fields["delta"])]
    if kind == "finish":
        return ["finish", fields.get("choice"), fields["finish_reason"]]
    if kind == "usage":
        # (key, value) pairs: PostgreSQL's jsonb would reorder an object's keys.
        pairs = list(fields["usage"].items())[:USAGE_KEYS]
        return ["usage", [[key, _json_value(value)] for key, value in pairs]]
    if kind == "dropped":
        return ["dropped", fields.get("choice"), fields["reason"]]
    if kind == "anomaly":
        anomaly = fields["anomaly"]
        call = anomaly.call.position if anomaly.call is not None else None
        return ["anomaly", anomaly.kind, call]
    return None


def _json_value(value: Any) -> Any:
    """A value as an item keeps it (an ignored identity value, a usage
    count): short scalars as they are, anything else as its compact JSON
    text, cut; a value nested too deep for that (untrusted input) as its
    type's brackets."""
    if isinstance(value, str):
        return value[:ITEM_TEXT]
    if value is None or isinstance(value, bool | int | float):
        return value
    try:
        return orjson.dumps(value).decode()[:ITEM_TEXT]
    except (orjson.JSONEncodeError, TypeError):
        return "{…}" if isinstance(value, dict) else "[…]"
