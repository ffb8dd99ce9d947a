"""Retries as attempts: captures of one logical request share a group.

A request names its group with the `X-Inspector-Group` header.  Without
one, its group is found by fingerprint: the sha256 of the canonical JSON
of its model, messages and tools.  The newest group holding that
fingerprint is reused while its last attempt is at most
`INSPECTOR_ATTEMPT_WINDOW_SECONDS` old (default 600); otherwise a new group
starts.  The fingerprint's first characters are the start of the group's
name (`f<24 hex>-<random>`), so no other column is needed to find it.

Attempts are numbered 1, 2, 3... in each group.  `GET /api/attempts/<group>`
lists them.
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
from django.db.models import Max, Prefetch
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from inspector.assembly import STRICT
from inspector.captures import models

GROUP_HEADER = "X-Inspector-Group"
GROUP_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
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


def group_from_header(value: str | None) -> str | None:
    """The group a client named; a name that isn't URL-safe (or is too
    long) is replaced by a stable digest of it."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if GROUP_NAME.match(value):
        return value
    return "h" + hashlib.sha256(value.encode()).hexdigest()[:40]


def window() -> timedelta:
    return timedelta(seconds=settings.INSPECTOR_ATTEMPT_WINDOW_SECONDS)


def find_group(print_: str, *, now=None) -> str | None:
    """The newest group with this fingerprint whose last attempt is within
    the window."""
    now = now or timezone.now()
    prefix = f"f{print_[:FINGERPRINT_CHARS]}-"
    last = (
        models.Capture.objects.filter(attempt_group__startswith=prefix)
        .order_by("-created", "-id")
        .values_list("attempt_group", "created")
        .first()
    )
    if last is None or last[1] < now - window():
        return None
    return last[0]


def new_group(print_: str) -> str:
    return f"f{print_[:FINGERPRINT_CHARS]}-{secrets.token_hex(6)}"


def next_attempt(group: str) -> int:
    latest = models.Capture.objects.filter(attempt_group=group).aggregate(n=Max("attempt"))["n"]
    return (latest or 0) + 1


def assign(header: str | None, body: Any) -> tuple[str, int]:
    """(group, attempt number) for a new attempt (sync ORM, reads only; the
    caller inserts the capture, and the unique (group, attempt) constraint
    settles a race for one number)."""
    group = group_from_header(header)
    if group is None:
        print_ = fingerprint(body)
        group = find_group(print_) or new_group(print_)
    return group, next_attempt(group)


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


def group_attempts(group: str) -> list[dict]:
    captures = (
        models.Capture.objects.filter(attempt_group=group)
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
def attempts_view(request: HttpRequest, group: str) -> JsonResponse:
    """`GET /api/attempts/<group>`: the group's attempts, in order."""
    attempts = group_attempts(group)
    if not attempts:
        return JsonResponse({"error": f"no attempts in group {group!r}"}, status=404)
    final = attempts[-1]
    return JsonResponse(
        {
            "group": group,
            "count": len(attempts),
            "outcome": final["outcome"],
            "attempts": attempts,
        },
        json_dumps_params={"ensure_ascii": False},
    )
