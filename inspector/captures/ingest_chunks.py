"""The bytes an HTTP ingest capture has received, kept while it is live.

Each append is one `IngestChunk` row at the offset it was appended at; the
capture's `byte_size` is the offset the next append must name (the sum of
the chunks).  A server process that does not hold the capture's assembler
(another process took the earlier appends) reads the chunks back and feeds
them to a new one (`live/ingest.py`).  On closing, the chunks are dropped:
the capture's `raw` then holds the same bytes.
"""

from __future__ import annotations

from . import models


def add_chunk(capture: models.Capture, offset: int, data: bytes) -> int:
    """Store `data` at `offset` and move the capture's `byte_size` past it
    (in the caller's transaction, with the capture's row locked); the new
    offset."""
    models.IngestChunk.objects.create(capture=capture, offset=offset, data=data)
    end = offset + len(data)
    models.Capture.objects.filter(pk=capture.pk).update(byte_size=end)
    capture.byte_size = end
    return end


def received_bytes(capture: models.Capture, since: int = 0) -> bytes:
    """The bytes received so far from offset `since` (a chunk's start), in order."""
    chunks = capture.ingest_chunks.filter(offset__gte=since).order_by("offset")
    rows = chunks.values_list("data", flat=True)
    return b"".join(bytes(data) for data in rows.iterator())


def drop_chunks(capture: models.Capture) -> None:
    """Forget the chunks of a closed capture (its `raw` holds the bytes)."""
    models.IngestChunk.objects.filter(capture=capture).delete()


__all__ = ["add_chunk", "drop_chunks", "received_bytes"]
