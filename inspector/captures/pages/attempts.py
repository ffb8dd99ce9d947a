"""The capture page's strip of attempts: the retries of one request (its
retry chain, `live/attempts.py`) in order, each with its outcome and usage."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import JSONField, OuterRef, Subquery

from inspector.assembly import STRICT

from ..models import Assembly, Capture
from .usage import usage_summary

ATTEMPTS_SHOWN = 20  # attempts of one retry chain shown in the capture page's strip


@dataclass
class Attempt:
    number: int | None
    slug: str
    href: str
    outcome: str
    refusal_code: str
    retryable: bool | None
    usage: str
    current: bool


@dataclass
class Attempts:
    """The strip of one retry chain's attempts; `earlier`/`later`: some were left out."""

    shown: list[Attempt]
    earlier: bool
    later: bool


def attempts(capture: Capture) -> Attempts | None:
    """The attempts of the capture's retry chain in order, with the strict usage of
    each read in the same query: one query.  At most ATTEMPTS_SHOWN, around
    this capture's attempt when a chain is longer."""
    if not capture.retry_chain:
        return None
    usage = Assembly.objects.filter(capture=OuterRef("pk"), policy=STRICT).values("usage")[:1]
    rows = (
        Capture.objects.filter(retry_chain=capture.retry_chain)
        .order_by("attempt", "created", "id")
        .only("slug", "attempt", "outcome", "refusal_code", "retryable")
        .annotate(strict_usage=Subquery(usage, output_field=JSONField()))
    )
    after = max(0, (capture.attempt or 0) - 1 - ATTEMPTS_SHOWN // 2)
    if after:
        rows = rows.filter(attempt__gt=after)
    found = list(rows[: ATTEMPTS_SHOWN + 1])
    shown = [_attempt(row, current=row.pk == capture.pk) for row in found[:ATTEMPTS_SHOWN]]
    return Attempts(shown=shown, earlier=after > 0, later=len(found) > ATTEMPTS_SHOWN)


def _attempt(row: Capture, *, current: bool) -> Attempt:
    return Attempt(
        number=row.attempt,
        slug=row.slug,
        href=row.get_absolute_url(),
        outcome=row.outcome,
        refusal_code=row.refusal_code,
        retryable=row.retryable,
        usage=usage_summary(row.strict_usage),
        current=current,
    )
