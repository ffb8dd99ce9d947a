"""Ingest over HTTP: open a capture, append raw bytes as they are read, close
it.  For programs that can't change their client's base URL and would rather
not hold a websocket (see `IngestConsumer` for the socket).

    POST /api/ingest                   {"title": ..., "format": "sse"} -> 201 {"slug", ...}
    POST /api/ingest/<slug>/append     raw stream bytes                -> {"frames": n}
    POST /api/ingest/<slug>/close                                      -> {"outcome", "refusal"}

An open capture's assembler lives in the process that opened it; with
several server processes, route one capture's requests to one process (any
sticky load-balancing by path does it).
"""

from __future__ import annotations

import threading

import orjson
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.http import HttpRequest, HttpResponse

from inspector.assembly import JSONL, SSE
from inspector.captures import models
from inspector.captures.api import BadRequest, capture_path, json_endpoint, json_response
from inspector.captures.intake import max_upload_bytes

from .broadcast import announce_sync
from .session import LiveCapture, capture_group

_open: dict[str, LiveCapture] = {}
_lock = threading.Lock()


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
    options = _options(request)
    fmt = options.get("format", SSE)
    if fmt not in (SSE, JSONL):
        raise BadRequest("format is sse or jsonl")
    live = LiveCapture.open(
        stream_format=fmt,
        source=models.Capture.Source.INGEST,
        title=str(options.get("title") or "ingest"),
    )
    with _lock:
        _open[live.slug] = live
    announce_sync(live.slug, models.Capture.Outcome.LIVE)
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
    live = _live(slug)
    data = request.read(max_upload_bytes() + 1)
    if len(data) > max_upload_bytes():
        raise BadRequest("one append is limited like an upload", 413)
    batch = live.append(data)
    if batch is not None:
        async_to_sync(get_channel_layer().group_send)(capture_group(slug), batch)
    return json_response({"frames": live.strict.frames})


@json_endpoint("POST")
def close_ingest(request: HttpRequest, slug: str) -> HttpResponse:
    live = _live(slug)
    with _lock:
        _open.pop(slug, None)
    finished = live.close()
    async_to_sync(get_channel_layer().group_send)(capture_group(slug), finished)
    announce_sync(slug, finished["outcome"])
    body = {"slug": slug, "outcome": finished["outcome"], "refusal": finished["refusal"]}
    return json_response(body)
