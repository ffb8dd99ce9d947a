"""The recording proxy: `POST /proxy/<upstream>/v1/chat/completions`.

A client changes only its base URL.  The request goes to the upstream with
every header it came with (credentials included) but the inspector's own
`X-Inspector-*` headers and hop-by-hop ones; the response comes back with
the upstream's status and headers, and a streamed body is relayed read by
read, each read forwarded the moment it arrives.

Recording stays off that path: each read is handed to a `Recording`
(`recorder.py`), which stores and publishes it while the relay is idle.

Faults:

* upstream drops mid-stream: the capture keeps every frame received (a
  frame cut in half makes the strict assembly refuse INCOMPLETE_STREAM).
  daphne can't abort a response that has started (an exception raised then
  leaves the client hanging), so the client is told in-band: the relayed
  bytes are followed by an `error` frame, which the OpenAI SDK raises as an
  `APIError` (or, when the cut fell inside a frame, the half frame fails to
  parse first).  The error frame is not part of the capture.
* the client disconnects: Django cancels the response; the relay closes the
  upstream response and closes the capture with what it holds.

A capture is closed (its assemblies stored) before the response's last byte:
see `RelayResponse`.
* upstream unreachable: 502 (504 on a connect timeout) with a JSON error in
  the OpenAI shape, recorded as a capture of that error.

Non-streaming answers are read whole and relayed as they came.  A chat
completion is recorded as its one-chunk stream (input format `json`; see
`inspector.assembly.completion`), so its tool calls are judged by the same
rules as streamed ones.  Other bodies (error pages, other JSON) are recorded
as a JSON Lines capture of one line: the JSON body (compacted when the
upstream pretty-printed it), or for a body that isn't JSON, an error line
that quotes it; an error body assembles as UPSTREAM_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import httpx
import orjson
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from inspector.assembly.completion import completion_stream, is_completion
from inspector.assembly.jsontext import compact

from . import attempts, recording_process, redact
from .recorder import Recording, StoredRequest
from .recording_process import RemoteRecording
from .upstreams import upstream_root_url, upstream_url, upstreams
from .wire import CHAT_WIRE, GEMINI_WIRE, MESSAGES_WIRE, RESPONSES_WIRE, Wire

logger = logging.getLogger(__name__)

CHAT_PATH = "chat/completions"
RESPONSES_PATH = "responses"
MESSAGES_PATH = "messages"
GEMINI_STREAM_VERB = "streamGenerateContent"
# Request headers not forwarded: hop-by-hop ones, the ones httpx sets itself,
# and Accept-Encoding (the proxy asks for identity, so it relays and records
# the bytes as sent; a body compressed anyway is decoded, and relayed without
# its Content-Encoding).
REQUEST_SKIP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
        "expect",
    }
)
RESPONSE_SKIP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "content-type",
        "date",
        "server",
        "set-cookie",
    }
)
INSPECTOR_PREFIX = "x-inspector-"
SSE_TYPES = ("text/event-stream",)
JSON_TYPES = ("application/json",)
JSONL_TYPES = (
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
)
ERROR_BODY_QUOTE = 4000
# The input format of a non-streamed chat completion, recorded as its stream.
WHOLE_COMPLETION = "json"


# -- the upstream HTTP client, one per event loop ----------------------------

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def http_client() -> httpx.AsyncClient:
    """The shared client of the running loop (connections are kept alive
    between requests, so a relayed request costs no new handshake)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        timeout = httpx.Timeout(
            connect=settings.INSPECTOR_UPSTREAM_CONNECT_TIMEOUT,
            read=settings.INSPECTOR_UPSTREAM_READ_TIMEOUT,
            write=60.0,
            pool=60.0,
        )
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
        client = httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False)
        _clients[loop] = client
    return client


# -- the outbound request ----------------------------------------------------


class ProxyError(Exception):
    """Answered as a JSON error in the client API's shape, before anything is sent."""

    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind

    def response(self, wire: Wire = CHAT_WIRE) -> JsonResponse:
        return wire.error_response(str(self), self.kind, self.status)


def error_body(message: str, kind: str, **extra: Any) -> dict[str, Any]:
    """An error line the inspector records itself (OpenAI's shape, which the
    assembler reads as an error frame in every dialect)."""
    return {"error": {"message": message, "type": kind, "code": kind, **extra}}


@dataclass(kw_only=True)
class Outbound(StoredRequest):
    """What goes upstream; what of it may be stored is the `StoredRequest`."""

    url: str
    method: str
    headers: list[tuple[str, str]]
    body: bytes
    stream: bool = False
    wire: Wire = CHAT_WIRE


