"""Intake of uploaded files: tell the format, split a HAR into its event
streams, and store each stream as a capture, all or nothing.

HAR request headers (Authorization, cookies, api keys) are never read: only
each event-stream response body is stored.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from inspector.assembly import (
    AUTO,
    AUTO_DIALECT,
    HAR,
    UnreadableInput,
    detect_format,
    dialect_from_url,
    read_har,
)

from . import models
from .store import store_stream
from .uploads import check_size


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
    check_size(len(data))
    if fmt == AUTO:
        fmt = detect_format(name, data)
    title = title or (name or "")
    if fmt != HAR:
        return [
            store_stream(data, stream_format=fmt, input_format=fmt, title=title, dialect=dialect)
        ]
    streams = read_har(data)
    group = secrets.token_urlsafe(12) if len(streams) > 1 else ""
    with transaction.atomic():
        return [
            store_stream(
                stream.body,
                stream_format="sse",
                input_format=HAR,
                title=_har_title(title, stream.position, len(streams)),
                group=group,
                har_entry=stream.position,
                source_url=_public_url(stream.url),
                provider=_host(stream.url),
                http_status=stream.status,
                started_at=_started_at(stream.started),
                dialect=dialect,
                hint=dialect_from_url(stream.url),
            )
            for stream in streams
        ]


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
    return title if count == 1 else f"{title} [stream {position + 1} of {count}]"


__all__ = ["UnreadableInput", "store_upload"]
