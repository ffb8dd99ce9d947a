"""Retries as attempts: the captures of one logical request form a retry chain.

A *retry* sends a request again because the last answer failed; a *re-run*
sends it again after a success, on purpose (a benchmark, a second sample),
and starts a chain of its own.  So a request joins a chain when

* it names the chain with the `X-Inspector-Retry-Chain` header (its first
  name, `X-Inspector-Group`, is read too; guard mode names its own), or
* it carries the client's own retry count (`x-stainless-retry-count` ≥ 1,
  sent by the OpenAI and Anthropic SDKs) and a chain with its fingerprint
  is within the window, or
* a chain with its fingerprint is within the window and that chain's last
  attempt failed in a way worth retrying: a retryable refusal (the spec's
  retryable codes) or an upstream error status (≥ 400).

The fingerprint is the sha256 of the canonical JSON of the request's model,
messages and tools; the window is `INSPECTOR_ATTEMPT_WINDOW_SECONDS`
(default 600) since the chain's last attempt.  Anything else starts a new
chain.  The fingerprint's first characters begin the chain's name
(`f<24 hex>-<random>`), so no other column is needed to find it.

Attempts are numbered 1, 2, 3... in each chain (a capture's `retry_chain`
and `attempt`).  `GET /api/attempts/<chain>` lists them, and
`GET /api/captures?retry_chain=<chain>` finds them in the list.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from datetime import timedelta
from typing import Any

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Max, Prefetch
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from inspector.assembly import STRICT
from inspector.captures import models

CHAIN_HEADER = "X-Inspector-Retry-Chain"
# The request header's first name, which the README documented: still read.
OLD_CHAIN_HEADER = "X-Inspector-Group"
# The retry count the OpenAI and Anthropic SDKs (Stainless clients) send on each try.
RETRY_COUNT_HEADER = "x-stainless-retry-count"
CHAIN_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
FINGERPRINT_CHARS = 24


def fingerprint(body: Any) -> str:
    """sha256 (hex) of the canonical JSON of the body's model, messages and
    tools: keys sorted, no spaces, non-ASCII kept."""
    if not isinstance(body, dict):
        body = {}
    subject = {key: body.get(key) for key in ("model", "messages", "tools")}
    try:
        text = orjson.dumps(subject, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # integers beyond 64 bits, deep nesting
        text = json.dumps(subject, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        text = text.encode()
    return hashlib.sha256(text).hexdigest()


def named_chain(headers: Any) -> str | None:
    """The header's value naming the request's retry chain, under either name."""
    value = headers.get(CHAIN_HEADER)
    return headers.get(OLD_CHAIN_HEADER) if value is None else value


def chain_from_header(value: str | None) -> str | None:
    """The retry chain a client named; a name that isn't URL-safe (or is too
    long) is replaced by a stable digest of it."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if CHAIN_NAME.match(value):
        return value
    return "h" + hashlib.sha256(value.encode()).hexdigest()[:40]


def window() -> timedelta:
    return timedelta(seconds=settings.INSPECTOR_ATTEMPT_WINDOW_SECONDS)


def find_chain(print_: str, *, client_retry: bool = False, now=None) -> str | None:
    """The newest chain with this fingerprint whose last attempt is within the
    window, when this request is a retry of it: the client says so, or that
    last attempt failed in a way worth retrying.  None: a new chain."""
    now = now or timezone.now()
    prefix = f"f{print_[:FINGERPRINT_CHARS]}-"
    last = (
        models.Capture.objects.filter(retry_chain__startswith=prefix)
        .order_by("-created", "-id")
        .values("retry_chain", "created", "outcome", "retryable", "http_status")
        .first()
    )
    if last is None or last["created"] < now - window():
        return None
    if client_retry or invites_a_retry(last):
        return last["retry_chain"]
    return None


