"""The capture page's call cards: one page of the strict assembly's calls,
each with its identity timeline, its final arguments (or where they went
wrong) and one page of its argument fragments with the text so far.

A call can hold 100k fragments: they are read one page at a time by seq
range, for every call on the page in one query, and the calls on a page share
FRAGMENT_ROWS fragment rows and PRETTY_PAGE characters of final arguments
(`page_share`), so what a page renders does not grow with the calls.  A shown
call's arguments are read once, cut in the database: the pretty-printed
arguments are cut from that head.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Length, Substr
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..call_forms import PATH_PIECES
from ..models import Assembly, Call, Capture, Fragment
from .dialect_terms import identity_terms, kind_label
from .fragment_text import (
    FRAGMENT_SHOWN,
    WINDOW,
    cut_middle,
    object_so_far,
    piece_state,
    text_so_far,
    window_before,
)
from .frames import frame_path
from .paging import Pager, page_holding, page_share, pager
from .timeline import TimelineRow, identity_at, timeline_rows

CALLS_PER_PAGE = 10
FRAGMENTS_PER_PAGE = 25  # fragments of one call shown at a time, at most
FRAGMENT_ROWS = 100  # fragment rows of all the calls on a page, at most
PRETTY_SHOWN = 20_000  # characters of pretty-printed arguments shown, at most
PRETTY_PAGE = 40_000  # characters of pretty-printed arguments of all the calls on a page
AFTER_ERROR = 80  # characters shown after the offset where arguments went wrong

# The links of one call's fragment pager: (position, pager) -> previous/next/first/last.
FragmentLinks = Callable[[int, Pager], dict[str, str]]


@dataclass
class FragmentRow:
    seq: int
    frame: int
    offset: int
    length: int
    fragment: str
    so_far: SafeString
    state: list[tuple[str, str]]
    anchor: str
    permalink: str
    focus: bool


@dataclass
class CallCard:
    call: Call
    anchor: str
    identity: dict[str, Any]
    first_seen: int | None
    timeline: list[TimelineRow]
    timeline_hidden: int
    final: str | None  # pretty-printed arguments
    final_note: str
    error: dict[str, Any] | None
    error_context: SafeString | None
    not_checked: str
    is_refusal_call: bool
    terms: list[tuple[str, Any]] = field(default_factory=list)  # identity in the dialect's words
    kind: tuple[str, str] | None = None  # (label, meaning) unless a plain function call
    fragments: list[FragmentRow] = field(default_factory=list)
    fragment_pager: Pager | None = None
    fragment_links: dict[str, str] = field(default_factory=dict)


# --- the cards of one page of calls ------------------------------------------------------


def call_cards(
    capture: Capture,
    strict: Assembly,
    page: Pager,
    *,
    fragment_pages: dict[int, Any],
    focus: int | None,
    link: FragmentLinks,
) -> list[CallCard]:
    """The call cards of one page of strict calls, each with one page of its
    fragments: two queries whatever the number of calls or fragments (three
    when a fragment page is not a call's first).

    A call's fragment page is the one `fragment_pages` asks for (?call=&frag=),
    else at a frame permalink (`focus`) the page holding its fragment at that
    frame (its last one before, when the frame did not touch it), else the first."""
    on_page = page.stop - page.start
    per_page = page_share(FRAGMENT_ROWS, FRAGMENTS_PER_PAGE, on_page)
    pretty_shown = page_share(PRETTY_PAGE, PRETTY_SHOWN, on_page)
    calls = list(_page_of_calls(strict, page, focus))
    cards = [call_card(capture, strict, call, pretty_shown) for call in calls]
    for card in cards:
        asked = fragment_pages.get(card.call.position, _focus_page(card.call, per_page))
        card.fragment_pager = pager(asked, per_page, card.call.fragment_count)
        card.fragment_links = link(card.call.position, card.fragment_pager)
    by_call = _fragments_shown(capture, cards)
    prefixes = _prefixes(strict, {at: rows[0] for at, rows in by_call.items() if rows[0].offset})
    for card in cards:
        before = prefixes.get(card.call.position, "")
        for fragment in by_call.get(card.call.position, []):
            card.fragments.append(fragment_row(capture, card, fragment, focus, before))
            before = (before + fragment.text)[-WINDOW:]
    return cards


def _page_of_calls(strict: Assembly, page: Pager, focus: int | None) -> QuerySet[Call]:
    """The page's calls by position range, the head of their arguments cut in
    the database; at a frame permalink each with the seq of its fragment there."""
    calls = Call.objects.filter(
        assembly=strict, position__gte=page.start, position__lt=page.stop
    ).annotate(
        first_fragment_frame=Subquery(first_fragment_frame(strict)),
        args_length=Length("arguments_text"),
        args_head=Substr("arguments_text", 1, PRETTY_SHOWN),
    )
    if focus is not None:
        calls = calls.annotate(focus_seq=Subquery(_fragment_seq_at(strict, focus)))
    return calls.order_by("position").defer("arguments", "arguments_text")


def _fragments_shown(capture: Capture, cards: list[CallCard]) -> dict[int, list[Fragment]]:
    """Each card's page of fragments by seq range, every card in one query;
    by call position."""
    condition = Q(pk__in=[])
    for card in cards:
        shown = card.fragment_pager
        # The capture in each branch: SQLite searches the (capture, position, seq)
        # index once a branch; ANDed outside the ORs, it read all the capture's fragments.
        condition |= Q(
            capture=capture, position=card.call.position, seq__gte=shown.start, seq__lt=shown.stop
        )
    by_call: dict[int, list[Fragment]] = {}
    fragments = Fragment.objects.filter(condition).order_by("position", "seq")
    for fragment in fragments:
        by_call.setdefault(fragment.position, []).append(fragment)
    return by_call


def call_fragments(strict: Assembly) -> QuerySet[Fragment]:
    """The fragments of a strict call (OuterRef), for a subquery."""
    return Fragment.objects.filter(capture_id=strict.capture_id, position=OuterRef("position"))


def _fragment_seq_at(strict: Assembly, n: int) -> QuerySet[Fragment]:
    """For a call (OuterRef), the seq of its first fragment in the last frame
    up to n that held one: the fragment a permalink to frame n points at."""
    return call_fragments(strict).filter(frame__lte=n).order_by("-frame", "seq").values("seq")[:1]


def _focus_page(call: Call, per_page: int) -> int:
    """The fragment page holding `focus_seq` (when the call was read with it)."""
    seq = getattr(call, "focus_seq", None)
    return 1 if seq is None else page_holding(seq, per_page)


def _prefixes(strict: Assembly, first: dict[int, Fragment]) -> dict[int, str]:
    """For calls (by position) whose shown fragments don't start at offset 0,
    the text just before the first one: one query, only when some page is
    not the first.  Cut from each call's arguments by the database."""
    if not first:
        return {}
    offsets = Case(
        *(When(position=at, then=Value(fragment.offset)) for at, fragment in first.items())
    )
    rows = (
        Call.objects.filter(assembly=strict, position__in=list(first))
        .order_by()
        .annotate(first_offset=offsets)
        .annotate(before=window_before("first_offset"))
        .values_list("position", "before")
    )
    return dict(rows)


def first_fragment_frame(strict: Assembly) -> QuerySet[Fragment]:
    """For a strict call (OuterRef), the frame of its first fragment."""
    return call_fragments(strict).order_by("seq").values("frame")[:1]


def first_seen(call: Call) -> int | None:
    """The frame where a call was first seen: when it started, or earlier
    when its arguments came before its id and name."""
    frames = [f for f in (call.started_frame, call.first_fragment_frame) if f is not None]
    return min(frames, default=None)


# --- one card ----------------------------------------------------------------------------


def call_card(
    capture: Capture,
    strict: Assembly,
    call: Call,
    pretty_shown: int = PRETTY_SHOWN,
    text_near: Callable[[Call, Any], str] | None = None,
) -> CallCard:
    """A call's card without its fragments (`call_cards` adds them).
    `text_near(call, offset)`: its arguments around where they went wrong
    (read from the database unless given: a live call's are in memory)."""
    is_refusal_call = strict.refusal_call == call.position
    timeline, hidden = timeline_rows(
        call.timeline, refusal_message=strict.refusal_message if is_refusal_call else ""
    )
    final = error = context = None
    note = ""
    if call.invalid_at:
        error = call.invalid_at
        offset = error.get("offset")
        context = error_context((text_near or _text_near)(call, offset), offset)
    elif strict.outcome == Capture.Outcome.OK:
        final, note = pretty_arguments(call.args_head, call.args_length, pretty_shown)
    return CallCard(
        call=call,
        anchor=f"call-{call.position}",
        identity=identity_at(call.timeline),
        first_seen=first_seen(call),
        timeline=timeline,
        timeline_hidden=hidden,
        final=final,
        final_note=note,
        error=error,
        error_context=context,
        not_checked=_why_not_checked(call, strict, is_refusal_call),
        is_refusal_call=is_refusal_call,
        terms=identity_terms(call, capture.dialect),
        kind=kind_label(call.kind),
    )


def _why_not_checked(call: Call, strict: Assembly, is_refusal_call: bool) -> str:
    """Why a call that neither failed nor passed shows no final arguments."""
    if call.invalid_at or strict.outcome == Capture.Outcome.OK:
        return ""
    if is_refusal_call:
        return f"no final arguments: {strict.refusal_message}"
    if strict.outcome == Capture.Outcome.REFUSED:
        return (
            f"not checked: the stream was refused ({strict.refusal_code}) "
            "before every call passed its checks"
        )
    return "not checked yet: the stream is still being captured"


def pretty_arguments(text: str, length: int, shown: int = PRETTY_SHOWN) -> tuple[str, str]:
    """Pretty-printed arguments of a call that passed, at most `shown`
    characters, and a note when cut.  `text` is the head of the arguments
    (all of them when `length` fits)."""
    if length > len(text):
        head = text[:shown]
        return head + "\u2026", f"{length} characters; the first {len(head)} shown as received"
    try:
        pretty = json.dumps(json.loads(text or "{}"), indent=2, ensure_ascii=False)
    except ValueError:  # the strict parser accepted it; keep it as received
        pretty = text
    if len(pretty) > shown:
        return pretty[:shown] + "\n\u2026", f"cut at {shown} characters"
    return pretty, ""


def near_range(offset: int) -> tuple[int, int]:
    """The slice of the arguments shown around the offset where they went
    wrong: WINDOW characters before it to AFTER_ERROR after it."""
    return max(0, offset - WINDOW), offset + 1 + AFTER_ERROR


def _text_near(call: Call, offset: Any) -> str:
    """The arguments around `offset` (`near_range`; one query, for the one
    call that failed)."""
    if not isinstance(offset, int) or offset < 0:
        return ""
    start = max(0, offset - WINDOW)
    return (
        Call.objects.filter(pk=call.pk)
        .annotate(near=Substr("arguments_text", start + 1, offset - start + 1 + AFTER_ERROR))
        .values_list("near", flat=True)
        .get()
    )


def error_context(near: str, offset: Any) -> SafeString | None:
    """The arguments around the offset where they stopped being one JSON
    object; `near` starts WINDOW characters before it (fewer at the start)."""
    if not isinstance(offset, int) or offset < 0:
        return None
    at = min(offset, WINDOW)
    return format_html(
        '<span class="ellipsis">{}</span>{}<mark class="bad">{}</mark>{}',
        "\u2026" if offset > WINDOW else "",
        near[:at],
        near[at : at + 1] or "\u2205",
        near[at + 1 :],
    )


# --- one fragment ------------------------------------------------------------------------


def fragment_anchor(position: int, seq: int) -> str:
    return f"frag-{position}-{seq}"


def fragment_permalink(slug: str, position: int, seq: int, frame: int) -> str:
    """The frame permalink of the frame that brought a fragment, at its row."""
    calls_page = page_holding(position, CALLS_PER_PAGE)
    query = f"?calls={calls_page}" if calls_page > 1 else ""
    return f"{frame_path(slug, frame)}{query}#{fragment_anchor(position, seq)}"


def fragment_row(
    capture: Capture, card: CallCard, fragment: Fragment, focus: int | None, before: str
) -> FragmentRow:
    position = card.call.position
    form = card.call.argument_form
    return FragmentRow(
        seq=fragment.seq,
        frame=fragment.frame,
        offset=fragment.offset,
        length=len(fragment.text),
        fragment=cut_middle(fragment.text, FRAGMENT_SHOWN),
        so_far=(
            object_so_far(fragment.state)
            if form == PATH_PIECES
            else text_so_far(before, fragment.offset, fragment.text)
        ),
        state=piece_state(fragment, form),
        anchor=fragment_anchor(position, fragment.seq),
        permalink=fragment_permalink(capture.slug, position, fragment.seq, fragment.frame),
        focus=fragment.frame == focus,
    )
