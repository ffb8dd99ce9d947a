"""What a viewer who joins a live capture late needs first: the frames
stored so far and the state of every call, re-assembled from those frames.

The snapshot is paged like the capture page: `SnapshotPager.next_page`
reads at most INSPECTOR_SNAPSHOT_FRAMES frames (one indexed query) and gives
at most that many in one `snapshot` message, `"more": true` until the last.
The consumer awaits one page at a time and stops when its socket closes, so
a capture of a million frames costs a bounded amount of work per message
and none after the viewer has left.

Calls of a live capture (and its frames' calls and marks) are only written
when it closes, so a late joiner's rows come from running the stored frames
through the assembler, page by page as they are read, rendered by the
capture page's templates (`captures/pages/live_cards.py`): each frame's row
with its calls and marks, and the rows of the viewer's page of frames again
when the assembler says more about them than the page could (replaced in
place); the call cards and the refusal go out with the last page.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Max, QuerySet

from inspector.assembly import STRICT, StreamAssembler
from inspector.captures import dialects, models
from inspector.captures.pages.frames import FRAMES_PER_PAGE
from inspector.captures.pages.live_cards import FrameNotes, LiveCards

from .broadcast import (
    NO_CALLS,
    FinishedMessage,
    FrameEntry,
    FramesMessage,
    SnapshotMessage,
    call_entries,
    finished_message,
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
        self._rows = LiveCards(capture.slug, self._stream.assemblers[STRICT]) if self.live else None
        # The first frame of the viewer's page of frames (the page it loaded
        # holds frame `after`): its rows are sent again when they have notes.
        self._page_start = max(0, after) // FRAMES_PER_PAGE * FRAMES_PER_PAGE
        self._separator = "\n" if capture.stream_format == "jsonl" else "\n\n"
        self._done = False

    def next_page(self) -> SnapshotMessage | None | object:
        """The next message; None when this step read only frames the viewer
        already has (a live capture's call state still needed them); DONE
        after the last."""
        if self._done:
            return DONE
        rows = list(
            _stored_frames(self.capture)
            .filter(number__gt=self._read_up_to)
            .order_by("number")[: self.size]
        )
        notes: FrameNotes = {}
        if rows:
            self._read_up_to = rows[-1].number
            notes = self._feed(rows)
        entries = [self._entry(row, notes) for row in rows if self._wanted(row, notes)]
        if entries:
            self.sent_up_to = max(self.sent_up_to, entries[-1]["number"])
        last = len(rows) < self.size
        if not last and not entries:
            return None
        self._done = last
        return self._message(entries, more=not last)

    def given(self, message: SnapshotMessage) -> None:
        """The snapshot came whole from the recording's memory
        (`LiveCapture.snapshot`): nothing is left to page."""
        if message["frames"]:
            self.sent_up_to = max(self.sent_up_to, message["frames"][-1]["number"])
        self._done = True

    def _wanted(self, row: models.Frame, notes: FrameNotes) -> bool:
        """A frame the viewer has not got, or one of its page whose row the
        assembler has calls or marks for (the stored row has none yet)."""
        if row.number > self.sent_up_to:
            return True
        calls, marks = notes.get(row.number, ((), ()))
        return row.number >= self._page_start and bool(calls or marks)

    def _entry(self, row: models.Frame, notes: FrameNotes) -> FrameEntry:
        dialect = self._rows.assembler.dialect if self._rows is not None else self.capture.dialect
        return _stored_entry(self.capture.slug, row, dialect, notes)

    def _feed(self, rows: list[models.Frame]) -> FrameNotes:
        """Run the rows through the assembler (a live capture's); their notes."""
        if self._stream is None:
            return {}
        text = "".join(row.raw + self._separator for row in rows)
        self._stream.feed(text.encode("utf-8", "surrogatepass"))
        self._rows.read()
        return self._rows.frame_notes(row.number for row in rows)

    def _message(self, entries: list[FrameEntry], *, more: bool) -> SnapshotMessage:
        calls, refusal, refusal_html, dialect_html = [], None, "", ""
        if self._rows is not None and not more:
            calls = call_entries(self._rows.cards(every=True, throttle=False))
            refusal = refusal_entry(self._rows.assembler.refusal)
            refusal_html = self._rows.refusal_html()
            if self._rows.assembler.dialect != self.capture.dialect:  # told by its frames since
                dialect_html = self._rows.dialect_html(dialects.FRAMES)
        message = snapshot_message(
            self.capture, entries, calls, refusal, refusal_html, dialect_html
        )
        message["more"] = more
        return message


def missed_message(capture: models.Capture, after: int, before: int, limit: int) -> FramesMessage:
    """The rows of up to `limit` stored frames numbered after `after` and
    before `before`, as stored (the calls each touched as far as known then;
    marks come at the close), in a frames message: for a viewer whose live
    messages for them never came (a channel layer that drops a group send
    to a full channel: channels' in-memory and list-based Redis layers).
    The calls' cards come with the next message that changes them."""
    # Told by the frames since the viewer joined, perhaps: the rows name fields in its terms.
    stored = models.Capture.objects.filter(pk=capture.pk).values_list("dialect", flat=True)
    dialect = stored.first() or capture.dialect
    rows = (_stored_frames(capture).filter(number__gt=after, number__lt=before).order_by("number"))[
        :limit
    ]
    entries = [_stored_entry(capture.slug, row, dialect) for row in rows]
    return {"type": "frames", "slug": capture.slug, "frames": entries, **NO_CALLS}


def _stored_entry(
    slug: str, row: models.Frame, dialect: str, notes: FrameNotes | None = None
) -> FrameEntry:
    """A stored frame's row, with its calls and marks as `notes` says (an
    assembly of the frames read so far), else as stored."""
    calls, marks = (notes or {}).get(row.number, (row.calls, row.marks))
    return frame_entry(
        slug, row.number, row.kind, row.raw, row.arrived_ms,
        calls=calls, marks=marks, did=row.did, dialect=dialect,
    )  # fmt: skip


def _stored_frames(capture: models.Capture) -> QuerySet[models.Frame]:
    """The capture's frames with what a viewer's row needs of them.  Not
    `capture.frames`: a related manager sets each row's capture, reading
    `capture_id`, which `only()` defers: one more query per frame."""
    return models.Frame.objects.filter(capture=capture).only(
        "number", "kind", "raw", "arrived_ms", "calls", "marks", "did"
    )


def stored_progress(capture: models.Capture) -> tuple[int, FinishedMessage | None]:
    """The number of the last frame stored (-1: none), and the closing
    message of the capture when it is no longer live (the outcome as
    stored; the page it swaps in says the rest): what a viewer whose live
    messages stopped coming asks."""
    # The row first: frames stored and the close committed between the two reads are
    # then among the frames read (a capture closes after its last frame is stored).
    row = (
        models.Capture.objects.filter(pk=capture.pk)
        .only("slug", "outcome", "lenient_outcome", "frame_count")
        .first()
    )
    last = models.Frame.objects.filter(capture=capture).aggregate(last=Max("number"))["last"]
    closed = None
    if row is None:  # deleted: the page the viewer is told to fetch says so
        closed = {**finished_message(capture, None, None), "outcome": "deleted"}
    elif row.outcome != models.Capture.Outcome.LIVE:
        closed = finished_message(row, None, None)
    return (-1 if last is None else last), closed
