"""The frame permalink's "state at frame n" panel: each call touched at or
before frame n as it stood after it (identity, events, the text so far and
the scanner's state after its last fragment up to n)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Q, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.utils.safestring import SafeString

from ..call_forms import PATH_PIECES
from ..models import Assembly, Call, Capture, Fragment
from .calls import call_fragments, first_fragment_frame
from .fragment_text import object_so_far, piece_state, text_so_far, window_before
from .timeline import TimelineRow, identity_at, timeline_rows

STATE_CALLS = 20  # calls shown in the "state at frame n" panel


@dataclass
class CallState:
    position: int
    identity: dict[str, Any]
    index: int | None
    events: list[TimelineRow]
    events_hidden: int
    touched_here: bool
    fragments_so_far: int
    length_so_far: int
    so_far: SafeString | None
    state: list[tuple[str, str]]
    last_fragment_frame: int | None
    last_seq: int | None
    href: str


def state_at(
    capture: Capture,
    strict: Assembly,
    n: int,
    touched: list[int],
    call_link: Callable[[int], str],
) -> tuple[list[CallState], bool]:
    """Each call touched at or before frame n as it stood after frame n: two
    queries.  Returns the states and whether more calls were left out.

    The calls frame n touched come first, then the others by position, so the
    STATE_CALLS cap never leaves out a call the frame touched (unless it
    touched more than STATE_CALLS)."""
    calls = _calls_seen_by(strict, n, touched)
    more = len(calls) > STATE_CALLS
    calls = calls[:STATE_CALLS]
    pks = [call.last_fragment_pk for call in calls if call.last_fragment_pk is not None]
    fragments = {fragment.pk: fragment for fragment in Fragment.objects.filter(pk__in=pks)}
    states = [
        _call_state(call, fragments.get(call.last_fragment_pk), n, touched, call_link)
        for call in calls
    ]
    return states, more


def _calls_seen_by(strict: Assembly, n: int, touched: list[int]) -> list[Call]:
    """The calls started or sent arguments by frame n (STATE_CALLS + 1 of them,
    touched ones first), each with its last fragment up to n and the window
    of text before it, one query."""
    last_fragment = call_fragments(strict).filter(frame__lte=n).order_by("-frame", "-seq")
    return list(
        Call.objects.filter(assembly=strict)
        .annotate(
            first_fragment_frame=Subquery(first_fragment_frame(strict)),
            last_fragment_pk=Subquery(last_fragment.values("pk")[:1]),
            last_offset=Coalesce(Subquery(last_fragment.values("offset")[:1]), Value(0)),
            before=window_before("last_offset"),
        )
        .filter(Q(started_frame__lte=n) | Q(first_fragment_frame__lte=n))
        .annotate(untouched=Case(When(position__in=touched, then=Value(0)), default=Value(1)))
        .defer("arguments", "arguments_text")
        .order_by("untouched", "position")[: STATE_CALLS + 1]
    )


def _call_state(
    call: Call,
    fragment: Fragment | None,
    n: int,
    touched: list[int],
    call_link: Callable[[int], str],
) -> CallState:
    events, hidden = timeline_rows(call.timeline, upto=n)
    return CallState(
        position=call.position,
        identity=identity_at(call.timeline, n),
        index=call.index,
        events=events,
        events_hidden=hidden,
        touched_here=call.position in touched,
        fragments_so_far=fragment.seq + 1 if fragment else 0,
        length_so_far=fragment.offset + len(fragment.text) if fragment else 0,
        so_far=_so_far(call, fragment),
        state=piece_state(fragment, call.argument_form) if fragment else [],
        last_fragment_frame=fragment.frame if fragment else None,
        last_seq=fragment.seq if fragment else None,
        href=call_link(call.position),
    )


def _so_far(call: Call, fragment: Fragment | None) -> SafeString | None:
    """The text so far, or for Gemini path pieces the arguments object so far."""
    if fragment is None:
        return None
    if call.argument_form == PATH_PIECES:
        return object_so_far(fragment.state)
    return text_so_far(call.before, fragment.offset, fragment.text)
