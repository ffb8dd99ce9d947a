"""Closing live captures that a dead process left open.

A live capture (proxy, ingest) stores each frame as it completes, but its
assemblies, calls and summary are written only when it closes.  When the
server process dies mid-stream (killed, crashed, the machine rebooted) the
capture stays "live" for ever, with its frames and nothing else.

`recover_interrupted()` closes such captures: the stored frames' text is
joined back into a stream (`store.stored_stream`), assembled under every
policy, and written with `store.close_capture`, exactly as a live capture
that ended there would have been.  Every stored frame is kept; the bytes that
had arrived after the last complete frame were never stored and are gone, so
the strict assembly usually refuses INCOMPLETE_STREAM (or whatever the
frames say).  The capture keeps its source and request; `finished` is set,
and `interrupted`: even when the frames stored make a complete stream (the
process died after `finish_reason` but before `[DONE]`, which the spec
accepts), the page and the API say the recording was cut short.

Telling "left by a dead process" from "still being recorded by another
process" needs a rule: a capture is stale when nothing was stored for it for
INSPECTOR_LIVE_STALE_SECONDS (default 120): its last frame's arrival
(`created` plus the frame's `arrived_ms`), or its creation when it has none.
`force=True` closes every live capture: right for a single-process server at
startup (`manage.py recover_live --force`, which `make run` runs), wrong
while another process is recording.

Differences from the bytes as received: a NUL in a frame was stored as
U+FFFD (see store._text) and CRLF line endings as LF, so `raw` is rebuilt
from the frames, not the original bytes.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, Max, OuterRef, Q
from django.utils import timezone

from inspector.captures import models
from inspector.captures.dialects import dialect_basis, requested
from inspector.captures.ingest_chunks import drop_chunks
from inspector.captures.store import assemble_stream, close_capture, model_name, stored_stream
from inspector.captures.writes import writing

from . import broadcast

logger = logging.getLogger(__name__)


def stale_seconds() -> float:
    return float(settings.INSPECTOR_LIVE_STALE_SECONDS)


def last_activity(capture: models.Capture) -> datetime:
    """When something was last stored for the capture."""
    last_ms = capture.frames.aggregate(last=Max("arrived_ms"))["last"]
    return capture.created + timedelta(milliseconds=max(last_ms or 0.0, 0.0))


def recover_interrupted(
    *, force: bool = False, stale: float | None = None, now: datetime | None = None
) -> list[models.Capture]:
    """Close every live capture left by a dead process (see the module's
    doc); the captures closed, oldest first."""
    stale = stale_seconds() if stale is None else stale
    now = now or timezone.now()
    live = models.Capture.objects.filter(outcome=models.Capture.Outcome.LIVE)
    if not force:
        # An upload being stored is live too, but its frames carry no arrival time: it
        # would look idle since its creation.  Only `--force` (one process, at start)
        # closes an upload a dead process left half-stored.
        timed = models.Frame.objects.filter(capture=OuterRef("pk"), arrived_ms__isnull=False)
        live = live.exclude(Q(source=models.Capture.Source.UPLOAD) & ~Exists(timed))
    recovered = []
    for pk in live.order_by("created", "id").values_list("pk", flat=True):
        try:
            capture = _recover(pk, force=force, stale=stale, now=now)
        except Exception:  # noqa: BLE001 - one bad capture must not stop the others
            logger.exception("recovering live capture %s failed", pk)
            continue
        if capture is not None:
            recovered.append(capture)
    return recovered


def _recover(pk: int, *, force: bool, stale: float, now: datetime) -> models.Capture | None:
    with writing(), transaction.atomic():
        # Claim it: a capture another process closes meanwhile is skipped.
        capture = (
            models.Capture.objects.select_for_update()
            .defer("raw")
            .filter(pk=pk, outcome=models.Capture.Outcome.LIVE)
            .first()
        )
        if capture is None:
            return None
        if not force and now - last_activity(capture) < timedelta(seconds=stale):
            return None
        stored = capture.frames.count()
        data = stored_stream(capture)
        # Read as it was being read: in the dialect chosen, or the one the proxy's route named.
        dialect, hint = requested(capture.dialect, capture.dialect_basis)
        frames, results = assemble_stream(data, capture.stream_format, dialect, hint)
        if len(frames) != stored:  # never expected: frames re-read as they were read
            logger.warning(
                "capture %s: %d stored frames read back as %d", capture.slug, stored, len(frames)
            )
        close_capture(
            capture,
            data,
            model_name(frames),
            results,
            interrupted=True,
            dialect_basis=dialect_basis(frames, dialect, hint),
        )
        drop_chunks(capture)  # an HTTP ingest capture's kept bytes: `raw` is written now
    logger.info(
        "recovered live capture %s: %d frames, %s %s",
        capture.slug,
        stored,
        capture.outcome,
        capture.refusal_code,
    )
    broadcast.announce_sync(capture, "closed")  # best effort: at startup there are usually none
    return capture


def watch_for_left_behind() -> threading.Thread:
    """Close the stale live captures now and then every half stale time, in a
    daemon thread of this server process.

    Any server start (daphne however started: `make run`, the multi-process
    recipe, a systemd unit) then closes what a dead predecessor left live,
    once it has been idle for the stale time, and no cron job is needed.
    Only stale captures: another process may be recording the rest."""

    def watch() -> None:
        while True:
            try:
                recover_interrupted()
            except Exception:  # noqa: BLE001 - the database may be down for a moment
                logger.warning("recovering live captures failed", exc_info=True)
            finally:
                connection.close()
            time.sleep(max(stale_seconds() / 2, 0.25))

    thread = threading.Thread(target=watch, name="recover-live", daemon=True)
    thread.start()
    return thread


def started_by_daphne() -> bool:
    """Is this process daphne's command line (`daphne ...`, `python -m daphne ...`)?"""
    main = sys.modules.get("__main__")
    path = Path(getattr(main, "__file__", "") or "")
    return path.name == "daphne" or path.parent.name == "daphne"
