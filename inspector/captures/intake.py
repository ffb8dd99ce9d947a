"""Intake of uploaded files: tell the format, split a HAR into its event
streams, and store each stream as a capture; all or nothing.

An upload is planned first (`plan_upload`: size, format, a HAR's entries and
streams, each held to its limit in `uploads.py`), with nothing stored; then
stored in steps (`upload_steps`), each one short write transaction of at
most INSPECTOR_UPLOAD_BATCH_FRAMES frames through `writer.CaptureWriter`.
Between two steps no transaction is open, so other writers (live frames
above all) never wait for a whole upload: on SQLite, the one write lock is
held for one batch at a time.  (On PostgreSQL a step's COMMIT is answered
while the next step is read; on SQLite a large upload's steps are written by
a child process while this one reads the next: `step_writers.py`.)  An
upload that fails or is given up half-way (`discard`) has its captures
deleted, again in short transactions.

`store_upload` runs the steps in the caller's thread (the upload page);
`store_upload_async` runs each in a worker thread and awaits it, so an async
view cancelled because its client went away stops after the step in hand
(Django's ASGI handler cancels only async views: a sync view's thread cannot
be stopped).

HAR request headers (Authorization, cookies, api keys) are never read: only
each event-stream response body is stored.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from inspector.assembly import (
    AUTO,
    AUTO_DIALECT,
    HAR,
    Frame,
    UnreadableInput,
    dialect_from_url,
    read_har,
    settle_format,
    slices,
)

from . import models
from .planner_stats import refresh_frame_statistics
from .step_writers import step_writer
from .uploads import check_capture_count, check_har_entries, check_size
from .writer import BULK, CaptureWriter
from .writes import uploading, writing

# Bytes fed to the assembler at a time: a step's frames are at most a batch
# plus what one slice completes.
FEED_SLICE = 16 * 1024


@dataclass
class PlannedStream:
    """One capture an upload will make: its bytes and its columns."""

    body: bytes
    stream_format: str
    input_format: str
    meta: dict[str, Any] = field(default_factory=dict)
    dialect: str = AUTO_DIALECT  # forced, or auto
    hint: str | None = None  # the dialect a HAR entry's request URL names
    stream_label: str = ""  # "stream 2 of 3" for one of a HAR's several streams


def plan_upload(
    data: bytes,
    *,
    name: str | None = None,
    fmt: str = AUTO,
    title: str = "",
    dialect: str = AUTO_DIALECT,
) -> list[PlannedStream]:
    """The captures an upload makes, nothing stored yet.

    Raises `uploads.TooLarge` (or its `OverLimit`: too many HAR entries or
    streams), or UnreadableInput with a one-line reason.
    """
    check_size(len(data))
    if fmt == AUTO:
        fmt = settle_format(name, data)
    title = title or (name or "")
    if fmt != HAR:
        return [PlannedStream(data, fmt, fmt, {"title": title}, dialect)]
    check_har_entries(_har_entry_count(data))
    streams = read_har(data)
    check_capture_count(len(streams))
    har_upload = secrets.token_urlsafe(12) if len(streams) > 1 else ""
    return [
        PlannedStream(
            stream.body,
            "sse",
            HAR,
            {
                "title": _har_title(title, stream.position, len(streams)),
                "har_upload": har_upload,
                "har_entry": stream.position,
                "source_url": _public_url(stream.url),
                "provider": _host(stream.url),
                "http_status": stream.status,
                "started_at": _started_at(stream.started),
            },
            dialect,
            dialect_from_url(stream.url),
            f"stream {stream.position + 1} of {len(streams)}" if len(streams) > 1 else "",
        )
        for stream in streams
    ]


def _har_entry_count(data: bytes) -> int:
    """How many entries the HAR's log.entries holds (0 when it is not one:
    `read_har` then says why)."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return 0
    log = document.get("log") if type(document) is dict else None
    entries = log.get("entries") if type(log) is dict else None
    return len(entries) if type(entries) is list else 0


def upload_steps(plan: list[PlannedStream], stored: list[models.Capture]) -> Iterator[None]:
    """Store the planned captures, yielding after each write transaction
    (never inside one); each capture is appended to `stored` as it opens."""
    batch = _batch_frames()
    for planned in plan:
        with writing(), transaction.atomic():
            writer = CaptureWriter.open(
                stream_format=planned.stream_format,
                input_format=planned.input_format,
                keep_bytes=False,
                spill=True,
                insert=BULK,
                dialect=planned.dialect,
                hint=planned.hint,
                **planned.meta,
            )
        stored.append(writer.capture)
        yield
        with uploading():
            yield from _stored_steps(writer, planned.body, batch)
            label = planned.stream_label
            untitled = partial(readable_title, label=label)
            writer.finish(planned.body, finished=False, untitled=untitled)
        yield
    if refresh_frame_statistics(sum(capture.frame_count for capture in stored)):
        yield


