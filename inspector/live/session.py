"""A capture recorded while its bytes arrive.

Intake (the proxy, the ingest socket and endpoint) hands raw bytes to a
`LiveCapture` as it reads them.  Each `append` (one HTTP append) or
`append_reads` (a recorder's batch of reads) runs the bytes through the same
one-pass assembler an upload uses, stores the frames they completed with
their arrival times, and returns one batch message describing them, for the
channel layer to fan out.  One message per batch, never one per fragment,
so a fast stream cannot overflow a channel's capacity.

The ORM calls here are synchronous; async callers wrap them in
`sync_to_async` (see `recorder.py`).

A recorder's live capture also keeps the rows it stored last (`snapshot`): a
viewer who joins a capture this process records gets them, and every call's
card, from memory, at once.  From the database (`snapshot.SnapshotPager`) the same
snapshot means reading every frame from the first and assembling them again,
which at thousands of frames a second took the viewer 100-300 ms to catch up
(bench/README.md).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from contextlib import AbstractContextManager
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.template.loader import get_template

from inspector.assembly import AUTO_DIALECT, STRICT
from inspector.captures import models
from inspector.captures.pages.frames import FRAMES_PER_PAGE, ROW_TEMPLATE, frames_path
from inspector.captures.pages.live_cards import (
    CARD_TEMPLATE,
    DIALECT_TEMPLATE,
    PROCESS_CARDS,
    REFUSAL_TEMPLATE,
    CardToRender,
    LiveCards,
    Rendered,
)
from inspector.captures.store import open_capture
from inspector.captures.writer import LIVE, CaptureWriter
from inspector.captures.writes import own_connection_done, own_connection_step, write_step

from .broadcast import (
    FinishedMessage,
    FrameEntry,
    FramesMessage,
    SnapshotMessage,
    call_entries,
    finished_message,
    frame_entry,
    frames_message,
    refusal_entry,
    snapshot_message,
)

# The rows a live capture keeps for viewers who join (`LiveCapture.snapshot`),
# the newest first to go past this many characters of HTML: about 1,500 rows
# of a chat stream, more than a viewer's page of rows plus what a stream at
# 5,000 frames a second adds while the page loads and its socket connects.
ROWS_KEPT_HTML = 2 * 1024 * 1024

# A frame's row as sent, and whether it carries calls or marks (`_rows`).
Row = tuple[FrameEntry, bool]


@functools.cache
def warm_up() -> None:
    """Load (compile) the templates the live rows and cards are rendered
    with, once a process, when its first live capture opens: else the first
    frames of the first stream wait tens of milliseconds for it."""
    for name in (ROW_TEMPLATE, CARD_TEMPLATE, REFUSAL_TEMPLATE, DIALECT_TEMPLATE):
        get_template(name)


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
        started: float | None = None,
        keep_rows: bool = False,
        own_connection: bool = False,
    ) -> None:
        self.writer = CaptureWriter(capture, dialect=dialect, hint=hint, insert=LIVE)
        self.capture = capture
        self.stream = self.writer.stream
        self.strict = self.writer.strict
        self._clock = clock
        self._started = clock() if started is None else started
        self.rows = LiveCards(capture.slug, self.strict)
        # `keep_rows` (a recorder's capture, `recorder.recording_of`): the rows
        # stored last are kept, oldest first, for `snapshot`, with their HTML's
        # length in all.  Not once another process stored frames (`catch_up`).
        self._keeping = keep_rows
        self._kept: deque[Row] = deque()
        self._kept_html = 0
        # The writing thread appends while a joining viewer's `snapshot` reads
        # and a recorder's side lane takes fragments and cards (`store_fragments`,
        # `due_cards`); `_closing` answers a joiner at once while the close holds it.
        self._lock = threading.Lock()
        self._closing = False
        # `own_connection` (a recorder's): appended to by one thread, its
        # fragments written by another (the recorder's side lane), each on that
        # thread's connection, which other recordings' steps may share, one
        # after another (`live.recording_threads`), but no other request: their
        # steps are `writes.own_connection_step`s.
        self._own_connection = own_connection
        # Whether the side lane has work, as the last `append_reads` found it
        # under the lock (the event loop reads it: a bool, no set iterated).
        self.side_work_due = False
        self.card_budget = PROCESS_CARDS  # the process's, for `due_cards`
        warm_up()

    @classmethod
    def open(
        cls,
        *,
        stream_format: str = "sse",
        dialect: str = AUTO_DIALECT,
        keep_rows: bool = False,
        **meta: Any,
    ) -> LiveCapture:
        capture = open_capture(stream_format=stream_format, **meta)
        return cls(capture, dialect=dialect, keep_rows=keep_rows)

    @classmethod
    def resume(cls, capture: models.Capture, received: bytes, *, dialect: str) -> LiveCapture:
        """Continue a capture whose frames so far are stored (by this process
        or another): the assembler is rebuilt from the bytes `received`, the
        frames they make are not stored again, and no message repeats them.
        Arrival times count from the capture's creation (wall clock), so
        every process stamps them alike."""
        live = cls(capture, clock=time.time, dialect=dialect, started=capture.created.timestamp())
        live.catch_up(received)
        return live

    def catch_up(self, data: bytes) -> None:
        """Take bytes another process appended (and stored the frames of):
        the assembler reads them, nothing is stored, and the next message
        tells only what comes after them."""
        with self._lock:
            self.writer.replay(data)
            self.rows.caught_up()
            self._kept.clear()
            self._kept_html, self._keeping = 0, False

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

    def append(self, data: bytes, *, throttle: bool = True) -> FramesMessage | None:
        """Take the next bytes; the batch message for the frames they
        completed and the cards due, or None for neither.  `throttle`: hold
        back the card of a call rendered less than RENDER_INTERVAL ago
        (`held_back` says so; `held_cards` renders them later)."""
        with self._lock:
            self.writer.feed(data)
            now = self.elapsed_ms()
            return self._message(self._rows(self.writer.flush(now), now), throttle=throttle)

    def append_reads(self, reads: list[tuple[bytes, float]]) -> FramesMessage | None:
        """Take a batch of reads, each `(bytes, clock time it arrived)`; the
        one message for all the frames they completed (no cards: `due_cards`
        renders those apart).  The rows are rendered before the frames are
        written, in one transaction (one commit a batch), or for a recorder's
        own connection in one COPY (`writes.own_connection_step`; its
        fragments are written apart: `store_fragments`); the message is only
        sent after that, so a viewer is never told of a frame that is not
        stored.  `side_work_due` then says whether either is due."""
        with self._lock:
            writer = self.writer
            for data, arrived in reads:
                writer.feed(data, self._elapsed_at(arrived))
            frames = writer.take()
            rows = self._rows(frames, self.elapsed_ms())
            message = self._message(rows, cards=False)
            try:
                with self._write_step():  # (a recorder's fragments: `store_fragments`)
                    writer.store(frames, fragments=not self._own_connection)
            except BaseException:
                writer.lost_writes()  # which fragment rows the batch kept is unknown
                raise
            self._keep(rows)
            self.side_work_due = self.fragments_due or (
                self.rows.card_due and self.card_budget.open()
            )
            return message

    def _write_step(self) -> AbstractContextManager[None]:
        """A step of this capture's writes before its close (whose last
        commit waits): on a recorder's own connection, `own_connection_step`."""
        return own_connection_step() if self._own_connection else write_step()

    @property
    def fragments_due(self) -> bool:
        """Whether a recorder's `store_fragments` is due (it may find no rows)."""
        return self._own_connection and not self.closed and self.writer.fragments_due

    def store_fragments(self) -> None:
        """A recorder's started calls' new fragments (every
        FRAGMENT_SECONDS), apart from its batches: taken under the lock and
        written outside it by the recorder's side lane, on its thread's
        connection, while the frames' batches go on (the viewers are told of
        frames; the fragments' COPY need not delay them).  When it fails,
        the close writes every call's fragments again."""
        with self._lock:
            if self.closed:
                return
            rows = self.writer.new_fragment_rows()
        if not rows:  # (a stream of text: no statement at all)
            return
        try:
            with self._write_step():
                self.writer.store_fragment_rows(rows)
        except BaseException:
            with self._lock:
                self.writer.lost_writes()
            raise

    def due_cards(self) -> FramesMessage | None:
        """The cards the throttle lets out now (`LiveCards.cards_to_render`),
        if any: their contexts taken under the lock, rendered outside it, so
        a recorder's batches go on while a long call's card renders."""
        return self._cards(throttle=True)

    def held_cards(self) -> FramesMessage | None:
        """The cards held back, rendered now (no frame came meanwhile)."""
        return self._cards(throttle=False)

    def _cards(self, *, throttle: bool) -> FramesMessage | None:
        """A message of cards alone.  It carries no refusal or dialect note
        (the frames' messages do): it may go out after a later batch's.  A
        card taken while a viewer joins may reach it after its snapshot: the
        newer card, then (the viewer's consumer keeps the newest: `_fresh_cards`).
        The cards are noted as sent (`LiveCards.sent`, given to joiners),
        or, when rendering failed, their calls as changed again.  Throttled,
        they also wait for the process's `card_budget`."""
        budget = self.card_budget if throttle else None
        with self._lock:
            if self.closed or (throttle and not self.rows.card_due):
                return None
            if budget is not None and not budget.take():
                return None
            started = time.perf_counter()  # the cards' cost, for the throttles' spacing
            cards: list[CardToRender] = []
            try:
                self.rows.read()
                refusal = refusal_entry(self.strict.refusal)
                cards = self.rows.cards_to_render(throttle=throttle)  # (the last step here)
            finally:
                if budget is not None and not cards:
                    budget.spent(0.0)  # none taken: open again
            if not cards:
                return None
        rendered: list[Rendered] = []
        try:
            rendered = [card.render() for card in cards]
        finally:
            cost = time.perf_counter() - started  # (not the wait for the lock)
            if budget is not None:
                budget.spent(cost)
            with self._lock:
                if budget is not None:
                    self.rows.rendered(cost)
                if rendered:
                    self.rows.sent(rendered)
                else:
                    self.rows.taken_back(card.position for card in cards)
        return frames_message(self.capture.slug, [], call_entries(rendered), refusal)

    def _elapsed_at(self, moment: float) -> float:
        return round((moment - self._started) * 1000, 3)

    @property
    def held_back(self) -> bool:
        """Whether some call's card was held back by the throttle."""
        return self.rows.held_back

    def snapshot(self, after: int) -> tuple[SnapshotMessage, models.Capture] | None:
        """What a viewer who has the frames up to `after` needs first, from
        memory: the rows kept after `after` (and those of the viewer's page
        of frames with calls or marks: its rows as stored lack them), the
        newest calls' cards as the watching viewers have them (`LiveCards.
        cards_for_joiner`) and the refusal as it is now, with a copy of the
        capture's row as of then (`_detached`); None when the rows needed are
        not kept, or the capture closes: the viewer reads the database
        (`snapshot.SnapshotPager`).  No query.  A card rendered for the
        joiner has its context taken under the lock and is rendered outside
        it (about 3 ms a card of a long call: the recording's next batch
        waited for them).  The rows are those the
        watching viewers got: a frame read before the header of its call
        (arguments first) carries that call from the close on, as for them;
        the database's pages, assembled again, show it at once."""
        page_start = max(0, after) // FRAMES_PER_PAGE * FRAMES_PER_PAGE
        if self._closing:  # the close holds the lock for as long as it writes
            return None
        with self._lock:
            kept_from = self._kept[0][0]["number"] if self._kept else 0  # none stored yet
            if self.closed or not self._keeping or page_start < kept_from:
                return None
            entries = [
                entry
                for entry, noted in self._kept
                if entry["number"] > after or (noted and entry["number"] >= page_start)
            ]
            cards = self.rows.cards_for_joiner()
            message = snapshot_message(
                self.capture,
                entries,
                [],
                refusal_entry(self.strict.refusal),
                self.rows.refusal_html(),
                self.rows.current_dialect_html(self.writer.basis),
            )
            capture = _detached(self.capture)
        rendered = [card if type(card) is Rendered else card.render() for card in cards]
        message["calls"] = call_entries(rendered)
        message["more"] = False
        return message, capture

    def _keep(self, rows: list[Row]) -> None:
        """Keep the rows of frames just stored, dropping the oldest past
        ROWS_KEPT_HTML."""
        if not self._keeping:
            return
        kept = self._kept
        for row in rows:
            kept.append(row)
            self._kept_html += len(row[0]["html"])
        while self._kept_html > ROWS_KEPT_HTML and len(kept) > 1:
            self._kept_html -= len(kept.popleft()[0]["html"])

    def close(self, **meta: Any) -> FinishedMessage:
        """End of input: store the assemblies; the closing message.  It
        carries the last frames' rows but no card: a viewer's page swaps in
        the finished page's main part on it, every card as stored (rendering
        them here was a fifth of a 25,000-frame capture's close, for rows the
        page replaced at once)."""
        self._closing = True
        with self._lock:
            if self.closed:
                raise RuntimeError("live capture closed twice")
            now = self.elapsed_ms()
            if self._own_connection:
                own_connection_done()
            capture, last = self.writer.finish(arrived_ms=now, **meta)
            return finished_message(
                capture,
                self._message(self._rows(last, now), cards=False),
                refusal_entry(self.stream.results[STRICT].refusal),
            )

    def _rows(self, frames: list, now: float) -> list[Row]:
        """Read what the assembler logged since the last time; the rows of
        `frames` (each stamped with its arrival time, `now` when it has
        none), rendered by the capture page's row template."""
        self.rows.read()
        notes = self.rows.frame_notes(frame.number for frame in frames)
        slug = self.capture.slug
        did, dialect = self.writer.last_did, self.strict.dialect
        times = self.writer.last_arrived_ms if frames else []
        frames_at = frames_path(slug)
        return [
            (frame_entry(slug, f.number, f.kind.value, f.raw, now if at is None else at,
                         calls=notes[f.number][0], marks=notes[f.number][1],
                         did=did.get(f.number, []), dialect=dialect, frames_at=frames_at),
             bool(notes[f.number][0] or notes[f.number][1]))
            for f, at in zip(frames, times, strict=True)
        ]  # fmt: skip

    def _message(
        self, rows: list[Row], *, throttle: bool = True, cards: bool = True
    ) -> FramesMessage | None:
        """The message of `rows` and, with `cards`, of the calls that
        changed (`LiveCards`, after `_rows` read the assembler); None when
        no frame came and no card is due."""
        slug = self.capture.slug
        entries = [entry for entry, _ in rows]
        cards = self.rows.cards(throttle=throttle) if cards else []
        if cards:  # (not on a recorder's batches: they carry none)
            self.rows.sent(cards)
        if not entries and not cards:
            return None
        refusal = refusal_entry(self.strict.refusal)
        return frames_message(
            slug,
            entries,
            call_entries(cards),
            refusal,
            self.rows.refusal_html(),
            self.rows.dialect_html(self.writer.basis),
        )


def _detached(capture: models.Capture) -> models.Capture:
    """A copy of `capture`'s row as it is now, its raw bytes deferred: a
    viewer's copy, which the recording's thread does not change under it."""
    names = [field.attname for field in capture._meta.concrete_fields if field.attname != "raw"]
    return models.Capture.from_db(DEFAULT_DB_ALIAS, names, [getattr(capture, n) for n in names])


__all__ = ["LiveCapture"]
