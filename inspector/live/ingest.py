"""Ingest over HTTP: open a capture, append raw bytes as they are read, close
it.  For programs that can't change their client's base URL and would rather
not hold a websocket (see `IngestConsumer` for the socket).

    POST /api/ingest                   {"title": ..., "format": "sse"} -> 201 {"slug", ...}
    POST /api/ingest/<slug>/append     raw stream bytes                -> {"frames": n}
                                       (413 past INSPECTOR_MAX_UPLOAD_BYTES, for one append
                                       and for the capture's total; the capture stays open)
    POST /api/ingest/<slug>/close                                      -> {"outcome", "refusal"}

An open capture's assembler lives in the process that opened it; with
several server processes, route one capture's requests to one process (any
sticky load-balancing by path does it).  A capture nobody appends to for
INSPECTOR_LIVE_STALE_SECONDS is abandoned: the next open or append in that
process closes it with what it holds, so forgotten captures neither stay
"live" nor keep their assembler in memory.
"""

from __future__ import annotations

import logging
import threading
import time

import orjson
from django.conf import settings
from django.http import HttpRequest, HttpResponse

from inspector.assembly import AUTO_DIALECT, DIALECTS, JSONL, SSE
from inspector.captures import models
from inspector.captures.models import capture_path
from inspector.captures.uploads import TooLarge, check_total_size, declared_size, read_capped
from inspector.http_json import BadRequest, json_endpoint, json_response

from . import recorder
from .session import LiveCapture

logger = logging.getLogger(__name__)

_open: dict[str, LiveCapture] = {}
_touched: dict[str, float] = {}  # slug -> clock() at its last open or append
_lock = threading.Lock()
clock = time.monotonic  # module-level so tests can move time


def _touch(slug: str) -> None:
    with _lock:
        if slug in _open:
            _touched[slug] = clock()


def close_abandoned(now: float | None = None) -> list[str]:
    """Close the open captures idle for the stale time; their slugs."""
    now = clock() if now is None else now
    limit = float(settings.INSPECTOR_LIVE_STALE_SECONDS)
    with _lock:
        idle = [slug for slug, last in _touched.items() if now - last >= limit]
        abandoned = [(slug, _open.pop(slug)) for slug in idle]
        for slug in idle:
            del _touched[slug]
    for slug, live in abandoned:
        try:
            _finish(slug, live)
        except Exception:  # noqa: BLE001 - one bad capture must not fail the request
            logger.exception("closing abandoned ingest capture %s failed", slug)
    return [slug for slug, _ in abandoned]


def _finish(slug: str, live: LiveCapture) -> dict:
    return recorder.close_sync(live)


def _options(request: HttpRequest) -> dict:
    """Options from a JSON body, or from form fields and the query string."""
    if request.content_type != "application/json":
        return {**request.GET.dict(), **request.POST.dict()}
    try:
        options = orjson.loads(request.body or b"{}")
    except orjson.JSONDecodeError:
        raise BadRequest("the body is a JSON object of options, or empty") from None
    if type(options) is not dict:
        raise BadRequest("the body is a JSON object of options, or empty")
    return options


@json_endpoint("POST")
def open_ingest(request: HttpRequest) -> HttpResponse:
    close_abandoned()
    options = _options(request)
    fmt = options.get("format", SSE)
    if fmt not in (SSE, JSONL):
        raise BadRequest("format is sse or jsonl")
    dialect = options.get("dialect") or AUTO_DIALECT
    if dialect not in (*DIALECTS, AUTO_DIALECT):
        raise BadRequest(f"dialect is one of {', '.join((*DIALECTS, AUTO_DIALECT))}")
    title = str(options.get("title") or "ingest")
    live = recorder.open_ingest(stream_format=fmt, title=title, dialect=dialect)
    with _lock:
        _open[live.slug] = live
        _touched[live.slug] = clock()
    base = f"/api/ingest/{live.slug}"
    body = {
        "slug": live.slug,
        "url": request.build_absolute_uri(capture_path(live.slug)),
        "append_url": request.build_absolute_uri(f"{base}/append"),
        "close_url": request.build_absolute_uri(f"{base}/close"),
    }
    return json_response(body, 201)


def _live(slug: str) -> LiveCapture:
    with _lock:
        live = _open.get(slug)
    if live is None:
        if models.Capture.objects.filter(slug=slug).exists():
            raise BadRequest("this capture is not open for ingest in this process", 409)
        raise BadRequest("no such capture", 404)
    return live


@json_endpoint("POST")
def append_ingest(request: HttpRequest, slug: str) -> HttpResponse:
    _touch(slug)
    close_abandoned()
    live = _live(slug)
    try:
        data = read_capped(request.read, declared_size(request))
    except TooLarge as error:
        raise BadRequest(f"one append is limited like an upload: {error}", 413) from None
    try:
        check_total_size(live.byte_size, len(data))
    except TooLarge as error:
        raise BadRequest(str(error), 413) from None
    recorder.append_sync(live, data)
    return json_response({"frames": live.strict.frames})


@json_endpoint("POST")
def close_ingest(request: HttpRequest, slug: str) -> HttpResponse:
    live = _live(slug)
    with _lock:
        _open.pop(slug, None)
        _touched.pop(slug, None)
    finished = _finish(slug, live)
    body = {"slug": slug, "outcome": finished["outcome"], "refusal": finished["refusal"]}
    return json_response(body)