def _stored_steps(writer: CaptureWriter, body: bytes, batch: int) -> Iterator[None]:
    """A capture's frames stored a step at a time (`step_writers`), yielding
    after each, once the step is handed over."""
    steps = step_writer(len(body))
    taken = _taken(writer, body, batch)
    try:
        frames = next(taken, None)
        while frames is not None:
            with steps.step() as rows:
                writer.store(frames, rows)
            frames = next(taken, None)  # read while the step is written or committed
            steps.settle()
            yield
        steps.finish()
    except BaseException:  # the upload fails, or is given up: `discard` comes next
        steps.abandon()
        raise


def _taken(writer: CaptureWriter, body: bytes, batch: int) -> Iterator[list[Frame]]:
    """The frames of each of an upload's steps, read (assembled, what they
    did filed: `CaptureWriter.take`) when asked for; no query is made."""
    for piece in slices(body, FEED_SLICE):
        writer.feed(piece)
        if len(writer.pending) >= batch:
            yield writer.take()


def readable_title(capture: models.Capture, label: str = "") -> str:
    """The title of an upload given none (pasted text, an API body):
    "format · first model · time", e.g. "sse · gpt-4o-mini · 2026-12-01 19:40 UTC"."""
    when = capture.created.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [capture.input_format, capture.model, when, label]
    return " · ".join(part for part in parts if part)[:200]


def _batch_frames() -> int:
    return max(1, settings.INSPECTOR_UPLOAD_BATCH_FRAMES)


def discard(stored: list[models.Capture]) -> None:
    """Delete the captures of an upload that failed or was given up, a batch
    of frames per transaction."""
    for capture in stored:
        while True:
            with writing(), transaction.atomic():
                batch = list(capture.frames.values_list("pk", flat=True)[: _batch_frames()])
                if not batch:
                    models.Capture.objects.filter(pk=capture.pk).delete()
                    break
                models.Frame.objects.filter(pk__in=batch).delete()


def store_planned(plan: list[PlannedStream]) -> list[models.Capture]:
    """Store planned captures in this thread; on any failure none is kept."""
    stored: list[models.Capture] = []
    steps = upload_steps(plan, stored)
    try:
        for _ in steps:
            pass
    except BaseException:
        steps.close()
        discard(stored)
        raise
    return stored


def store_upload(
    data: bytes,
    *,
    name: str | None = None,
    fmt: str = AUTO,
    title: str = "",
    dialect: str = AUTO_DIALECT,
) -> list[models.Capture]:
    """Store an uploaded file as one capture, or a HAR as one per stream.

    `dialect` forces the wire format (else auto; a HAR entry's request URL
    is the hint that decides auto).

    Raises `uploads.TooLarge`, or UnreadableInput with a one-line reason;
    then nothing was stored.
    """
    return store_planned(plan_upload(data, name=name, fmt=fmt, title=title, dialect=dialect))


def advance(steps: Iterator[None]) -> bool:
    """Run the next step; False when there was none left."""
    return next(steps, _DONE) is not _DONE


_DONE = object()


async def store_planned_async(plan: list[PlannedStream]) -> list[models.Capture]:
    """`store_planned`, one step per await: cancelled (the client went
    away), it stops after the step running and deletes what it stored."""
    stored: list[models.Capture] = []
    steps = upload_steps(plan, stored)
    step = sync_to_async(advance)
    try:
        while await step(steps):
            pass
    except BaseException:
        await sync_to_async(_abandon)(steps, stored)
        raise
    return stored


def _abandon(steps: Iterator[None], stored: list[models.Capture]) -> None:
    steps.close()  # type: ignore[attr-defined]
    discard(stored)


def _started_at(text: str | None) -> datetime | None:
    """A HAR entry's startedDateTime (ISO 8601) as an aware UTC datetime;
    None when it is missing or not a time, which does not make the rest of the
    entry unreadable.  Without an offset it is taken as UTC."""
    if not text:
        return None
    try:
        value = parse_datetime(text)
        if value is None:
            return None
        if timezone.is_naive(value):
            return timezone.make_aware(value, UTC)
        return value.astimezone(UTC)
    except (ValueError, OverflowError):  # e.g. month 13, or past year 9999 in UTC
        return None


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:  # a HAR can hold any text as a URL
        return ""


def _public_url(url: str) -> str:
    """The request URL without what may carry a secret: user info, the
    query string (`?key=...`) and the fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _har_title(title: str, position: int, count: int) -> str:
    """The title given, numbered when the HAR holds several streams; none
    when none was given (`readable_title` then names each)."""
    return title if count == 1 or not title else f"{title} [stream {position + 1} of {count}]"


__all__ = [
    "PlannedStream",
    "UnreadableInput",
    "plan_upload",
    "store_planned",
    "store_planned_async",
    "store_upload",
    "upload_steps",
]
