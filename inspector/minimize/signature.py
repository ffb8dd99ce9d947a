"""A failure's signature: what must stay the same for a smaller stream to be
the same bug, not just the same refusal code.

    found = failure_signature(data, "sse")
    found.code, found.reason      # "INVALID_ARGUMENTS", "unclosed_bracket"
    str(found)                    # for people

Why more than the code.  Shrinking a stream with `'}' does not close '['` at
offset 68 until it is only `}` keeps `INVALID_ARGUMENTS` but trades the bug
for another (`arguments do not start with '{'`).  A candidate that fails with
a different signature is another bug, not a smaller one, so the minimizer
keeps the whole signature:

* `code` and `dialect` (chat, responses, messages, gemini);
* `cause`: for INCOMPLETE_STREAM, why (cut mid-frame, unfinished, a JSON
  array left without its `]`, empty);
* the failing call's `kind` and whether it had an `id` and a `name`;
* for INVALID_ARGUMENTS, the fault's class, character and open bracket
  (`faults.Fault`, read from structure, never from a message);
* for IDENTITY_CONFLICT, whether the held and the later name are present;
* for AMBIGUOUS_CONTINUATION, the number of candidate calls;
* `event`: the refusing frame's event type, where the dialect has one (which
  of a Responses stream's checks failed: a delta after `output_item.done`, a
  final copy, the terminal response's list).

Pure: no Django.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from inspector.assembly import AUTO_DIALECT, STRICT, Frame, FrameKind, StreamAssembler

from .faults import Fault, argument_fault

INCOMPLETE = "INCOMPLETE_STREAM"
CAUSE_CUT = "cut in the middle of a frame"
CAUSE_UNFINISHED = "no [DONE] and no finish_reason"
CAUSE_EMPTY = "empty input"
CAUSE_UNCLOSED = "the JSON array was not closed"
_COUNT = re.compile(r"\d+")


@dataclass(frozen=True)
class FailureSignature:
    """What a smaller stream must keep to fail the same way (see the module
    docstring).  Fields that do not apply to the code are None."""

    code: str
    dialect: str
    cause: str = ""
    kind: str | None = None
    has_id: bool | None = None
    has_name: bool | None = None
    fault: Fault | None = None
    names_present: tuple[bool, bool] | None = None
    candidates: int | None = None
    event: str | None = None

    def __str__(self) -> str:
        parts = [self.cause] if self.cause else []
        if self.fault is not None:
            parts.append(_fault_words(self.fault))
        if self.candidates is not None:
            parts.append(f"{self.candidates} candidate calls")
        if self.kind is not None:
            held = [f for f, on in (("id", self.has_id), ("name", self.has_name)) if on]
            parts.append(f"{self.kind} call with {' and '.join(held) or 'no id and no name'}")
        if self.event:
            parts.append(f"at {self.event}")
        return f"{self.code} ({'; '.join(parts)})" if parts else self.code

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for pages and the API."""
        fault = self.fault
        return {
            "code": self.code,
            "dialect": self.dialect,
            "cause": self.cause,
            "kind": self.kind,
            "has_id": self.has_id,
            "has_name": self.has_name,
            "fault": None if fault is None else vars(fault).copy(),
            "names_present": list(self.names_present) if self.names_present else None,
            "candidates": self.candidates,
            "event": self.event,
            "text": str(self),
        }


def _fault_words(fault: Fault) -> str:
    words = fault.reason.replace("_", " ")
    if fault.open_bracket:
        return f"{words}: {fault.char!r} does not close {fault.open_bracket!r}"
    return f"{words} {fault.char!r}" if fault.char else words


def failure_signature(
    data: bytes, fmt: str, dialect: str = AUTO_DIALECT
) -> FailureSignature | None:
    """The signature of the strict refusal of `data` (sse, jsonl or
    json-array) read in `dialect` (default auto), or None when it is not
    refused."""
    stream = StreamAssembler(fmt, (STRICT,), dialect=dialect)
    frames = [*stream.feed(data), *stream.close()]
    result = stream.results[STRICT]
    refusal = result.refusal
    if refusal is None:
        return None
    frame = frames[refusal.frame] if refusal.frame is not None else None
    unclosed = getattr(stream.reader, "cut_between", False)
    return FailureSignature(
        code=refusal.code,
        dialect=result.dialect,
        cause=_incomplete_cause(refusal.code, frame, unclosed=unclosed),
        event=_event_type(frame, result.dialect),
        **_call_fields(refusal.call),
        **_code_fields(refusal, frame),
    )


def _incomplete_cause(code: str, frame: Frame | None, *, unclosed: bool = False) -> str:
    """Why INCOMPLETE_STREAM: without it every such stream would shrink to
    the empty input, which is also INCOMPLETE_STREAM and says nothing.
    `unclosed`: a JSON array ended after an element, before its `]` (the
    reader's `cut_between`; the assembler refuses that at the last frame,
    before any end check)."""
    if code != INCOMPLETE:
        return ""
    if unclosed:
        return CAUSE_UNCLOSED
    if frame is None:
        return CAUSE_EMPTY
    cut = frame.kind is FrameKind.INVALID and frame.unterminated and frame.parse_failed
    return CAUSE_CUT if cut else CAUSE_UNFINISHED


def _event_type(frame: Frame | None, dialect: str) -> str | None:
    if dialect == "chat" or frame is None or frame.payload is None:
        return None
    kind = frame.payload.get("type")
    return kind if type(kind) is str else None


def _call_fields(call: Any) -> dict[str, Any]:
    if call is None:
        return {}
    return {"kind": call.kind, "has_id": bool(call.id), "has_name": bool(call.name)}


def _code_fields(refusal: Any, frame: Frame | None) -> dict[str, Any]:
    if refusal.code == "INVALID_ARGUMENTS" and refusal.call is not None:
        return {"fault": argument_fault(refusal.call)}
    if refusal.code == "IDENTITY_CONFLICT" and refusal.call is not None:
        later = _later_name(frame.payload if frame else None, refusal.call.name)
        return {"names_present": (bool(refusal.call.name), later)}
    if refusal.code == "AMBIGUOUS_CONTINUATION":
        return {"candidates": _candidates(refusal.message)}
    return {}


def _later_name(payload: Any, held: str | None) -> bool:
    """Whether the refusing frame names the call with a non-empty name other
    than the one held (wherever the dialect puts names: any `name` key)."""
    if type(payload) is dict:
        name = payload.get("name")
        if type(name) is str and name and name != held:
            return True
        return any(_later_name(value, held) for value in payload.values())
    if type(payload) is list:
        return any(_later_name(item, held) for item in payload)
    return False


def _candidates(message: str) -> int | None:
    """The number of calls an id-less delta fits.  The refusal carries it only
    in its message ("fits 2 unsettled calls"), so the first number is read; a
    `candidates` field on the refusal would be sturdier (not ours to add)."""
    found = _COUNT.search(message)
    return int(found.group()) if found else None
