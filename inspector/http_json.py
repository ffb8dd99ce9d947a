"""JSON endpoints: the answer shape and the error path every JSON view shares.

A neutral module (it knows no package above the assembler): the capture API
(`inspector/captures/api.py`) and the live HTTP ingest (`inspector/live/ingest.py`)
both answer through it, so neither borrows the other's view helpers.

Made for scripts: CSRF-exempt, JSON in every answer, and errors as
`{"error": reason}` with their status (`BadRequest`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from inspect import iscoroutinefunction
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from inspector.assembly.jsontext import dumps


class BadRequest(Exception):
    """Answered as `{"error": message}` with `status`."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def json_response(value: Any, status: int = 200) -> HttpResponse:
    """`value` as JSON, written the way `manage.py assemble` writes it."""
    return HttpResponse(dumps(value), status=status, content_type="application/json")


def json_error(message: str, status: int = 400) -> HttpResponse:
    return json_response({"error": message}, status)


def json_endpoint(*allowed: str) -> Callable[[Callable], Callable]:
    """A CSRF-exempt view answering only `allowed` methods (else 405 with
    `Allow`), whose `BadRequest` becomes a JSON error answer."""

    def decorate(view: Callable) -> Callable:
        if iscoroutinefunction(view):
            return csrf_exempt(_async_endpoint(view, allowed))

        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in allowed:
                return _not_allowed(request, allowed)
            try:
                return view(request, *args, **kwargs)
            except BadRequest as error:
                return json_error(str(error), error.status)

        return csrf_exempt(wrapped)

    return decorate


def _async_endpoint(view: Callable, allowed: tuple[str, ...]) -> Callable:
    """`json_endpoint` of an async view (one Django can cancel when its
    client goes away)."""

    @wraps(view)
    async def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in allowed:
            return _not_allowed(request, allowed)
        try:
            return await view(request, *args, **kwargs)
        except BadRequest as error:
            return json_error(str(error), error.status)

    return wrapped


def _not_allowed(request: HttpRequest, allowed: tuple[str, ...]) -> HttpResponse:
    response = json_error(f"method {request.method} not allowed", 405)
    response["Allow"] = ", ".join(allowed)
    return response


# A paged JSON list: this many rows by default, never more than the maximum.
PER_PAGE = 50
MAX_PER_PAGE = 200


def page_and_size(request: HttpRequest) -> tuple[int, int]:
    """`?page=` (from 1) and `?per_page=` (capped at MAX_PER_PAGE) of a paged
    answer; BadRequest for anything but a whole number of at least 1."""
    page = positive_int(request, "page", 1)
    return page, min(positive_int(request, "per_page", PER_PAGE), MAX_PER_PAGE)


def positive_int(request: HttpRequest, key: str, default: int) -> int:
    text = request.GET.get(key)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{key} must be a whole number, not {text!r}") from None
    if value < 1:
        raise BadRequest(f"{key} must be 1 or more")
    return value