def prepare(
    request: HttpRequest,
    upstream: str,
    path: str,
    wire: Wire = CHAT_WIRE,
    *,
    from_root: bool = False,
    model: str | None = None,
    stream: bool | None = None,
) -> Outbound:
    """What to send upstream for `request`, and what of it may be stored.

    `path` goes below the upstream's base URL, or (`from_root`, Gemini's
    versioned paths) below its root, the base without a trailing `/v1`.
    `model` and `stream` are taken from the URL when the route says them
    (Gemini), else from the JSON body (`model`, `"stream": true`)."""
    url = _upstream_url(upstream, path, from_root)
    query = request.META.get("QUERY_STRING", "")
    if query:
        url = f"{url}?{query}"
    items = redact.header_items(request.headers)
    # Longest first, so a scrub replaces whole keys.
    secrets = sorted(
        {*redact.secret_values(items), *redact.query_secret_values(query)}, key=len, reverse=True
    )
    out = Outbound(
        upstream=upstream,
        url=url,
        method=request.method or "POST",
        headers=_forwarded_headers(items),
        body=request.body,
        secrets=secrets,
        source_url=redact.redact_url(url, secrets),
        chain_header=attempts.named_chain(request.headers),
        client_retry=attempts.client_retry(request.headers),
        not_stored=[f"query.{name}" for name in redact.dropped_query_names(query)],
        wire=wire,
        dialect=wire.dialect,
    )
    _read_request_body(out)
    if model is not None:
        out.model = model[:200]
    if stream is not None:
        out.stream = stream
    return out


def _upstream_url(upstream: str, path: str, from_root: bool) -> str:
    try:
        known = upstreams()
    except ImproperlyConfigured as error:
        raise ProxyError(500, str(error), "inspector_misconfigured") from None
    url = None
    if upstream in known:
        url = upstream_root_url(upstream, path) if from_root else upstream_url(upstream, path)
    if url is None:
        names = ", ".join(sorted(known)) or "none (set INSPECTOR_UPSTREAMS)"
        raise ProxyError(
            404, f"unknown upstream {upstream!r}; configured: {names}", "unknown_upstream"
        )
    return url


