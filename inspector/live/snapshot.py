"""What a viewer who joins a live capture late needs first: the frames
stored so far and the state of every call, re-assembled from those frames.

The snapshot is paged like the capture page: `SnapshotPager.next_page`
reads at most INSPECTOR_SNAPSHOT_FRAMES frames (one indexed query) and gives
at most that many in one `snapshot` message, `"more": true` until the last.
The consumer awaits one page at a time and stops when its socket closes, so
a capture of a million frames costs a bounded amount of work per message
and none after the viewer has left.

Calls of a live capture are only written when it closes, so a late joiner's
call state comes from running the stored frames through the assembler, page
by page as they are read; it goes out with the last page.
"""

from __future__ import annotations

from django.conf import settings

from inspector.assembly import STRICT, StreamAssembler
from inspector.captures import models

from .broadcast import (
    FrameEntry,
    SnapshotMessage,
    call_entry,
    frame_entry,
    refusal_entry,
    snapshot_message,
)

# `next_page`'s answer once every page was given.
DONE = object()


def page_size() -> int:
    return max(1, settings.INSPECTOR_SNAPSHOT_FRAMES)


class SnapshotPager:
    """The snapshot of `capture` for a viewer who has seen frames up to
    `after`, one bounded page per `next_page()` (sync ORM)."""

    def __init__(self, capture: models.Capture, after: int, size: int | None = None) -> None:
        self.capture = capture
        self.size = size or page_size()
        self.sent_up_to = after  # the last frame number given (or the viewer had)
        self.live = capture.outcome == models.Capture.Outcome.LIVE
        # A live capture's call state needs every frame from the first.
        self._read_up_to = -1 if self.live else after
        self._stream = StreamAssembler(capture.stream_format, (STRICT,)) if self.live else None
        self._separator = "\n" if capture.stream_format == "jsonl" else "\n\n"
        self._done = False

    def next_page(self) -> SnapshotMessage | None | object:
        """The next message; None when this step read only frames the viewer
        already has (a live capture's call state still needed them); DONE
        after the last."""
        if self._done:
            return DONE
        rows = list(
            self.capture.frames.filter(number__gt=self._read_up_to)
            .order_by("number")
            .only("number", "kind", "raw", "arrived_ms", "calls", "marks")[: self.size]
        )
        if rows:
            self._read_up_to = rows[-1].number
            self._feed(rows)
        entries = [self._entry(row) for row in rows if row.number > self.sent_up_to]
        if entries:
            self.sent_up_to = entries[-1]["number"]
        last = len(rows) < self.size
        if not last and not entries:
            return None
        self._done = last
        return self._message(entries, more=not last)

    def _entry(self, row: models.Frame) -> FrameEntry:
        return frame_entry(
            self.capture.slug,
            row.number,
            row.kind,
            row.raw,
            row.arrived_ms,
            calls=row.calls,
            marks=row.marks,
        )

    def _feed(self, rows: list[models.Frame]) -> None:
        if self._stream is not None:
            text = "".join(row.raw + self._separator for row in rows)
            self._stream.feed(text.encode("utf-8", "surrogatepass"))

    def _message(self, entries: list[FrameEntry], *, more: bool) -> SnapshotMessage:
        calls, refusal = [], None
        if self._stream is not None and not more:
            assembler = self._stream.assemblers[STRICT]
            calls = [call_entry(call) for call in assembler.started]
            refusal = refusal_entry(assembler.refusal)
        message = snapshot_message(self.capture, entries, calls, refusal)
        message["more"] = more
        return message
