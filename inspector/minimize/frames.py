"""Frames as the minimizer sees them: read with the assembler's readers,
written back as bytes, rewritten when a pass edits a payload.

A frame no pass edited keeps its raw text exactly as read (its lines joined
by LF).  An edited frame keeps every line of its block but the `data:` ones
(an SSE `event:` line stays with its data: a dialect's framing is never cut
in half), which become one `data: <compact JSON>` line; a JSON Lines frame
becomes its compact JSON.
"""

from __future__ import annotations

from typing import Any

from inspector.assembly import JSONL, SSE, FrameKind, JSONLReader, SSEReader
from inspector.assembly.jsontext import compact

# Frames whose payload the passes may edit: chunks (every dialect's events)
# and error frames (an error's envelope repeats what chunks do).
EDITABLE = (FrameKind.CHUNK, FrameKind.ERROR)


class MinFrame:
    """One frame: its text as it will be written, and for editable frames the
    (current) parsed payload.  Never changed once made: an edit makes a new one."""

    __slots__ = ("text", "payload", "unterminated")

    def __init__(self, text: str, payload: dict[str, Any] | None, unterminated: bool) -> None:
        self.text = text
        self.payload = payload
        self.unterminated = unterminated


def read_frames(data: bytes, fmt: str) -> list[MinFrame]:
    reader = SSEReader() if fmt == SSE else JSONLReader()
    frames = reader.feed(data)
    frames.extend(reader.close())
    return [
        MinFrame(f.raw, f.payload if f.kind in EDITABLE else None, f.unterminated) for f in frames
    ]


def serialise(frames: list[MinFrame], fmt: str) -> bytes:
    if fmt == JSONL:
        return "".join(f.text + "\n" for f in frames).encode()
    return "".join(f.text if f.unterminated else f.text + "\n\n" for f in frames).encode()


def rewritten(frame: MinFrame, payload: dict[str, Any], fmt: str) -> MinFrame:
    """`frame` with `payload` as its data; its other SSE lines kept in place."""
    body = compact(payload)
    if fmt == JSONL:
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
