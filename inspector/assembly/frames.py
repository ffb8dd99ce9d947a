"""Frames: the unit every reader produces and the assembler consumes.

A frame is one SSE block (or one JSON Lines line) that carries data or a
comment.  Its kind is decided once, here, by parsing its data exactly once
with orjson; the assembler never parses a payload again.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import orjson


class FrameKind(StrEnum):
    CHUNK = "chunk"
    DONE = "done"
    ERROR = "error"
    COMMENT = "comment"
    INVALID = "invalid"
    PING = "ping"  # data {"type":"ping"}: a keep-alive in every dialect, no effect


class Frame:
    """One numbered frame.

    `raw` is the block as it was read (its lines joined by LF), `data` the
    joined `data:` lines, `payload` the parsed JSON object for chunk, error
    and ping frames, `event` the SSE block's `event:` field (None when it had
    none, and for JSON Lines and JSON arrays).  `unterminated` marks a last
    block that the input cut off before its blank line; `parse_failed` tells
    a cut from a well-formed non-object.
    """

    __slots__ = (
        "number",
        "kind",
        "_raw",
        "_data",
        "payload",
        "unterminated",
        "parse_failed",
        "event",
    )

    def __init__(
        self,
        number: int,
        kind: FrameKind,
        raw: str,
        data: str,
        payload: dict[str, Any] | None = None,
        *,
        unterminated: bool = False,
        parse_failed: bool = False,
        event: str | None = None,
    ) -> None:
        self.number = number
        self.kind = kind
        self._raw: str | bytes | None = raw
        self._data: str | bytes = data
        self.payload = payload
        self.unterminated = unterminated
        self.parse_failed = parse_failed
        self.event = event

    @property
    def raw(self) -> str:
        raw = self._raw
        if type(raw) is str:
            return raw
        if raw is None:  # a one-line `data: ` block read from bytes
            raw = self._raw = "data: " + self.data
        else:  # a frame read from bytes is decoded when asked
            raw = self._raw = raw.decode("utf-8", "replace")  # type: ignore[union-attr]
        return raw

    @property
    def data(self) -> str:
        data = self._data
        if type(data) is bytes:
            data = self._data = data.decode("utf-8", "replace")
        return data  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Frame({self.number}, {self.kind.value}, {self.raw[:40]!r})"


def read_frame(
    number: int,
    block: bytes | str | None,
    data: bytes | str,
    payload: dict[str, Any],
    event: str | None,
) -> Frame:
    """The frame of a terminated SSE block read as bytes (`readers.py`'s fast
    path), or of a JSON array's element (text), whose data `data` parsed as
    the object `payload`.  Bytes stay bytes until `raw` or `data` is asked
    for: a frame costs no decoding unless it is read; `block` None is the
    one-line block `data: ` + data.  (The data bytes are valid UTF-8, as
    orjson parsed them; `block`'s other lines, if any, are decoded as the
    line reader would.)"""
    frame = Frame.__new__(Frame)
    frame.number = number
    frame.kind = _kind_of(payload)
    frame._raw = block
    frame._data = data
    frame.payload = payload
    frame.unterminated = False
    frame.parse_failed = False
    frame.event = event
    return frame


def _is_error_payload(payload: dict[str, Any]) -> bool:
    error = payload.get("error", None)
    if error is not None and error is not False and error != "" and error != {} and error != []:
        return True
    return payload.get("object") == "error"


def classify(
    number: int,
    raw: str,
    data: str,
    *,
    done_literals: tuple[str, ...] = ("[DONE]",),
    unterminated: bool = False,
    event: str | None = None,
) -> Frame:
    """Build the frame for a block (or line) whose data is `data`.

    An empty `data` means the block held only comments.
    """
    if not data:
        return Frame(number, FrameKind.COMMENT, raw, data, unterminated=unterminated, event=event)
    if data.strip() in done_literals:
        return Frame(number, FrameKind.DONE, raw, data, unterminated=unterminated, event=event)
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Frame(
            number,
            FrameKind.INVALID,
            raw,
            data,
            unterminated=unterminated,
            parse_failed=True,
            event=event,
        )
    if type(payload) is not dict:
        return Frame(number, FrameKind.INVALID, raw, data, unterminated=unterminated, event=event)
    return Frame(
        number, _kind_of(payload), raw, data, payload, unterminated=unterminated, event=event
    )


def parsed_frame(
    number: int,
    raw: str,
    data: str,
    payload: Any,
    *,
    unterminated: bool = False,
    event: str | None = None,
) -> Frame:
    """The frame whose data `data` parsed as `payload` (a reader that had to
    parse it already, to find where it ends, hands the value over)."""
    if type(payload) is not dict:
        return Frame(number, FrameKind.INVALID, raw, data, unterminated=unterminated, event=event)
    return Frame(
        number, _kind_of(payload), raw, data, payload, unterminated=unterminated, event=event
    )


def _kind_of(payload: dict[str, Any]) -> FrameKind:
    if _is_error_payload(payload):
        return FrameKind.ERROR
    if len(payload) == 1 and payload.get("type") == "ping":
        return FrameKind.PING
    return FrameKind.CHUNK
