"""Ingest over HTTP: open a capture, append raw bytes as they are read, close
it.  For programs that can't change their client's base URL and would rather
not hold a websocket (see `IngestConsumer` for the socket).

    POST /api/ingest                   {"title": ..., "format": "sse"} -> 201 {"slug", ...}
    POST /api/ingest/<slug>/append     raw stream bytes         -> {"frames": n, "offset": n}
         Upload-Offset: <n>            (optional) the bytes sent before these; the answer's
                                       `Upload-Offset` header and "offset" say the new one;
                                       a wrong offset is 409 {"expected": n} (and the header)
                                       (413 past INSPECTOR_MAX_UPLOAD_BYTES, for one append
                                       and for the capture's total; the capture stays open)
    POST /api/ingest/<slug>/close                                      -> {"outcome", "refusal"}

Any server process takes any append or close (no sticky routing): the bytes
received are stored as they come (`captures.ingest_chunks`), the appends of
one capture take turns (`ingest_turns`), and a process that does not hold
the capture's assembler rebuilds it from the stored bytes
(`LiveCapture.resume`), and one whose assembler another process's appends
have overtaken feeds it just the bytes it missed (`LiveCapture.catch_up`).  An
append without `Upload-Offset` is stored after what was received, as it
always was; a client that retries an append, or sends through several
processes at once, names the offset so that nothing is stored twice or out
of order (docs/deployment.md).

A capture nobody appends to for INSPECTOR_LIVE_STALE_SECONDS is abandoned:
the next open or append in the process that last held it closes it with
what it holds (unless another process took appends since), so forgotten
captures neither stay "live" nor keep their assembler in memory.
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
from inspector.captures.dialects import requested
from inspector.captures.ingest_chunks import received_bytes
from inspector.captures.models import capture_path
from inspector.captures.uploads import TooLarge, check_total_size, declared_size, read_capped
from inspector.http_json import BadRequest, json_endpoint, json_response

from . import recorder
from .ingest_turns import capture_turn
from .session import LiveCapture

logger = logging.getLogger(__name__)

_open: dict[str, LiveCapture] = {}  # slug -> the assembler this process holds
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
        for slug in idle:
            del _touched[slug]
        # A slug this process no longer holds (another took it) has nothing to close here.
        held = ((slug, _open.pop(slug, None)) for slug in idle)
        abandoned = [(slug, live) for slug, live in held if live is not None]
    for slug, live in abandoned:
        try:
            _close_if_still_ours(slug, live)
        except Exception:  # noqa: BLE001 - one bad capture must not fail the request
            logger.exception("closing abandoned ingest capture %s failed", slug)
    return [slug for slug, _ in abandoned]


def _close_if_still_ours(slug: str, live: LiveCapture) -> None:
    """Close an abandoned capture, unless another process appended to it
    (or closed it) since this one last did: that process holds it now."""
    with capture_turn(slug):
        capture = _capture(slug)
        if capture.outcome == models.Capture.Outcome.LIVE and capture.byte_size == live.byte_size:
            recorder.close_sync(live)


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


def _capture(slug: str) -> models.Capture:
    capture = models.Capture.objects.defer("raw").filter(slug=slug).first()
    if capture is None:
        raise BadRequest("no such capture", 404)
    return capture


def _open_capture(slug: str) -> models.Capture:
    """The capture, if HTTP appends may continue it (read in its turn)."""
    capture = _capture(slug)
    if capture.outcome != models.Capture.Outcome.LIVE:
        raise BadRequest("this capture is not open for ingest (it was closed)", 409)
    if not capture.http_ingest:
        raise BadRequest("this capture is not open for HTTP ingest", 409)
    return capture


def _live(capture: models.Capture) -> LiveCapture:
    """The capture's assembler, up to date with every append stored (in
    the capture's turn): the one this process holds, caught up with what
    other processes appended since, else one rebuilt from the stored bytes."""
    slug = capture.slug
    with _lock:
        live = _open.get(slug)
    if live is not None and not live.closed and live.byte_size < capture.byte_size:
        live.catch_up(received_bytes(capture, since=live.byte_size))
    if live is None or live.closed or live.byte_size != capture.byte_size:
        # Never held here, or ahead of what was stored (an append that failed).
        dialect, _ = requested(capture.dialect, capture.dialect_basis)  # ingest names no URL
        live = LiveCapture.resume(capture, received_bytes(capture), dialect=dialect)
    with _lock:
        _open[slug] = live
        _touched[slug] = clock()
    return live


def _offset_of(request: HttpRequest) -> int | None:
    """The `Upload-Offset` the append names, if any."""
    value = request.headers.get("Upload-Offset")
    if value is None:
        return None
    if not value.strip().isdigit():
        raise BadRequest("Upload-Offset is the number of bytes sent before this append")
    return int(value)


def _at_offset(body: dict, offset: int, status: int = 200) -> HttpResponse:
    response = json_response({**body, "offset": offset} if status == 200 else body, status)
    response["Upload-Offset"] = str(offset)
    return response


def _wrong_offset(expected: int) -> HttpResponse:
    body = {"error": f"wrong Upload-Offset: the capture has {expected} bytes", "expected": expected}
    return _at_offset(body, expected, 409)


@json_endpoint("POST")
def append_ingest(request: HttpRequest, slug: str) -> HttpResponse:
    _touch(slug)
    close_abandoned()
    offset = _offset_of(request)
    try:
        data = read_capped(request.read, declared_size(request))
    except TooLarge as error:
        raise BadRequest(f"one append is limited like an upload: {error}", 413) from None
    with capture_turn(slug):
        capture = _open_capture(slug)
        expected = capture.byte_size
        if offset is not None and offset != expected:
            return _wrong_offset(expected)  # answered before any rebuild
        try:
            check_total_size(expected, len(data))
        except TooLarge as error:
            raise BadRequest(str(error), 413) from None
        live = _live(capture)
        try:
            end = recorder.append_sync(live, data, expected)
        except recorder.OutOfTurn as error:  # never expected: the turn orders appends
            _forget(slug)
            return _wrong_offset(error.expected)
    return _at_offset({"frames": live.strict.frames}, end)


def _forget(slug: str) -> None:
    with _lock:
        _open.pop(slug, None)
        _touched.pop(slug, None)


@json_endpoint("POST")
def close_ingest(request: HttpRequest, slug: str) -> HttpResponse:
    with capture_turn(slug):
        live = _live(_open_capture(slug))
        _forget(slug)
        finished = recorder.close_sync(live)
    body = {"slug": slug, "outcome": finished["outcome"], "refusal": finished["refusal"]}
    return json_response(body)
