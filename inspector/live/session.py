"""A capture recorded while its bytes arrive.

Intake (the proxy, the ingest socket and endpoint) hands raw bytes to a
`LiveCapture` as it reads them.  Each `append` runs the bytes through the
same one-pass assembler an upload uses, stores the frames it completed with
their arrival times, and returns one batch message describing them, for the
channel layer to fan out.  One message per read, never one per fragment,
so a fast stream cannot overflow a channel's capacity.

The ORM calls here are synchronous; async callers wrap them in
`sync_to_async` (see `recorder.py`).
"""

from __future__ import annotations

import time
from typing import Any

from inspector.assembly import AUTO_DIALECT, STRICT, Call
from inspector.captures import models
from inspector.captures.store import open_capture
from inspector.captures.writer import CaptureWriter

from .broadcast import (
    CallEntry,
    FinishedMessage,
    FramesMessage,
    call_entry,
    finished_message,
    frame_entry,
    frames_message,
    refusal_entry,
)


class LiveCapture:
    """Open with `LiveCapture.open(...)`, then `append(bytes)` per read and
    `close()` once.  The storing is `captures.writer.CaptureWriter`'s (the
    same an upload uses); this adds the arrival times and the messages."""

    def __init__(
        self,
        capture: models.Capture,
        *,
        clock=time.monotonic,
        dialect: str = AUTO_DIALECT,
        hint: str | None = None,
    ) -> None:
        self.writer = CaptureWriter(capture, dialect=dialect, hint=hint)
        self.capture = capture
        self.stream = self.writer.stream
        self.strict = self.writer.strict
        self._clock = clock
        self._started = clock()
        self._events_seen = 0
        self._fragments_sent: dict[int, int] = {}  # id(call) -> fragments sent

    @classmethod
    def open(
        cls, *, stream_format: str = "sse", dialect: str = AUTO_DIALECT, **meta: Any
    ) -> LiveCapture:
        return cls(open_capture(stream_format=stream_format, **meta), dialect=dialect)

    @property
    def slug(self) -> str:
        return self.capture.slug

    @property
    def closed(self) -> bool:
        return self.writer.closed

    @property
    def byte_size(self) -> int:
        """The bytes appended so far."""
        return self.writer.byte_size

    def elapsed_ms(self) -> float:
        return round((self._clock() - self._started) * 1000, 3)

    def append(self, data: bytes) -> FramesMessage | None:
        """Take the next bytes; the batch message for the frames they
        completed, or None when they completed none."""
        self.writer.feed(data)
        now = self.elapsed_ms()
        return self._message(self.writer.flush(now), now)

    def close(self, **meta: Any) -> FinishedMessage:
        """End of input: store the assemblies; the closing message."""
        if self.closed:
            raise RuntimeError("live capture closed twice")
        now = self.elapsed_ms()
        capture, last = self.writer.finish(arrived_ms=now, **meta)
        return finished_message(
            capture, self._message(last, now), refusal_entry(self.stream.results[STRICT].refusal)
        )

    def _message(self, frames: list, now: float) -> FramesMessage | None:
        if not frames:
            return None
        slug = self.capture.slug
        entries = [frame_entry(slug, f.number, f.kind.value, f.raw, now) for f in frames]
        return frames_message(
            self.capture.slug, entries, self._touched_calls(), refusal_entry(self.strict.refusal)
        )

    def _touched_calls(self) -> list[CallEntry]:
        events = self.strict.events
        touched: dict[int, Call] = {}
        for event in events[self._events_seen :]:
            call = event.call
            if call is not None and call.position is not None:
                touched[id(call)] = call
        self._events_seen = len(events)
        return [self._call_entry(call) for call in touched.values()]

    def _call_entry(self, call: Call) -> CallEntry:
        sent = self._fragments_sent.get(id(call), 0)
        self._fragments_sent[id(call)] = len(call.fragment_frames)
        return call_entry(call, sent)


__all__ = ["LiveCapture"]
