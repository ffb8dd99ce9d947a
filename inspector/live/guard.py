"""Guard mode: `POST /guard/<upstream>/...`, every route of the proxy.

The inspector holds the upstream's stream until the strict assembler has
read all of it.  Accepted: the client gets the stream exactly as the
upstream sent it.  Refused with a retryable code (INCOMPLETE_STREAM,
MALFORMED_TOOL_CALL, EMPTY_RESPONSE, UPSTREAM_ERROR): the request is sent
again, up to `INSPECTOR_GUARD_RETRIES` times (default 2), after a backoff
of `INSPECTOR_GUARD_BACKOFF_SECONDS` (default 0.5) doubling each time.
A non-retryable refusal, or an upstream 4xx other than 408/409/425/429
(sending the same request again can't help), ends the guard at once.
When no attempt is accepted the client gets 502 with an error in its API's
own shape (`wire.py`: OpenAI, Anthropic or Google), whose `error` object
also holds

    "retry_chain": "...",
    "attempts_url": "/api/attempts/<chain>",
    "attempts": [{"attempt", "slug", "url", "outcome", "http_status", "refusal": {...}}]

and `x-should-retry: false`, so the OpenAI and Anthropic SDKs don't start
another round of their own.  Every attempt is recorded as the proxy records one, in one
retry chain.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from .attempts import CHAIN_HEADER
from .proxy import (
    Outbound,
    RecordedAnswer,
    dialect_views,
    record_unreachable,
    record_whole,
    send_upstream,
    stream_format_of,
)
from .wire import Wire

logger = logging.getLogger(__name__)

RETRYABLE_4XX = frozenset({408, 409, 425, 429})


def retries() -> int:
    return max(0, int(settings.INSPECTOR_GUARD_RETRIES))


def backoff(retry: int) -> float:
    """Seconds to wait before retry number `retry` (from 1)."""
    first = float(settings.INSPECTOR_GUARD_BACKOFF_SECONDS)
    return max(0.0, first) * 2 ** (retry - 1)


def worth_retrying(attempt: RecordedAnswer) -> bool:
    refusal = attempt.refusal
    if attempt.message is None or refusal is None or not refusal.get("retryable"):
        return False
    status = attempt.status
    return not (400 <= status < 500 and status not in RETRYABLE_4XX)


def accepted(attempt: RecordedAnswer) -> bool:
    return attempt.outcome == "ok" and 200 <= attempt.status < 300


async def run_attempt(out: Outbound, chain: str | None) -> RecordedAnswer:
    """Send once, read the whole answer into a capture."""
    started = time.monotonic()
    try:
        response = await send_upstream(out)
    except httpx.HTTPError as error:
        return await record_unreachable(out, error, started, chain=chain, mode="guard")
    return await record_whole(
        out,
        response,
        started,
        chain=chain,
        mode="guard",
        stream_format=stream_format_of(response, out.stream, out.wire),
    )


def summary(attempt: RecordedAnswer) -> dict[str, Any]:
    recording = attempt.recording
    return {
        "attempt": recording.attempt if recording else None,
        "slug": recording.slug if recording else None,
        "url": recording.url if recording else None,
        "outcome": attempt.outcome,
        "http_status": attempt.status,
        "refusal": attempt.refusal,
    }


def failure(wire: Wire, attempts: list[RecordedAnswer], reason: str) -> JsonResponse:
    chain = next((a.recording.retry_chain for a in attempts if a.recording), None)
    last = attempts[-1]
    code = (last.refusal or {}).get("code") or last.outcome
    # The client API's error shape, so its SDK shows the message; the
    # attempts ride along inside it.
    response = wire.error_response(
        f"guard: no attempt was accepted ({reason}; last refusal {code}); "
        f"retry chain {chain or 'unrecorded'}",
        "guard_no_accepted_attempt",
        502,
        retry_chain=chain,
        attempts_url=f"/api/attempts/{chain}" if chain else None,
        attempts=[summary(a) for a in attempts],
    )
    response["x-should-retry"] = "false"
    if chain:
        response[CHAIN_HEADER] = chain
    return response


async def guarded(request: HttpRequest, out: Outbound) -> HttpResponse:
    """Send until an attempt is accepted, a refusal can't be helped, or the
    retries are used up.  Guard mode holds streamed answers only."""
    if not out.stream:
        return out.wire.error_response(
            "guard mode holds streamed answers: ask for a stream (use /proxy/ for other requests)",
            "guard_needs_stream",
            400,
        )
    wire = out.wire
    allowed = retries()
    done: list[RecordedAnswer] = []
    chain: str | None = None
    for number in range(allowed + 1):
        if number:
            await asyncio.sleep(backoff(number))
        attempt = await run_attempt(out, chain)
        done.append(attempt)
        if attempt.recording is not None:
            chain = attempt.recording.retry_chain
        if accepted(attempt):
            return attempt.response()
        if not worth_retrying(attempt):
            if attempt.message is None:
                return failure(wire, done, "the attempt could not be recorded")
            return failure(wire, done, "the refusal is not retryable")
    return failure(wire, done, f"{allowed} retries used")


# `POST /guard/<upstream>/...`: the answer only once the strict assembler accepts it.
guard_chat, guard_responses, guard_messages, guard_gemini = dialect_views(guarded, "guard")