def _forwarded_headers(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    headers = [
        (name, value)
        for name, value in redact.without_inspector_credentials(items)
        if name.lower() not in REQUEST_SKIP and not name.lower().startswith(INSPECTOR_PREFIX)
    ]
    headers.append(("Accept-Encoding", "identity"))
    return headers


def _read_request_body(out: Outbound) -> None:
    """The stored copy of a JSON body (secrets and personal fields out), its
    model and whether it asks for a stream."""
    if not out.body:
        return
    try:
        parsed = orjson.loads(out.body)
    except orjson.JSONDecodeError:
        return
    kept, dropped = redact.drop_personal_fields(parsed)
    out.not_stored += [f"body.{name}" for name in dropped]
    out.parsed = redact.redact_body(kept, out.secrets)
    out.request_json = compact(out.parsed)
    if isinstance(parsed, dict):
        model = parsed.get("model")
        out.model = model[:200] if isinstance(model, str) else ""
        out.stream = parsed.get("stream") is True


def forward_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream's response headers a client may see."""
    out: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        if name.lower() in RESPONSE_SKIP:
            continue
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def stream_format_of(
    response: httpx.Response, asked_stream: bool = False, wire: Wire = CHAT_WIRE
) -> str | None:
    """sse, jsonl or json-array for a streamed body; None for a body read whole.

    Some gateways stream SSE under another content type (`text/plain`,
    `application/octet-stream`, none at all): a successful answer to a
    request that asked for `"stream": true` is then read as SSE, unless it
    says it is JSON.  Gemini's `:streamGenerateContent` without `?alt=sse`
    streams one JSON array under `application/json`: a json-array stream."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind in SSE_TYPES:
        return "sse"
    if kind in JSONL_TYPES:
        return "jsonl"
    if not asked_stream or response.status_code >= 300:
        return None
    if kind in JSON_TYPES and wire is GEMINI_WIRE:
        return "json-array"
    return None if kind.endswith(("/json", "+json")) else "sse"


async def _aclose(response: httpx.Response) -> None:
    try:
        await response.aclose()
    except Exception:  # noqa: BLE001
        logger.debug("closing the upstream response failed", exc_info=True)


async def finish_quietly(
    response: httpx.Response | None,
    recording: Recording | RemoteRecording | None,
    **meta: Any,
) -> dict[str, Any] | None:
    """Close the upstream response and the capture.  The capture closes
    even if the request is cancelled meanwhile (its closing is a task of
    its own)."""
    finishing = recording.finish(**meta) if recording is not None else None
    if response is not None:
        await asyncio.shield(_aclose(response))
    if finishing is None:
        return None
    return await asyncio.shield(finishing)


# -- recorded answers: one upstream request read whole, recorded -------------


@dataclass
class RecordedAnswer:
    """One recorded upstream request whose body was read whole (guard mode,
    non-streamed answers, errors)."""

    recording: Recording | None
    status: int
    body: bytes
    headers: dict[str, str]
    content_type: str
    message: dict[str, Any] | None = None

    @property
    def outcome(self) -> str:
        return self.message["outcome"] if self.message else "unrecorded"

    @property
    def refusal(self) -> dict[str, Any] | None:
        return self.message["refusal"] if self.message else None

    def response(self) -> HttpResponse:
        headers = dict(self.headers)
        if self.recording is not None:
            headers.update(self.recording.headers())
        return HttpResponse(
            self.body, status=self.status, content_type=self.content_type, headers=headers
        )


async def send_upstream(out: Outbound) -> httpx.Response:
    client = http_client()
    request = client.build_request(out.method, out.url, headers=out.headers, content=out.body)
    return await client.send(request, stream=True)


async def record_unreachable(
    out: Outbound,
    error: Exception,
    started: float,
    *,
    chain: str | None = None,
    mode: str = "proxy",
) -> RecordedAnswer:
    """502 (504 for a timeout) with a JSON error in the client API's shape, recorded."""
    timeout = isinstance(error, httpx.TimeoutException)
    status = 504 if timeout else 502
    kind = "upstream_timeout" if timeout else "upstream_unreachable"
    detail = redact.redact_text(f"{type(error).__name__}: {error}".strip(), out.secrets)
    message = f"upstream {out.upstream!r} unreachable at {out.source_url}: {detail}"
    line = orjson.dumps(error_body(message, kind, upstream=out.upstream)) + b"\n"
    recording = Recording.open(
        out, stream_format="jsonl", http_status=status, started=started, chain=chain, mode=mode
    )
    recording.feed(line, time.monotonic())
    done = await finish_quietly(None, recording)
    inspector = {"capture": recording.slug, "url": recording.url}
    body = out.wire.error_body(message, kind, status, upstream=out.upstream, inspector=inspector)
    return RecordedAnswer(
        recording, status, orjson.dumps(body), {}, "application/json", message=done
    )


def whole_body_record(
    body: bytes, status: int, content_type: str, dropped: Exception | None
) -> tuple[str, str, bytes]:
    """How a body that is not a stream is recorded: (stream format, input
    format, bytes).  A successful chat completion becomes its one-chunk
    stream (see `inspector.assembly.completion`).  Anything else is one JSON
    Lines line: the JSON itself (compacted when it spans lines), or an error
    line when the body was cut or is not JSON."""
    if dropped is not None:
        error = error_body(
            f"the upstream dropped the connection mid-body: {dropped!r}", "upstream_disconnected"
        )
        return "jsonl", "jsonl", orjson.dumps(error) + b"\n"
    if not body and status < 400:
        return "jsonl", "jsonl", b""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        quoted = error_body(
            f"HTTP {status}: the upstream answered {content_type or 'no content type'}, not JSON",
            "inspector_non_json_body",
            body=body.decode("utf-8", "replace")[:ERROR_BODY_QUOTE],
        )
        return "jsonl", "jsonl", orjson.dumps(quoted) + b"\n"
    if status < 400 and is_completion(value):
        return "sse", WHOLE_COMPLETION, completion_stream(value)
    stripped = body.strip()
    if b"\n" in stripped or b"\r" in stripped:
        return "jsonl", "jsonl", compact(value).encode() + b"\n"
    return "jsonl", "jsonl", stripped + b"\n"


async def record_whole(
    out: Outbound,
    response: httpx.Response,
    started: float,
    *,
    chain: str | None = None,
    mode: str = "proxy",
    stream_format: str | None = None,
) -> RecordedAnswer:
    """Read a response whole, record it, and hand it back.  A streamed
    format is recorded read by read; other bodies once read (see
    `whole_body_record`)."""
    recording: Recording | None = None
    chunks: list[bytes] = []
    status = response.status_code
    content_type = response.headers.get("content-type", "application/octet-stream")
    dropped: Exception | None = None

    def open_recording(fmt: str, input_format: str | None = None) -> Recording:
        return Recording.open(
            out,
            stream_format=fmt,
            input_format=input_format,
            http_status=status,
            started=started,
            chain=chain,
            mode=mode,
        )

    try:
        if stream_format is not None:
            recording = open_recording(stream_format)
        try:
            async for data in response.aiter_bytes():
                arrived = time.monotonic()
                chunks.append(data)
                if recording is not None:
                    recording.feed(data, arrived)
        except httpx.HTTPError as error:  # cut, reset, read timeout, bad encoding
            dropped = error
        body = b"".join(chunks)
        if stream_format is None:
            fmt, input_format, recorded = whole_body_record(body, status, content_type, dropped)
            recording = open_recording(fmt, input_format)
            if recorded:
                recording.feed(recorded, time.monotonic())
    finally:
        message = await finish_quietly(response, recording)
    if dropped is not None and stream_format is None:
        error = out.wire.error_body(
            f"upstream {out.upstream!r} dropped the connection mid-body",
            "upstream_disconnected",
            502,
        )
        return RecordedAnswer(recording, 502, orjson.dumps(error), {}, "application/json", message)
    return RecordedAnswer(recording, status, body, forward_headers(response), content_type, message)


# -- the relay -----------------------------------------------------------------


class DirectStreamingResponse(StreamingHttpResponse):
    """A streaming response whose iterator is its async generator itself
    (not Django's wrapper around it), so Django's `aclosing()` closes the
    generator, and its `finally` runs, the moment the client goes away."""

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterator


class RelayResponse(DirectStreamingResponse):
    """The relay: each upstream read is forwarded as it arrives and queued
    for the recorder.  However the relay ends (the stream's end, a drop, the
    client gone), its `finally` closes the upstream response and then the
    capture.

    The capture is closed before the response's last byte (the chunked
    terminator; every frame has gone out by then).  Closing it afterwards,
    from `close()`, was tried: the client's stream then ends sooner, but
    the close overlaps the start of that client's next stream and, through
    the interpreter lock, delays its first frames by as long (bench/proxy.py
    measured p99 added latency of 70-120 ms back to back instead of 3-6 ms).
    """

    def __init__(
        self,
        upstream: httpx.Response,
        recording: Recording | RemoteRecording,
        stream_format: str,
        **kwargs: Any,
    ) -> None:
        self.upstream = upstream
        self.recording = recording
        self.stream_format = stream_format
        super().__init__(self._relay(), **kwargs)

    async def _relay(self) -> AsyncIterator[bytes]:
        upstream, recording = self.upstream, self.recording
        dropped: Exception | None = None
        try:
            try:
                async for data in upstream.aiter_bytes():
                    recording.feed(data, time.monotonic())
                    yield data
            except Exception as error:  # noqa: BLE001 - cut, reset, read timeout...
                # ...or anything else: an exception out of a started response
                # would leave a daphne client hanging.
                dropped = error
            if dropped is not None:
                logger.info(
                    "upstream %s dropped mid-stream: %s",
                    recording.out.source_url,
                    redact.redact_text(repr(dropped), recording.out.secrets),
                )
                yield recording.out.wire.drop_notice(self.stream_format, dropped)
        finally:
            await finish_quietly(upstream, recording)


# -- views -------------------------------------------------------------------


def unsafe_path(path: str) -> str | None:
    r"""Why a proxied path could reach above the upstream's base URL, or None.

    Django hands the view a path decoded once; an upstream (or a gateway in
    front of it) may decode again, so `%252e%252e` arrives there as `..`,
    and some read `\` as `/`.  Refused: dot segments however often encoded,
    backslashes, encoded separators, and control characters."""
    decoded = path
    for _ in range(4):  # enough for any nesting a server would undo
        decoded, previous = unquote(decoded), decoded
        if decoded == previous:
            break
    if "\\" in decoded or any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        return "no backslashes or control characters in proxied paths"
    if decoded.count("/") != path.count("/"):
        return "no encoded / in proxied paths"
    if any(part in ("..", ".") for part in decoded.split("/")):
        return "no . or .. in proxied paths, however encoded"
    return None


async def relay_and_record(request: HttpRequest, out: Outbound) -> HttpResponse:
    """Forward `out`, relay the answer as it arrives, record it."""
    started = time.monotonic()
    try:
        response = await send_upstream(out)
    except httpx.HTTPError as error:
        return (await record_unreachable(out, error, started)).response()
    stream_format = stream_format_of(response, out.stream, out.wire)
    if stream_format is None:
        return (await record_whole(out, response, started)).response()
    # No database work before the response starts: the recorder creates the
    # capture while the first bytes are already on their way (in this server's
    # recording process, when it has one).
    how = {"stream_format": stream_format, "http_status": response.status_code, "started": started}
    recording = await recording_process.open_remote(out, **how) or Recording.open(out, **how)
    headers = {**forward_headers(response), **recording.headers()}
    relayed = RelayResponse(
        response,
        recording,
        stream_format,
        status=response.status_code,
        content_type=response.headers.get("content-type"),
        headers=headers,
    )
    relayed["Cache-Control"] = response.headers.get("cache-control", "no-cache")
    relayed["X-Accel-Buffering"] = "no"
    return relayed


def outbound_or_error(
    request: HttpRequest, upstream: str, wire: Wire, path: str, **how: Any
) -> Outbound | HttpResponse:
    """What to send for a POST to one dialect's route, or the answer that
    refuses it (another method, an unknown upstream) in that API's shape."""
    if request.method != "POST":
        return wire.method_not_allowed()
    try:
        return prepare(request, upstream, path, wire, **how)
    except ProxyError as error:
        return error.response(wire)


Handler = Callable[[HttpRequest, Outbound], Awaitable[HttpResponse]]


def dialect_views(handle: Handler, mode: str) -> tuple[Callable[..., Any], ...]:
    """The four views of one mode (`proxy`, `guard`): chat completions,
    Responses, Messages and Gemini (whose path goes below the upstream's
    root), each handing its `Outbound` to `handle`."""

    async def serve(request: HttpRequest, upstream: str, wire: Wire, path: str, **how: Any):
        out = outbound_or_error(request, upstream, wire, path, **how)
        return out if isinstance(out, HttpResponse) else await handle(request, out)

    @csrf_exempt
    async def chat(request: HttpRequest, upstream: str) -> HttpResponse:
        return await serve(request, upstream, CHAT_WIRE, CHAT_PATH)

    @csrf_exempt
    async def responses(request: HttpRequest, upstream: str) -> HttpResponse:
        return await serve(request, upstream, RESPONSES_WIRE, RESPONSES_PATH)

    @csrf_exempt
    async def messages(request: HttpRequest, upstream: str) -> HttpResponse:
        return await serve(request, upstream, MESSAGES_WIRE, MESSAGES_PATH)

    @csrf_exempt
    async def gemini(
        request: HttpRequest, upstream: str, version: str, model: str, verb: str
    ) -> HttpResponse:
        path, how = gemini_route(version, model, verb)
        return await serve(request, upstream, GEMINI_WIRE, path, **how)

    for view, dialect in ((chat, "chat"), (responses, "responses"), (messages, "messages"),
                          (gemini, "gemini")):  # fmt: skip
        view.__name__ = view.__qualname__ = f"{mode}_{dialect}"
    return chat, responses, messages, gemini


def gemini_route(version: str, model: str, verb: str) -> tuple[str, dict[str, Any]]:
    """The upstream path of a Gemini call, and how to prepare it."""
    how = {"from_root": True, "model": model, "stream": verb == GEMINI_STREAM_VERB}
    return f"{version}/models/{model}:{verb}", how


# `POST /proxy/<upstream>/...`: forward, relay as it arrives, record.
proxy_chat, proxy_responses, proxy_messages, proxy_gemini = dialect_views(relay_and_record, "proxy")


async def _passthrough(response: httpx.Response, source_url: str) -> AsyncIterator[bytes]:
    try:
        async for data in response.aiter_bytes():
            yield data
    except Exception:  # noqa: BLE001 - never raise out of a started response (daphne)
        logger.info("upstream %s dropped a passed-through response", source_url)
    finally:
        await finish_quietly(response, None)


@csrf_exempt
async def proxy_other(request: HttpRequest, upstream: str, path: str) -> HttpResponse:
    """Any other `/proxy/<upstream>/v1/<path>` (models, embeddings...):
    forwarded and relayed, not recorded."""
    why = unsafe_path(path)
    if why:
        return CHAT_WIRE.error_response(why, "invalid_path", 400)
    try:
        out = prepare(request, upstream, path)
    except ProxyError as error:
        return error.response()
    try:
        response = await send_upstream(out)
    except httpx.HTTPError as error:
        detail = redact.redact_text(f"{type(error).__name__}: {error}", out.secrets)
        message = f"upstream {upstream!r} unreachable at {out.source_url}: {detail}"
        return CHAT_WIRE.error_response(message, "upstream_unreachable", 502)
    return DirectStreamingResponse(
        _passthrough(response, out.source_url),
        status=response.status_code,
        content_type=response.headers.get("content-type"),
        headers=forward_headers(response),
    )
