"""A capture written while its bytes are read: the one pipeline of live
recordings (`live/session.LiveCapture`) and of uploads (`intake.py`).

`feed(bytes)` runs the bytes through the assembler (every policy, one pass)
and holds the frames they completed; `flush()` stores the held frames;
`finish()` stores the rest, the assemblies and the capture's summary.  The
caller decides the transactions: a live recording flushes every read, an
upload every INSPECTOR_UPLOAD_BATCH_FRAMES frames, each in a transaction of
its own, so no capture holds the database's write lock for longer than one
batch, and memory holds one batch of frames, not the stream's.

An upload (`spill=True`) also writes each batch's events down as the batch
is stored (`spill.EventSpill`: a temporary file) and joins the small texts
the assembler took (`StreamAssembler.compact`), so that memory holds one
batch, not one event and one string per frame of the stream.  A live
recording keeps its events: a viewer's messages read them as they grow.

Until `finish()` the capture's outcome is "live": a viewer can watch it, and
a process that dies leaves it for `recover_live`.
"""

from __future__ import annotations

from typing import Any

from inspector.assembly import AUTO_DIALECT, POLICIES, STRICT, Frame, StreamAssembler

from . import models
from .dialects import ASSUMED, dialect_basis
from .spill import EventSpill
from .store import append_frames, close_capture, model_name, open_capture


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
    ) -> None:
        self.capture = capture
        self.stream = StreamAssembler(capture.stream_format, POLICIES, dialect=dialect, hint=hint)
        # Why the stream is read in its dialect, told as the frames arrive.
        self._dialect_request = (dialect, hint)
        self.basis = dialect_basis((), dialect, hint)
        self.strict = self.stream.assemblers[STRICT]
        self.byte_size = 0
        self.model = ""
        self.closed = False
        self.pending: list[Frame] = []
        self._keep_bytes = keep_bytes
        self._chunks: list[bytes] = []
        self._spills = {policy: EventSpill() for policy in POLICIES} if spill else None

    @classmethod
    def open(
        cls,
        *,
        stream_format: str = "sse",
        keep_bytes: bool = True,
        dialect: str = AUTO_DIALECT,
        hint: str | None = None,
        spill: bool = False,
        **meta: Any,
    ) -> CaptureWriter:
        capture = open_capture(stream_format=stream_format, **meta)
        return cls(capture, keep_bytes=keep_bytes, dialect=dialect, hint=hint, spill=spill)

    @property
    def slug(self) -> str:
        return self.capture.slug

    def feed(self, data: bytes) -> list[Frame]:
        """Assemble the next bytes; the frames they completed, held until
        `flush`."""
        self.byte_size += len(data)
        if self._keep_bytes:
            self._chunks.append(data)
        frames = self.stream.feed(data)
        self.pending.extend(frames)
        return frames

    def flush(self, arrived_ms: float | None = None) -> list[Frame]:
        """Store the held frames (all arrived at `arrived_ms`); them."""
        frames, self.pending = self.pending, []
        if frames:
            append_frames(self.capture, frames, [arrived_ms] * len(frames))
            if not self.model:
                self.model = model_name(frames)
            if self.basis == ASSUMED:
                self.basis = dialect_basis(frames, *self._dialect_request)
        if self._spills is not None:
            for policy, assembler in self.stream.assemblers.items():
                self._spills[policy].add(assembler.events.drain())
            self.stream.compact()
        return frames

    def finish(
        self,
        data: bytes | None = None,
        arrived_ms: float | None = None,
        *,
        finished: bool = True,
        **meta: Any,
    ) -> tuple[models.Capture, list[Frame]]:
        """End of input: store the last frames, the assemblies and the
        summary (`data`: the whole input, when the writer kept no bytes);
        the capture and the frames the end completed."""
        if self.closed:
            raise RuntimeError("capture written to after it was finished")
        self.closed = True
        self.pending.extend(self.stream.close())
        last = self.flush(arrived_ms)
        raw = b"".join(self._chunks) if data is None else data
        meta.setdefault("dialect_basis", self.basis)
        try:
            capture = close_capture(
                self.capture,
                raw,
                self.model,
                self.stream.results,
                finished=finished,
                spills=self._spills,
                **meta,
            )
        finally:
            self.discard()
        return capture, last

    def discard(self) -> None:
        """Free the spilled events (temporary files); an upload given up calls it."""
        for spill in (self._spills or {}).values():
            spill.close()


__all__ = ["CaptureWriter"]
