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
"""

from __future__ import annotations

import functools
import time
from typing import Any

from django.template.loader import get_template

from inspector.assembly import AUTO_DIALECT, STRICT
from inspector.captures import models
from inspector.captures.pages.frames import ROW_TEMPLATE, frames_path
from inspector.captures.pages.live_cards import (
    CARD_TEMPLATE,
    DIALECT_TEMPLATE,
    REFUSAL_TEMPLATE,
    LiveCards,
)
from inspector.captures.store import open_capture
from inspector.captures.writer import LIVE, CaptureWriter
from inspector.captures.writes import write_step

from .broadcast import (
    FinishedMessage,
    FramesMessage,
    call_entries,
    finished_message,
    frame_entry,
    frames_message,
    refusal_entry,
)


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
    ) -> None:
        self.writer = CaptureWriter(capture, dialect=dialect, hint=hint, insert=LIVE)
        self.capture = capture
        self.stream = self.writer.stream
        self.strict = self.writer.strict
        self._clock = clock
        self._started = clock() if started is None else started
        self.rows = LiveCards(capture.slug, self.strict)
        warm_up()

    @classmethod
    def open(
        cls, *, stream_format: str = "sse", dialect: str = AUTO_DIALECT, **meta: Any
    ) -> LiveCapture:
        return cls(open_capture(stream_format=stream_format, **meta), dialect=dialect)

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
        self.writer.replay(data)
        self.rows.caught_up()

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
        self.writer.feed(data)
        now = self.elapsed_ms()
        return self._message(self.writer.flush(now), now, throttle=throttle)

    def append_reads(self, reads: list[tuple[bytes, float]]) -> FramesMessage | None:
        """Take a batch of reads, each `(bytes, clock time it arrived)`; the
        one message for all the frames they completed (no cards: `due_cards`
        renders those once the frames went out).  The rows are rendered
        before the transaction opens and the frames stored in one
        transaction (one commit a batch); the message is only sent after
        it, so a viewer is never told of a frame that is not stored."""
        writer = self.writer
        for data, arrived in reads:
            writer.feed(data, self._elapsed_at(arrived))
        frames = writer.take()
        message = self._message(frames, self.elapsed_ms(), cards=False)
        try:
            with write_step():  # the close's commit waits
                writer.store(frames)
        except BaseException:
            writer.lost_writes()  # which fragment rows the batch kept is unknown
            raise
        return message

    def due_cards(self) -> FramesMessage | None:
        """The cards the throttle lets out now (`LiveCards.cards`), if any."""
        if not self.rows.card_due:
            return None
        return self._message([], self.elapsed_ms(), throttle=True)

    @property
    def card_due(self) -> bool:
        """Whether `due_cards` has a card to render now."""
        return self.rows.card_due

    def _elapsed_at(self, moment: float) -> float:
        return round((moment - self._started) * 1000, 3)

    @property
    def held_back(self) -> bool:
        """Whether some call's card was held back by the throttle."""
        return self.rows.held_back

    def held_cards(self) -> FramesMessage | None:
        """The cards held back, rendered now (no frame came meanwhile)."""
        return self._message([], self.elapsed_ms(), throttle=False)

    def close(self, **meta: Any) -> FinishedMessage:
        """End of input: store the assemblies; the closing message.  It
        carries the last frames' rows but no card: a viewer's page swaps in
        the finished page's main part on it, every card as stored (rendering
        them here was a fifth of a 25,000-frame capture's close, for rows the
        page replaced at once)."""
        if self.closed:
            raise RuntimeError("live capture closed twice")
        now = self.elapsed_ms()
        capture, last = self.writer.finish(arrived_ms=now, **meta)
        return finished_message(
            capture,
            self._message(last, now, cards=False),
            refusal_entry(self.stream.results[STRICT].refusal),
        )

    def _message(
        self, frames: list, now: float, *, throttle: bool = True, cards: bool = True
    ) -> FramesMessage | None:
        """The rows of `frames` (each stamped with its arrival time, `now`
        when it has none) and, with `cards`, of the calls that changed,
        rendered by the capture page's templates (`LiveCards`); None when no
        frame came and no card is due."""
        self.rows.read()
        notes = self.rows.frame_notes(frame.number for frame in frames)
        slug = self.capture.slug
        did, dialect = self.writer.last_did, self.strict.dialect
        times = self.writer.last_arrived_ms if frames else []
        frames_at = frames_path(slug)
        entries = [
            frame_entry(slug, f.number, f.kind.value, f.raw, now if at is None else at,
                        calls=notes[f.number][0], marks=notes[f.number][1],
                        did=did.get(f.number, []), dialect=dialect, frames_at=frames_at)
            for f, at in zip(frames, times, strict=True)
        ]  # fmt: skip
        cards = self.rows.cards(throttle=throttle) if cards else []
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


__all__ = ["LiveCapture"]
