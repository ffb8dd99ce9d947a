"""The capture page's section on where the policies disagree: whether they
do (outcome or refusal code) and the lenient assembly's calls to set beside
the strict ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models.functions import Length, Substr

from ..models import Assembly, Call, verdicts_differ
from .fragment_text import WINDOW

LENIENT_CALLS = 20  # calls of the lenient assembly listed where policies disagree


@dataclass
class LenientCall:
    position: int
    call_id: str
    name: str
    arguments: str
    arguments_cut: int
    invalid_at: dict[str, Any] | None
    guessed_frames: list[int]


def policies_disagree(strict: Assembly | None, lenient: Assembly | None) -> bool:
    """Whether the two assemblies reach different verdicts (`verdicts_differ`)."""
    if strict is None or lenient is None:
        return False
    return verdicts_differ(
        (strict.outcome, strict.refusal_code), (lenient.outcome, lenient.refusal_code)
    )


def lenient_calls(lenient: Assembly) -> list[LenientCall]:
    """The first LENIENT_CALLS lenient calls, arguments cut in the database: one query."""
    calls = (
        Call.objects.filter(assembly=lenient)
        .order_by("position")
        .only("position", "call_id", "name", "invalid_at", "timeline")
        .annotate(
            args_head=Substr("arguments_text", 1, WINDOW), args_length=Length("arguments_text")
        )[:LENIENT_CALLS]
    )
    return [
        LenientCall(
            position=call.position,
            call_id=call.call_id,
            name=call.name,
            arguments=call.args_head,
            arguments_cut=max(0, call.args_length - WINDOW),
            invalid_at=call.invalid_at,
            guessed_frames=[
                entry["frame"]
                for entry in call.timeline
                if entry.get("event") == "guessed_continuation"
            ],
        )
        for call in calls
    ]
