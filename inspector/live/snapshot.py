"""What a viewer who joins a live capture late needs first: the frames
stored so far and the state of every call, re-assembled from those frames.

Calls of a live capture are only written when it closes, so a late joiner's
call state comes from running the stored frames through the assembler once.
"""

from __future__ import annotations

from inspector.assembly import STRICT, StreamAssembler
from inspector.captures import models
from inspector.captures.store import stored_stream

from .broadcast import (
    CallEntry,
    FrameEntry,
    RefusalEntry,
    SnapshotMessage,
    call_entry,
    frame_entry,
    refusal_entry,
    snapshot_message,
)


def frames_after(capture: models.Capture, after: int) -> list[FrameEntry]:
    rows = capture.frames.filter(number__gt=after).order_by("number")
    return [
        frame_entry(f.number, f.kind, f.raw, f.arrived_ms)
        for f in rows.only("number", "kind", "raw", "arrived_ms")
    ]


def live_state(capture: models.Capture) -> tuple[list[CallEntry], RefusalEntry | None]:
    """The state of every started call of a live capture, and the refusal
    already decided (or None), from its frames."""
    stream = StreamAssembler(capture.stream_format, (STRICT,))
    stream.feed(stored_stream(capture))
    assembler = stream.assemblers[STRICT]
    return [call_entry(call) for call in assembler.started], refusal_entry(assembler.refusal)


def snapshot(capture: models.Capture, after: int) -> SnapshotMessage:
    calls, refusal = [], None
    if capture.outcome == models.Capture.Outcome.LIVE:
        calls, refusal = live_state(capture)
    return snapshot_message(capture, frames_after(capture, after), calls, refusal)
