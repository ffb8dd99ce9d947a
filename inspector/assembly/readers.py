"""Readers: bytes in, frames out, incrementally.

Both readers take bytes in pieces of any size (`feed`) and are told when the
input ends (`close`).  They number frames from 0 in order of appearance and
classify each one as it completes, so the assembler can run in the same pass.
"""

from __future__ import annotations

from .frames import Frame, classify
from .lines import LineSplitter

JSONL_DONE = ("[DONE]", '"[DONE]"')


class SSEReader:
    """Server-Sent Events: a block ends at a blank line; `data:` lines are
    joined with LF; lines starting with `:` are comments; the `event:` field
    is kept as the frame's `event` (Responses and Messages frames are named by it); other fields are
    ignored.  A block is a frame when it has data or a comment."""

    def __init__(self) -> None:
        self._lines = LineSplitter()
        self._raw: list[str] = []
        self._data: list[str] = []
        self._has_comment = False
        self._event: str | None = None
        self._count = 0

    def feed(self, data: bytes) -> list[Frame]:
        return self._read(self._lines.feed(data))

    def close(self) -> list[Frame]:
        lines, tail = self._lines.close()
        frames = self._read(lines)
        if tail is not None:
            self._take_line(tail)
        if self._raw:
            frame = self._end_block(unterminated=True)
            if frame is not None:
                frames.append(frame)
        return frames

    def _read(self, lines: list[str]) -> list[Frame]:
        frames = []
        for line in lines:
            if line[:6] == "data: ":  # the common case, inline
                self._raw.append(line)
                self._data.append(line[6:])
            elif line:
                self._take_line(line)
            elif self._raw:
                frame = self._end_block()
                if frame is not None:
                    frames.append(frame)
        return frames

    def _take_line(self, line: str) -> None:
        self._raw.append(line)
        if line[0] == ":":
            self._has_comment = True
            return
        name, colon, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value[:1] == " " else value)
        elif name == "event":
            self._event = value[1:] if value[:1] == " " else value

    def _end_block(self, *, unterminated: bool = False) -> Frame | None:
        raw, data, has_comment, event = self._raw, self._data, self._has_comment, self._event
        self._raw, self._data, self._has_comment, self._event = [], [], False, None
        text = data[0] if len(data) == 1 else "\n".join(data)
        if not text and not has_comment:
            return None
        frame = classify(
            self._count,
            raw[0] if len(raw) == 1 else "\n".join(raw),
            text,
            unterminated=unterminated,
            event=event,
        )
        self._count += 1
        return frame


class JSONLReader:
    """JSON Lines: every non-blank line is one frame, classified like SSE
    data; `[DONE]` or `"[DONE]"` is the done frame."""

    def __init__(self) -> None:
        self._lines = LineSplitter()
        self._count = 0

    def feed(self, data: bytes) -> list[Frame]:
        return self._read(self._lines.feed(data))

    def close(self) -> list[Frame]:
        lines, tail = self._lines.close()
        if tail is not None:
            lines.append(tail)
        return self._read(lines)

    def _read(self, lines: list[str]) -> list[Frame]:
        frames = []
        for line in lines:
            if line.strip(" \t"):
                frames.append(classify(self._count, line, line, done_literals=JSONL_DONE))
                self._count += 1
        return frames
