"""What a viewer who joins a live capture late needs first: the frames
stored so far and the state of every call, re-assembled from those frames.

Calls of a live capture are only written when it closes, so a late joiner's
call state comes from running the stored frames through the assembler once.
"""

from __future__ import annotations

from typing import Any

from inspector.assembly import STRICT, StreamAssembler
from inspector.captures import models
from inspector.captures.store import stored_stream

from .session import call_state


def frames_after(capture: models.Capture, after: int) -> list[dict[str, Any]]:
    rows = capture.frames.filter(number__gt=after).order_by("number")
    return [
        {"number": f.number, "kind": f.kind, "raw": f.raw, "arrived_ms": f.arrived_ms}
        for f in rows.only("number", "kind", "raw", "arrived_ms")
    ]


def live_calls(capture: models.Capture) -> list[dict[str, Any]]:
    """The state of every started call of a live capture, from its frames."""
    stream = StreamAssembler(capture.stream_format, (STRICT,))
    stream.feed(stored_stream(capture))
    assembler = stream.assemblers[STRICT]
    return [call_state(call, 0) for call in assembler.started]


def snapshot(capture: models.Capture, after: int) -> dict[str, Any]:
    live = capture.outcome == models.Capture.Outcome.LIVE
    return {
        "type": "snapshot",
        "slug": capture.slug,
        "outcome": capture.outcome,
        "refusal_code": capture.refusal_code,
        "frames": frames_after(capture, after),
        "calls": live_calls(capture) if live else [],
    }
