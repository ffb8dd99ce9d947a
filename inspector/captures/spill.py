"""An assembly's events written down as a capture is stored: an upload's, so
that they are never all held in memory at once (`add` what `drain` hands
out), a live recording's so that its close does not serialize them all at
once (`follow`: they stay in the log for its viewers).  Their JSON text goes
to a temporary file (in memory while small), and what the calls' timelines
and the timeline picture's text lane take from them is noted as they pass.
At the end `result_file` writes the stored result text, exactly as
`dumps(result.to_dict())` writes it, to a file.
"""

from __future__ import annotations

import shutil
import tempfile
from array import array
from typing import IO, Any

from inspector.assembly import Call, Result
from inspector.assembly.jsontext import dumps
from inspector.assembly.result import EventLog

from .timeline_data import ProseFrames
from .timelines import Timelines, add_event, new_timelines

# Event text held in memory before the spill moves to a file on disk.
SPOOL_BYTES = 1024 * 1024
_COPY_BLOCK = 1024 * 1024
# Frame numbers written per `dumps`: orjson reserves about 160 bytes per
# list item while it writes, 16 MB for a call touched by 100k frames.
_FRAMES_BLOCK = 4096


class EventSpill:
    """`add(events)` as `EventLog.drain()` hands them out, in order; then
    `result_file(result, document)` once; `close()` (or `with`) frees the file."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        self.count = 0
        self.timelines: Timelines = new_timelines()
        self.prose = ProseFrames()  # the frames of the text and reasoning

    def __enter__(self) -> EventSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def follow(self, events: EventLog) -> None:
        """Write down the events `events` logged since the last call, up to
        the first naming a call without its number, leaving them in the log
        (`EventLog.numbered`); the spill counts from the log's first event,
        so it is fed by `follow` alone, or by the log's every `drain()`."""
        self.add(events.numbered(self.count))

    def add(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        text = dumps(events)  # "[a,b]": the events as the document's list writes them
        if self.count:
            self._file.write(b",")
        self._file.write(memoryview(text)[1:-1])
        self.count += len(events)
        for event in events:
            add_event(self.timelines, event)
            self.prose.add(event)

    def result_file(self, result: Result, document: dict[str, Any]) -> IO[bytes]:
        """A temporary file holding the result document's JSON text
        (`document`: the result's `to_dict(events=False, frames=False)`),
        with each call's frames and, last, the spilled events; written key by
        key as orjson writes a dict (`{"key":value,...}`), so the text is
        never held in memory whole.  The caller closes the file."""
        out = tempfile.TemporaryFile()
        try:
            out.write(b"{")
            for key, value in document.items():
                out.write(dumps(key) + b":")
                if key == "calls":
                    _write_calls(out, value, result.calls)
                else:
                    out.write(dumps(value))
                out.write(b",")
            out.write(b'"events":[')
            self._file.seek(0)
            shutil.copyfileobj(self._file, out, _COPY_BLOCK)
            out.write(b"]}")
            out.flush()
        except BaseException:
            out.close()
            raise
        return out


def _write_calls(out: IO[bytes], records: list[dict[str, Any]], calls: list[Call]) -> None:
    """The calls' records, each with its `frames` as its last key."""
    out.write(b"[")
    for position, (record, call) in enumerate(zip(records, calls, strict=True)):
        if position:
            out.write(b",")
        out.write(memoryview(dumps(record))[:-1])
        out.write(b',"frames":')
        _write_frames(out, call.frames)
        out.write(b"}")
    out.write(b"]")


def _write_frames(out: IO[bytes], frames: array[int]) -> None:
    out.write(b"[")
    for start in range(0, len(frames), _FRAMES_BLOCK):
        if start:
            out.write(b",")
        out.write(memoryview(dumps(frames[start : start + _FRAMES_BLOCK].tolist()))[1:-1])
    out.write(b"]")


__all__ = ["SPOOL_BYTES", "EventSpill"]
