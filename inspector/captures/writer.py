"""A capture written while its bytes are read: the one pipeline of live
recordings (`live/session.LiveCapture`) and of uploads (`intake.py`).

`feed(bytes)` runs the bytes through the strict assembler (one pass; the
lenient result is strict's twin, read again only where the policies part:
`_results`) and holds the frames they completed; `flush()` stores the held frames;
`finish()` stores the rest, the assemblies and the capture's summary.  The
caller decides the transactions: a live recording stores each batch of
reads (`take` then `store`, the rows rendered in between, outside the
transaction), an upload every INSPECTOR_UPLOAD_BATCH_FRAMES frames, each in
a transaction of its own, so no capture holds the database's write lock for longer than one
batch, and memory holds one batch of frames, not the stream's.

An upload (`spill=True`) also writes each batch's events down as the batch
is stored (`spill.EventSpill`: a temporary file) and joins the small texts
the assembler took (`StreamAssembler.compact`), so that memory holds one
batch, not one event and one string per frame of the stream.  A live
recording keeps its events (a viewer's messages read them as they grow)
but writes their text down too, batch by batch, so that its close does not
serialize the whole stream's events at once.

Until `finish()` the capture's outcome is "live": a viewer can watch it, and
a process that dies leaves it for `recover_live`.
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Callable
from typing import Any

from inspector.assembly import (
    AUTO_DIALECT,
    LENIENT,
    STRICT,
    Frame,
    Result,
    StreamAssembler,
    lenient_twin,
    slices,
)

from . import models
from .dialects import ASSUMED, dialect_basis
from .fast_rows import IN_PROCESS, RowSink
from .fragment_rows import FRAGMENT_FIELDS, FragmentLog
from .frame_did import FrameDid, did_by_frame
from .spill import EventSpill
from .store import append_frames, close_capture, model_name, open_capture
from .writes import write_step

# How a writer's frames are written (`store.append_frames`): as a bulk write
# (an upload) or as a live recording's batches.
BULK, LIVE = "bulk", "live"

# Bytes fed at a time when lenient reads a stream again (`_read_lenient`).
READ_SLICE = 64 * 1024

# Frames touched after they were stored, at most, before the close writes
# every frame's calls again instead of keeping their numbers.
LATE_TOUCHES = 100_000

# A live writer writes the started calls' new fragments with the batch that
# comes this long after it last wrote them, or a recorder's side lane apart
# from its batches (`LiveCapture.store_fragments`); the close writes the rest:
# one COPY or INSERT of many rows, not one a batch of a few milliseconds.
# On PostgreSQL, fragments with every batch made 20 captures at 500 frames/s
# on two processes p99 219-245 ms (131-146 with all of them left to the
# close); every 0.25 s, 152-182, but one capture at 5,000 frames/s then
# jumped at each write (p99 15.6-16.0 ms against 9.5-10.4 every 0.05 s).
# Every 0.05 s leaves at most a few hundred rows to the close (bench/README.md).
FRAGMENT_SECONDS = 0.05


class CaptureWriter:
    """Open with `CaptureWriter.open(...)`, then `feed` / `flush` as the
    bytes arrive and `finish` once.  `keep_bytes=False` when the caller
    already holds the whole input and hands it to `finish` (an upload), so
    it is not held twice; `spill=True` writes the events down batch by
    batch (see the module's docstring)."""

    def __init__(
        self,
        capture: models.Capture,
        *,
        keep_bytes: bool = True,
        dialect: str = AUTO_DIALECT,
        hint: str | None = None,
        spill: bool = False,
        insert: str = BULK,
    ) -> None:
        self.capture = capture
        self._insert = insert  # how the frames are written: BULK or LIVE
        # Strict only: lenient is strict's twin unless they part (`_results`).
        self.stream = StreamAssembler(capture.stream_format, (STRICT,), dialect=dialect, hint=hint)
        # Why the stream is read in its dialect, told as the frames arrive.
        self._dialect_request = (dialect, hint)
        self.basis = dialect_basis((), dialect, hint)
        self.strict = self.stream.assemblers[STRICT]
        self.byte_size = 0
        self.model = ""
        self.closed = False
        self.pending: list[Frame] = []
        self._pending_ms: list[float | None] = []  # the arrival time of each pending frame
        self._keep_bytes = keep_bytes
        self._chunks: list[bytes] = []
        # The events' JSON text, written down as the frames come (`EventSpill`):
        # an upload drains them (memory holds one batch of events); a live
        # recording follows them (its viewers' cards read them as they grow),
        # so that its close writes the text of the last batch's events, not
        # of the stream's.
        self._spills = {STRICT: EventSpill()} if spill or insert == LIVE else None
        self._drain = spill
        self._events_filed = 0  # strict events already filed by frame (`_frames_did`)
        self._did_seen: dict[str, Any] = {}  # what `did_by_frame` compares with
        self.last_did: FrameDid = {}  # what the frames of the last flush did (live rows)
        self.last_arrived_ms: list[float | None] = []  # when each of them arrived
        # A live writer's every stored frame's arrival time by number (NaN: none),
        # for the close's timeline; None for an upload (its frames have none) and
        # once the writer took over frames it did not store (`replay`).
        self._arrivals: array[float] | None = array("d") if insert == LIVE else None
        # The calls each frame touched, written with the frame (`_touched`).
        self.last_calls: dict[int, list[int]] = {}
        self._touches_taken: list[int] = []  # per started call: its frames already taken
        self._stored_next = 0  # the number of the first frame not yet taken
        # The stored frames that a call touched after they were stored (a
        # held frame assembled later); None once it grew past LATE_TOUCHES or
        # the writer took over stored frames (`replay`): every frame's calls
        # are written again at the close.
        self._late: set[int] | None = set()
        # What frames stored already did, filed after them (`close_capture`).
        self._late_did: FrameDid = {}
        # The strict calls' fragment rows written so far: a live writer writes
        # the started calls' every FRAGMENT_SECONDS (`store`), so the close
        # writes only the rest; an upload's are all written at its close.
        self.fragments = FragmentLog()
        self._fragments_due = 0.0  # when a live batch next writes them (FRAGMENT_SECONDS)

    @classmethod
    def open(
        cls,
        *,
        stream_format: str = "sse",
        keep_bytes: bool = True,
        dialect: str = AUTO_DIALECT,
        hint: str | None = None,
        spill: bool = False,
        insert: str = BULK,
        **meta: Any,
    ) -> CaptureWriter:
        capture = open_capture(stream_format=stream_format, **meta)
        options = {"dialect": dialect, "hint": hint, "spill": spill, "insert": insert}
        return cls(capture, keep_bytes=keep_bytes, **options)

    @property
    def slug(self) -> str:
        return self.capture.slug

    def feed(self, data: bytes, arrived_ms: float | None = None) -> list[Frame]:
        """Assemble the next bytes (arrived at `arrived_ms`); the frames they
        completed, held until `flush`."""
        self.byte_size += len(data)
        if self._keep_bytes:
            self._chunks.append(data)
        frames = self.stream.feed(data)
        self.pending.extend(frames)
        self._pending_ms.extend([arrived_ms] * len(frames))
        return frames

    def replay(self, data: bytes) -> int:
        """Feed bytes whose frames are stored already (another process
        stored them): the assembler catches up, nothing is written, and the
        next frames are numbered after them.  The frames it read again."""
        frames = self.feed(data)
        self.pending, self._pending_ms = [], []
        self._arrivals = None  # those frames' times are stored, not here
        self._frames_did()  # their events were filed by the process that stored them
        self._touched(frames)  # their calls were written by the process that stored them
        self._late = None  # which, as its own calls touched them later, this one can't know
        self.fragments.forget()  # and their fragments: the close writes every call's again
        if frames and not self.model:
            self.model = model_name(frames)
        if frames and self.basis == ASSUMED:
            self.basis = dialect_basis(frames, *self._dialect_request)
        return len(frames)

    def flush(self, arrived_ms: float | None = None) -> list[Frame]:
        """Store the held frames (all arrived at `arrived_ms`, when given;
        else each when it was fed); them."""
        frames = self.take(arrived_ms)
        self.store(frames)
        return frames

    def take(self, arrived_ms: float | None = None) -> list[Frame]:
        """The held frames, ready to `store`: what they did (`last_did`),
        when they arrived (`last_arrived_ms`), the model and dialect basis
        they tell.  Nothing is written: a live recording renders their rows
        before its transaction opens."""
        frames, self.pending = self.pending, []
        times, self._pending_ms = self._pending_ms, []
        self.last_did = self._frames_did()
        stored = self._stored_next  # the frames numbered below it are stored
        for number in [number for number in self.last_did if number < stored]:
            self._late_did.setdefault(number, []).extend(self.last_did.pop(number))
        self.last_calls = self._touched(frames)
        self._write_events_down()
        self.last_arrived_ms = times if arrived_ms is None else [arrived_ms] * len(frames)
        if frames:
            if not self.model:
                self.model = model_name(frames)
            if self.basis == ASSUMED:
                self.basis = dialect_basis(frames, *self._dialect_request)
        return frames

    def _write_events_down(self) -> None:
        """The events of the frames taken, written to the spill (see
        `_spills`): an upload's drained from the assembler, its small texts
        joined (`StreamAssembler.compact`); a live recording's kept."""
        if self._spills is None:
            return
        if not self._drain:
            self._spills[STRICT].follow(self.strict.events)
            return
        for policy, assembler in self.stream.assemblers.items():
            self._spills[policy].add(assembler.events.drain())
        self.stream.compact()

    def store(
        self, frames: list[Frame], rows: RowSink = IN_PROCESS, *, fragments: bool = True
    ) -> None:
        """Write the frames the last `take` gave (and the dialect they tell)
        to `rows` (this process's connection, or a step another process
        writes); a live writer also, every FRAGMENT_SECONDS, the started
        calls' new fragments (unless `fragments` is False: the caller writes
        them after, `store_fragments`), and a step written behind every time
        (its process's work, not this one's).  A live caller whose
        transaction fails calls `lost_writes`."""
        if not frames:
            return
        live = self._insert == LIVE
        append_frames(
            self.capture,
            frames,
            self.last_arrived_ms,
            self.last_did,
            live=live,
            calls=self.last_calls,
            rows=rows,
        )
        if rows.behind or (fragments and self.fragments_due):
            self._store_fragments(rows)
        self._store_dialect(rows)
        if self._arrivals is not None:  # as stored (a failed store adds none: see close)
            self._arrivals.extend([math.nan if t is None else t for t in self.last_arrived_ms])

    @property
    def fragments_due(self) -> bool:
        """Whether a live writer's started calls' new fragments are due
        (every FRAGMENT_SECONDS)."""
        return self._insert == LIVE and time.monotonic() >= self._fragments_due

    def new_fragment_rows(self) -> list[tuple]:
        """The started calls' fragments not written yet (`FragmentLog`, which
        counts them as written from now: a caller whose write of them fails
        calls `lost_writes`), for `store_fragment_rows`; the next are due
        FRAGMENT_SECONDS from now."""
        self._fragments_due = time.monotonic() + FRAGMENT_SECONDS
        strict = self.strict
        return list(self.fragments.new_rows(self.capture.pk, strict.started, strict.dialect))

    def store_fragment_rows(self, rows: list[tuple], sink: RowSink = IN_PROCESS) -> None:
        """Write `new_fragment_rows`'s rows (a live writer whose `store` left
        them out writes them so, apart from its batches)."""
        if rows:  # none, no statement (an empty COPY is a round trip)
            sink.insert(models.Fragment, FRAGMENT_FIELDS, rows, one_statement=True)

    def _store_fragments(self, sink: RowSink) -> None:
        self.store_fragment_rows(self.new_fragment_rows(), sink)

    def lost_writes(self) -> None:
        """A transaction that stored frames failed: which fragment rows it
        kept is unknown, so the close writes every call's again."""
        self.fragments.forget()

    def _store_dialect(self, rows: RowSink) -> None:
        """The dialect the frames are read in, written as soon as it is known
        (once, or again if the frames tell another): the page of a capture
        still being written names each frame's fields in its terms, as its
        live viewers are sent them."""
        dialect = self.strict.dialect
        if (dialect, self.basis) != (self.capture.dialect, self.capture.dialect_basis):
            self.capture.dialect, self.capture.dialect_basis = dialect, self.basis
            rows.update(models.Capture, self.capture.pk, dialect=dialect, dialect_basis=self.basis)

    def _frames_did(self) -> FrameDid:
        """What the frames fed since the last flush did: the strict events
        they caused, filed by frame (before `flush` drains them)."""
        events = self.strict.events
        new = events.items[self._events_filed - events.drained :]
        self._events_filed = len(events)
        started = self.strict.started
        return did_by_frame(new, lambda position: started[position].name, self._did_seen)

    def _touched(self, frames: list[Frame]) -> dict[int, list[int]]:
        """The started calls each of `frames` touched (the strict
        assembler's `Call.frames` entries since the last take); an entry
        for a frame taken before goes to `_late`.  Positions in order, as
        `store._frame_values` lists them."""
        first = self._stored_next
        if frames:
            self._stored_next = frames[-1].number + 1
        last = self._stored_next - 1
        taken, started, late = self._touches_taken, self.strict.started, self._late
        taken.extend([0] * (len(started) - len(taken)))
        touched: dict[int, list[int]] = {}
        for position, call in enumerate(started):
            numbers = call.frames
            if len(numbers) == taken[position]:
                continue
            for number in numbers[taken[position] :]:
                if first <= number <= last:
                    touched.setdefault(number, []).append(position)
                elif late is not None:
                    late.add(number)
            taken[position] = len(numbers)
        if late is not None and len(late) > LATE_TOUCHES:
            self._late = None
        return touched

    def _rewrite(self) -> set[int] | None:
        """The frames whose stored calls may be wrong at the close (see
        `close_capture`): those touched late, and those of the calls that
        never started (their positions are given at the end); None: all."""
        if self._late is None:
            return None
        rewrite = set(self._late)
        for call in self.strict.finish().calls[len(self._touches_taken) :]:
            rewrite.update(call.frames)
        return rewrite

    def finish(
        self,
        data: bytes | None = None,
        arrived_ms: float | None = None,
        *,
        finished: bool = True,
        untitled: Callable[[models.Capture], str] | None = None,
        **meta: Any,
    ) -> tuple[models.Capture, list[Frame]]:
        """End of input: store the last frames, the assemblies and the
        summary (`data`: the whole input, when the writer kept no bytes;
        `untitled`: names a capture given no title, see `close_capture`);
        the capture and the frames the end completed."""
        if self.closed:
            raise RuntimeError("capture written to after it was finished")
        self.closed = True
        closing = self.stream.close()
        self.pending.extend(closing)
        self._pending_ms.extend([arrived_ms] * len(closing))
        # The last frames in one transaction, as every batch before them (not a commit
        # a row, SQLite's autocommit); close_capture's last commit makes them durable.
        with write_step():
            last = self.flush(arrived_ms)
        raw = b"".join(self._chunks) if data is None else data
        meta.setdefault("dialect_basis", self.basis)
        try:
            capture = close_capture(
                self.capture,
                raw,
                self.model,
                self._results(raw),
                finished=finished,
                spills=self._spills,
                untitled=untitled,
                rewrite=self._rewrite(),
                late_did=self._late_did,
                arrived=self._arrival_times(),
                fragments=self.fragments,
                **meta,
            )
        finally:
            self.discard()
        return capture, last

    def _arrival_times(self) -> array[float] | None:
        """Each frame's arrival time by number, as `timeline_data.arrival_times`
        would read them back from the stored frames (which the close then
        needn't); None when the writer did not store every frame itself (an
        upload, a resumed capture, a batch whose store failed: the close
        reads them back) or the last frame has no time."""
        arrivals = self._arrivals
        if not arrivals or len(arrivals) != self.strict.frames or math.isnan(arrivals[-1]):
            return None
        return arrivals

    def _results(self, raw: bytes) -> dict[str, Result]:
        """Both policies' results: lenient as strict's twin, sharing its
        events (and their spill), or, where strict made a refusal lenient
        does not, read again from the stream's bytes (`raw`)."""
        strict = self.stream.results[STRICT]
        lenient = lenient_twin(strict)
        if lenient is None:
            lenient = self._read_lenient(raw)
        elif self._spills is not None:
            self._spills[LENIENT] = self._spills[STRICT]
        return {STRICT: strict, LENIENT: lenient}

    def _read_lenient(self, raw: bytes) -> Result:
        """The lenient assembly of the whole stream, its events spilled a
        slice at a time as the writer spills strict's."""
        dialect, hint = self._dialect_request
        stream = StreamAssembler(self.capture.stream_format, (LENIENT,), dialect=dialect, hint=hint)
        (assembler,) = stream.assemblers.values()
        spill = None if self._spills is None else self._spills.setdefault(LENIENT, EventSpill())
        for piece in slices(raw, READ_SLICE):
            stream.feed(piece)
            if spill is not None:
                spill.add(assembler.events.drain())
                stream.compact()
        stream.close()
        return stream.results[LENIENT]

    def discard(self) -> None:
        """Free the spilled events (temporary files); an upload given up calls it."""
        for spill in {id(spill): spill for spill in (self._spills or {}).values()}.values():
            spill.close()


__all__ = ["CaptureWriter"]
