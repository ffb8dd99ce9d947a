"""Frames as the minimizer sees them: read with the assembler's readers,
written back as bytes, rewritten when a pass edits a payload.

A frame no pass edited keeps its raw text exactly as read (its lines joined
by LF; a JSON array's element as it stood between its separators).  An
edited frame keeps every line of its block but the `data:` ones (an SSE
`event:` line stays with its data: a dialect's framing is never cut in
half), which become one `data: <compact JSON>` line; a JSON Lines frame or a
JSON array's element becomes its compact JSON.

A JSON array is written back whole: `[`, its elements joined by `,\\r\\n` (as
Gemini sends them), and its `]` when the input had one and no element was
cut by the end of the input, so a candidate loses whole elements, never half
of one, and stays an array of the same shape (`Framing`): closed, left open
(the input ended after an element, before `]`), or one whole object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inspector.assembly import (
    JSON_ARRAY,
    JSONL,
    SSE,
    FrameKind,
    JSONArrayReader,
    JSONLReader,
    SSEReader,
)
from inspector.assembly.jsontext import compact

# Frames whose payload the passes may edit: chunks (every dialect's events)
# and error frames (an error's envelope repeats what chunks do).
EDITABLE = (FrameKind.CHUNK, FrameKind.ERROR)
ARRAY_SEPARATOR = ",\r\n"

# The shapes of a JSON-array input.
CLOSED, OPEN, WHOLE, EMPTY = "closed", "open", "whole", "empty"


class MinFrame:
    """One frame: its text as it will be written, and for editable frames the
    (current) parsed payload.  Never changed once made: an edit makes a new one."""

    __slots__ = ("text", "payload", "unterminated")

    def __init__(self, text: str, payload: dict[str, Any] | None, unterminated: bool) -> None:
        self.text = text
        self.payload = payload
        self.unterminated = unterminated


@dataclass(frozen=True)
class Framing:
    """How frames are written back: the stream format and, for a JSON array,
    the shape the input had (`CLOSED`, `OPEN`, `WHOLE` or `EMPTY`)."""

    fmt: str
    shape: str = CLOSED

    def write(self, frames: list[MinFrame]) -> bytes:
        if self.fmt == JSONL:
            return "".join(f.text + "\n" for f in frames).encode()
        if self.fmt == JSON_ARRAY:
            return self._array(frames).encode()
        return "".join(f.text if f.unterminated else f.text + "\n\n" for f in frames).encode()

    def _array(self, frames: list[MinFrame]) -> str:
        if self.shape in (WHOLE, EMPTY):
            return "".join(f.text for f in frames)
        body = ARRAY_SEPARATOR.join(f.text for f in frames)
        cut = bool(frames) and frames[-1].unterminated
        return "[" + body + ("]" if self.shape == CLOSED and not cut else "")


def read_frames(data: bytes, fmt: str) -> tuple[list[MinFrame], Framing]:
    """The frames of a stream (sse, jsonl or json-array) and how to write
    them back."""
    reader = {SSE: SSEReader, JSONL: JSONLReader, JSON_ARRAY: JSONArrayReader}[fmt]()
    frames = reader.feed(data)
    frames.extend(reader.close())
    found = [
        MinFrame(f.raw, f.payload if f.kind in EDITABLE else None, f.unterminated) for f in frames
    ]
    return found, Framing(fmt, _shape(reader) if type(reader) is JSONArrayReader else CLOSED)


def _shape(reader: JSONArrayReader) -> str:
    if reader.whole:
        return WHOLE
    if reader.closed:
        return CLOSED
    return OPEN if reader.opened else EMPTY


def serialise(frames: list[MinFrame], framing: Framing) -> bytes:
    return framing.write(frames)


def rewritten(frame: MinFrame, payload: dict[str, Any], fmt: str) -> MinFrame:
    """`frame` with `payload` as its data; its other SSE lines kept in place."""
    body = compact(payload)
    if fmt != SSE:  # a JSON Lines line, a JSON array's element: the JSON itself
        return MinFrame(body, payload, frame.unterminated)
    lines, placed = [], False
    for line in frame.text.split("\n"):
        if not _is_data_line(line):
            lines.append(line)
        elif not placed:
            lines.append("data: " + body)
            placed = True
    if not placed:
        lines.append("data: " + body)
    return MinFrame("\n".join(lines), payload, frame.unterminated)


def _is_data_line(line: str) -> bool:
    return line == "data" or line.startswith("data:")