def invites_a_retry(attempt: dict[str, Any]) -> bool:
    """A retryable refusal, an upstream error, or an attempt still being
    recorded (a client that gave up on it and tried again)."""
    status = attempt["http_status"]
    if status is not None and status >= 400:
        return True
    if attempt["outcome"] == models.Capture.Outcome.LIVE:
        return True
    return attempt["outcome"] == models.Capture.Outcome.REFUSED and bool(attempt["retryable"])


def client_retry(headers: Any) -> bool:
    """Whether the client says this request is a retry (its retry count ≥ 1)."""
    value = (headers.get(RETRY_COUNT_HEADER) or "").strip()
    return value.isascii() and value.isdigit() and int(value) >= 1


def new_chain(print_: str) -> str:
    return f"f{print_[:FINGERPRINT_CHARS]}-{secrets.token_hex(6)}"


def lock_chain(chain: str) -> None:
    """Number one chain's attempts one transaction at a time: on PostgreSQL an
    advisory lock held until the transaction ends (six attempts racing for one
    chain otherwise each lost the unique (chain, attempt) race in turn, and
    the last could use up its retries); SQLite writes one at a time anyway.
    Call inside the transaction that inserts the attempt."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [chain])


def next_attempt(chain: str) -> int:
    latest = models.Capture.objects.filter(retry_chain=chain).aggregate(n=Max("attempt"))["n"]
    return (latest or 0) + 1


def assign(header: str | None, body: Any, *, retry: bool = False) -> tuple[str, int]:
    """(chain, attempt number) for a new attempt (sync ORM, reads only; the
    caller inserts the capture, and the unique (chain, attempt) constraint
    settles a race for one number).  `retry`: the client says it retries."""
    chain = chain_from_header(header)
    if chain is None:
        print_ = fingerprint(body)
        chain = find_chain(print_, client_retry=retry) or new_chain(print_)
    lock_chain(chain)
    return chain, next_attempt(chain)


# -- the JSON view ----------------------------------------------------------


def attempt_summary(capture: models.Capture, strict: models.Assembly | None = None) -> dict:
    """One attempt as the JSON view and guard mode list it."""
    refusal = None
    if strict is not None and strict.refusal_code:
        refusal = {
            "code": strict.refusal_code,
            "message": strict.refusal_message,
            "frame": strict.refusal_frame,
            "call": strict.refusal_call,
            "choice": strict.refusal_choice,
            "retryable": strict.refusal_retryable,
        }
    return {
        "attempt": capture.attempt,
        "slug": capture.slug,
        "url": capture.get_absolute_url(),
        "outcome": capture.outcome,
        "refusal_code": capture.refusal_code or None,
        "retryable": capture.retryable,
        "refusal": refusal,
        "usage": strict.usage if strict is not None else None,
        "http_status": capture.http_status,
        "upstream": capture.upstream,
        "source": capture.source,
        "model": capture.model,
        "frame_count": capture.frame_count,
        "created": capture.created.isoformat() if capture.created else None,
        "finished": capture.finished.isoformat() if capture.finished else None,
    }


def chain_attempts(chain: str) -> list[dict]:
    captures = (
        models.Capture.objects.filter(retry_chain=chain)
        .defer("raw", "request_json")
        .order_by("attempt", "created", "id")
        .prefetch_related(
            Prefetch(
                "assemblies",
                queryset=models.Assembly.objects.filter(policy=STRICT).defer("result_json"),
                to_attr="strict_assemblies",
            )
        )
    )
    out = []
    for capture in captures:
        strict = capture.strict_assemblies[0] if capture.strict_assemblies else None
        out.append(attempt_summary(capture, strict))
    return out


@require_safe
def attempts_view(request: HttpRequest, chain: str) -> JsonResponse:
    """`GET /api/attempts/<chain>`: the retry chain's attempts, in order."""
    attempts = chain_attempts(chain)
    if not attempts:
        return JsonResponse({"error": f"no attempts in retry chain {chain!r}"}, status=404)
    final = attempts[-1]
    return JsonResponse(
        {
            "retry_chain": chain,
            "count": len(attempts),
            "outcome": final["outcome"],
            "attempts": attempts,
        },
        json_dumps_params={"ensure_ascii": False},
    )
