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

from .session import call_state, provisional_refusal


def frames_after(capture: models.Capture, after: int) -> list[dict[str, Any]]:
    rows = capture.frames.filter(number__gt=after).order_by("number")
    return [
        {"number": f.number, "kind": f.kind, "raw": f.raw, "arrived_ms": f.arrived_ms}
        for f in rows.only("number", "kind", "raw", "arrived_ms")
    ]


def live_state(capture: models.Capture) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The state of every started call of a live capture, and the refusal
    already decided (or None), from its frames."""
    stream = StreamAssembler(capture.stream_format, (STRICT,))
    stream.feed(stored_stream(capture))
    assembler = stream.assemblers[STRICT]
    calls = [call_state(call, 0) for call in assembler.started]
    return calls, provisional_refusal(assembler.refusal)


def snapshot(capture: models.Capture, after: int) -> dict[str, Any]:
    calls, refusal = [], None
    if capture.outcome == models.Capture.Outcome.LIVE:
        calls, refusal = live_state(capture)
    return {
        "type": "snapshot",
        "slug": capture.slug,
        "outcome": capture.outcome,
        "refusal_code": capture.refusal_code,
        "refusal": refusal,  # a live capture's refusal, decided mid-stream
        "frames": frames_after(capture, after),
        "calls": calls,
    }
