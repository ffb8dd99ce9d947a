"""Readers: bytes in, frames out, incrementally.

Both readers take bytes in pieces of any size (`feed`) and are told when the
input ends (`close`).  They number frames from 0 in order of appearance and
classify each one as it completes, so the assembler can run in the same pass.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

import orjson

from .frames import Frame, classify, read_frame
from .lines import BOM, LineSplitter

JSONL_DONE = ("[DONE]", '"[DONE]"')
_BOM = BOM.encode()
_DATA = b"data: "
_NEXT_DATA = b"\n\ndata: "  # a block's end and the next block's data line
_loads = orjson.loads


# What `SSEReader.read` hands frames to: (chunk, frame); see there.
# `chunk`'s block is None for a one-line block `data: ` + data.
Sinks = tuple[
    Callable[[int, bytes | None, bytes, dict[str, Any], str | None], None],
    Callable[[Frame], None],
]


def _event_data(block: bytes) -> tuple[bytes | None, str | None]:
    """(data, event) of a block that is an `event:` line and one
    `data: {...}` line; (None, None) for any other block."""
    cut = block.find(b"\ndata: {")
    if cut < 0 or block.find(10, cut + 1) >= 0:
        return None, None
    return block[cut + 7 :], block[7:cut].decode("utf-8", "replace")


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
        # Bytes-level reading (see `_feed_blocks`) until a CR shows up; the
        # bytes read since the last block's end, kept as pieces.
        self._blocks = True
        self._pending: list[bytes] = []
        self._at_start = True  # no byte read yet (a BOM may open the stream)

    def feed(self, data: bytes) -> list[Frame]:
        return self.read(data)

    def read(self, data: bytes, sinks: Sinks | None = None) -> list[Frame]:
        """`feed`; with `sinks` (chunk, frame), each frame the bytes complete
        is handed over at once, in order, and none is returned: a frame read
        straight from bytes as `chunk(number, block, data, payload, event)`
        (no `Frame` is made for it), any other as `frame(frame)`."""
        if self._blocks:
            if b"\r" not in data:
                return self._feed_blocks(data, sinks)
            self._blocks = False  # CR or CRLF endings: the line splitter's way
            data = self._take_pending() + data
        frames = self._read(self._lines.feed(data))
        if sinks is None:
            return frames
        for frame in frames:
            sinks[1](frame)
        return []

    def _take_pending(self) -> bytes:
        pending = b"".join(self._pending)
        self._pending = []
        return pending

    def _feed_blocks(self, data: bytes, sinks: Sinks | None) -> list[Frame]:
        """Read whole blocks (the bytes up to a blank line) as bytes, LF line
        endings only.  A block is a frame read straight from bytes when it is
        one `data: {...}` line, or an `event:` line and such a line, and its
        data parses (no decoding: orjson reads bytes, and a frame's text is
        decoded only when asked for); any other block goes through the line
        reader, whole, from a block boundary, so the frames are the same."""
        pending = self._pending
        if self._at_start:
            data = self._take_pending() + data
            if len(data) < len(_BOM) and _BOM.startswith(data):
                if data:
                    self._pending = [data]
                return []  # maybe a BOM still coming
            self._at_start = False
            self._lines.started()
            if data.startswith(_BOM):
                data = data[len(_BOM) :]
        elif b"\n\n" not in data and not (
            pending and data[:1] == b"\n" and pending[-1][-1:] == b"\n"
        ):
            if data:
                pending.append(data)
            return []
        if self._pending:
            data = self._take_pending() + data
        parts = data.split(_NEXT_DATA)
        last = parts.pop()
        tail = (_DATA + last if parts else last).split(b"\n\n")
        last = tail.pop()
        if last:
            self._pending = [last]
        if not parts:
            return self._frames_of(tail, sinks)
        # Split where a blank line is followed by a data line: each part but
        # the first is then the data of a block, unless it holds line ends.
        frames = self._frames_of(parts[0].split(b"\n\n"), sinks)
        frames += self._data_parts(parts, sinks)
        frames += self._frames_of(tail, sinks)
        return frames

    def _data_parts(self, parts: list[bytes], sinks: Sinks | None) -> list[Frame]:
        """The blocks between `\n\ndata: ` and the next: parts[1:] (each a
        block's data when it holds no LF: a one-line `data: ` block)."""
        frames: list[Frame] = []
        chunk = None if sinks is None else sinks[0]
        count = self._count
        for part in islice(parts, 1, None):
            if 10 not in part and part[:1] == b"{":  # the common frame
                try:
                    payload = _loads(part)
                except orjson.JSONDecodeError:
                    pass
                else:
                    if chunk is None:
                        frames.append(read_frame(count, None, part, payload, None))
                    else:
                        chunk(count, None, part, payload, None)
                    count += 1
                    continue
            self._count = count
            frames += self._frames_of((_DATA + part).split(b"\n\n"), sinks)
            count = self._count
        self._count = count
        return frames

    def _frames_of(self, blocks: list[bytes], sinks: Sinks | None) -> list[Frame]:
        frames: list[Frame] = []
        add = frames.append
        chunk = None if sinks is None else sinks[0]
        count = self._count  # kept in self._count around the line reader, which counts too
        for block in blocks:
            # (`10 in` is memchr; `b"\n" in` costs ten times as much on a short block)
            if block[:7] == b"data: {" and 10 not in block:  # the common frame
                data, event = block[6:], None
            elif block[:7] == b"event: ":
                data, event = _event_data(block)
            else:
                data = None
            if data is not None:
                try:
                    payload = _loads(data)
                except orjson.JSONDecodeError:
                    pass
                else:
                    if chunk is None:
                        add(read_frame(count, block, data, payload, event))
                    else:
                        chunk(count, block, data, payload, event)
                    count += 1
                    continue
            block = block.lstrip(b"\n")
            if block:
                self._count = count
                read = self._read([*block.decode("utf-8", "replace").split("\n"), ""])
                count = self._count
                if sinks is None:
                    frames += read
                else:
                    for frame in read:
                        sinks[1](frame)
        self._count = count
        return frames

    def close(self) -> list[Frame]:
        if self._pending:
            self._blocks = False
            frames = self._read(self._lines.feed(self._take_pending()))
        else:
            frames = []
        lines, tail = self._lines.close()
        frames += self._read(lines)
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
