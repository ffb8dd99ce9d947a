"""A capture recorded while its bytes arrive.

Intake (the proxy, the ingest socket and endpoint) hands raw bytes to a
`LiveCapture` as it reads them.  Each `append` runs the bytes through the
same one-pass assembler an upload uses, stores the frames it completed with
their arrival times, and returns one batch message describing them, for the
channel layer to fan out.  One message per read, never one per fragment,
so a fast stream cannot overflow a channel's capacity.

The ORM calls here are synchronous; async callers wrap them in
`sync_to_async` (see `proxy.py`).
"""

from __future__ import annotations

import time
from typing import Any

from inspector.assembly import STRICT, Call, StreamAssembler
from inspector.captures import models
from inspector.captures.store import POLICIES, append_frames, close_capture, open_capture

LIST_GROUP = "captures"


def capture_group(slug: str) -> str:
    """The channel-layer group of one capture's viewers."""
    return f"capture.{slug}"


class LiveCapture:
    """Open with `LiveCapture.open(...)`, then `append(bytes)` per read and
    `close()` once."""

    def __init__(self, capture: models.Capture, *, clock=time.monotonic) -> None:
        self.capture = capture
        self.stream = StreamAssembler(capture.stream_format, POLICIES)
        self.strict = self.stream.assemblers[STRICT]
        self._clock = clock
        self._started = clock()
        self._chunks: list[bytes] = []
        self._frames: list = []
        self._events_seen = 0
        self._fragments_sent: dict[int, int] = {}  # id(call) -> fragments sent
        self.closed = False

    @classmethod
    def open(cls, *, stream_format: str = "sse", **meta: Any) -> LiveCapture:
        return cls(open_capture(stream_format=stream_format, **meta))

    @property
    def slug(self) -> str:
        return self.capture.slug

    def elapsed_ms(self) -> float:
        return round((self._clock() - self._started) * 1000, 3)

    def append(self, data: bytes) -> dict[str, Any] | None:
        """Take the next bytes; the batch message for the frames they
        completed, or None when they completed none."""
        self._chunks.append(data)
        return self._take(self.stream.feed(data))

    def close(self, **meta: Any) -> dict[str, Any]:
        """End of input: store the assemblies; the closing message."""
        if self.closed:
            raise RuntimeError("live capture closed twice")
        self.closed = True
        last = self._take(self.stream.close())
        capture = close_capture(
            self.capture, b"".join(self._chunks), self._frames, self.stream.results, **meta
        )
        strict = self.stream.results[STRICT]
        message = {
            "type": "capture.finished",
            "slug": capture.slug,
            "outcome": capture.outcome,
            "lenient_outcome": capture.lenient_outcome,
            "refusal": strict.refusal.to_dict() if strict.refusal else None,
            "frames": last["frames"] if last else [],
            "calls": last["calls"] if last else [],
            "frame_count": capture.frame_count,
        }
        return message

    def _take(self, frames: list) -> dict[str, Any] | None:
        if not frames:
            return None
        now = self.elapsed_ms()
        append_frames(self.capture, frames, [now] * len(frames))
        self._frames.extend(frames)
        refusal = self.strict.refusal
        return {
            "type": "capture.frames",
            "slug": self.capture.slug,
            "frames": [
                {"number": f.number, "kind": f.kind.value, "raw": f.raw, "arrived_ms": now}
                for f in frames
            ],
            "calls": self._touched_calls(),
            "refusal": provisional_refusal(refusal),
        }

    def _touched_calls(self) -> list[dict[str, Any]]:
        events = self.strict.events
        touched: dict[int, Call] = {}
        for event in events[self._events_seen :]:
            call = event.call
            if call is not None and call.position is not None:
                touched[id(call)] = call
        self._events_seen = len(events)
        return [self._call_state(call) for call in touched.values()]

    def _call_state(self, call: Call) -> dict[str, Any]:
        sent = self._fragments_sent.get(id(call), 0)
        self._fragments_sent[id(call)] = len(call.fragment_frames)
        return call_state(call, sent)


def call_state(call: Call, first_fragment: int) -> dict[str, Any]:
    """A call as a viewer sees it, with its fragments from `first_fragment`."""
    scanner = call.scanner
    return {
        "position": call.position,
        "choice": call.choice,
        "id": call.id,
        "name": call.name,
        "index": call.index,
        "started_frame": call.started_frame,
        "settled_frame": call.settled_frame,
        "fragments": [
            {"frame": f, "offset": o, "text": t} for f, o, t in call.fragments(first_fragment)
        ],
        "depth": scanner.depth,
        "in_string": scanner.in_string,
        "complete": scanner.closed,
        "invalid_from": scanner.invalid_at,
    }


def provisional_refusal(refusal) -> dict[str, Any] | None:
    """A refusal decided mid-stream, before `finish` numbers the calls."""
    if refusal is None:
        return None
    return {
        "code": refusal.code,
        "message": refusal.message,
        "frame": refusal.frame,
        "call": refusal.call.position if refusal.call is not None else None,
        "retryable": refusal.retryable,
    }


__all__ = ["LIST_GROUP", "LiveCapture", "call_state", "capture_group"]
