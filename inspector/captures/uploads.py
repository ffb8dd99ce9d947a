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

from collections.abc import Callable

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


def check_size(size: int | None) -> None:
    """Raise TooLarge when `size` (bytes; None: unknown) is over the limit."""
    if size is not None and size > max_upload_bytes():
        raise TooLarge(size)


def read_capped(read: Callable[[int], bytes]) -> bytes:
    """What `read(n)` gives, refused with TooLarge past the limit."""
    data = read(max_upload_bytes() + 1)
    if len(data) > max_upload_bytes():
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
