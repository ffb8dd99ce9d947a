"""The upload size policy: one limit, one check, one way of saying it.

Every intake of bytes a person or script sends (the upload page, `POST
/api/captures`, an HTTP ingest append) is held to INSPECTOR_MAX_UPLOAD_BYTES
through this module.  It is read per request (not at import), so a test or an
operator changing the setting takes effect at once.

Bodies are read with `read_capped` (at most the limit and one byte), so a body
over the limit is refused without being held whole in memory; a declared
`Content-Length` over it is refused before anything is read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.http import HttpRequest

# Room for the multipart boundaries and small form fields around the file.
MULTIPART_SLACK = 64 * 1024


def max_upload_bytes() -> int:
    return settings.INSPECTOR_MAX_UPLOAD_BYTES


class TooLarge(Exception):
    """The input is over INSPECTOR_MAX_UPLOAD_BYTES; `size` is None when
    only known to be larger."""

    def __init__(self, size: int | None = None) -> None:
        limit = max_upload_bytes()
        if size is None:
            text = f"the upload is larger than this server accepts; the limit is {limit} bytes"
        else:
            text = f"the upload is {size} bytes; the limit is {limit}"
        super().__init__(text)
        self.size = size


class OverLimit(TooLarge):
    """An upload within the byte limit but over a count limit (HAR entries,
    captures per upload, a capture's total size); the message names the
    setting and its value."""

    def __init__(self, text: str) -> None:
        Exception.__init__(self, text)
        self.size = None


def check_har_entries(count: int) -> None:
    """Refuse a HAR holding more entries than INSPECTOR_MAX_HAR_ENTRIES."""
    limit = settings.INSPECTOR_MAX_HAR_ENTRIES
    if count > limit:
        raise OverLimit(
            f"the HAR holds {count} entries; the limit is {limit} (INSPECTOR_MAX_HAR_ENTRIES)"
        )


def check_capture_count(count: int) -> None:
    """Refuse an upload that would make more captures than
    INSPECTOR_MAX_CAPTURES_PER_UPLOAD."""
    limit = settings.INSPECTOR_MAX_CAPTURES_PER_UPLOAD
    if count > limit:
        raise OverLimit(
            f"the upload holds {count} event streams; the limit is {limit} captures per upload"
            " (INSPECTOR_MAX_CAPTURES_PER_UPLOAD)"
        )


def check_total_size(stored: int, more: int) -> None:
    """Refuse an append of `more` bytes to a capture holding `stored`: a
    capture's total is held to INSPECTOR_MAX_UPLOAD_BYTES like an upload."""
    limit = max_upload_bytes()
    if stored + more > limit:
        raise OverLimit(
            f"the capture would hold {stored + more} bytes; the limit is {limit}"
            " (INSPECTOR_MAX_UPLOAD_BYTES); what it holds is kept"
        )


def check_size(size: int | None) -> None:
    """Raise TooLarge when `size` (bytes; None: unknown) is over the limit."""
    if size is not None and size > max_upload_bytes():
        raise TooLarge(size)


def read_capped(read: Callable[[int], bytes], expected: int | None = None) -> bytes:
    """What `read(n)` gives, refused with TooLarge past the limit.

    `expected` (the declared Content-Length) sizes the read: a body spooled
    to a file is read into a buffer of the size asked for, the limit's when
    nothing was declared.  A body longer than declared is read on, to the
    limit and one byte."""
    limit = max_upload_bytes()
    first = limit + 1 if expected is None else min(expected, limit) + 1
    data = read(first)
    if len(data) == first <= limit:
        data += read(limit + 1 - first)
    if len(data) > limit:
        raise TooLarge()
    return data


def declared_size(request: HttpRequest) -> int | None:
    """The request's Content-Length, when it gives a usable one."""
    text = request.META.get("CONTENT_LENGTH") or ""
    return int(text) if text.isascii() and text.isdigit() else None


def check_declared_size(request: HttpRequest) -> None:
    """Refuse a body declared over the limit before reading it (a multipart
    body has MULTIPART_SLACK of room for its boundaries and fields)."""
    slack = MULTIPART_SLACK if request.content_type == "multipart/form-data" else 0
    size = declared_size(request)
    if size is not None and size > max_upload_bytes() + slack:
        raise TooLarge(size)


# -- concurrent large uploads ----------------------------------------------------------------

_large_lock = threading.Lock()
_large_running = 0


class Busy(Exception):
    """As many large uploads as INSPECTOR_MAX_LARGE_UPLOADS are being stored
    in this process: answered 503 with `Retry-After: retry_after`."""

    retry_after = 5

    def __init__(self) -> None:
        limit = settings.INSPECTOR_MAX_LARGE_UPLOADS
        super().__init__(
            f"{limit} large uploads are being stored already (INSPECTOR_MAX_LARGE_UPLOADS);"
            f" try again in {self.retry_after} s"
        )


@contextmanager
def large_upload_slot(size: int) -> Iterator[None]:
    """Hold one of the process's INSPECTOR_MAX_LARGE_UPLOADS slots while an
    upload of at least INSPECTOR_LARGE_UPLOAD_BYTES is stored; raise Busy at
    once when none is free (never queue: a queued upload holds its body in
    memory too).  Smaller uploads need no slot."""
    global _large_running
    if size < settings.INSPECTOR_LARGE_UPLOAD_BYTES:
        yield
        return
    with _large_lock:
        if _large_running >= settings.INSPECTOR_MAX_LARGE_UPLOADS:
            raise Busy()
        _large_running += 1
    try:
        yield
    finally:
        with _large_lock:
            _large_running -= 1
