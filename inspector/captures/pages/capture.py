"""The capture page (`/c/<slug>/`) and its frame permalinks
(`/c/<slug>/frames/<n>/`): the verdict of both policies, one page of frames,
one page of call cards, the attempts strip, the derivation and the tools
(lenses, minimize, export, compare); at a permalink also each call's state
after that frame.

The page renders completely on the server with a fixed number of queries
whatever the capture's size; each panel's queries live with the panel
(`frames`, `calls`, `frame_state`, `attempts`, `disagreement`).  JavaScript
adds copy buttons and, while a capture is still being recorded, inserts the
rows the server renders as they arrive (static/inspector/live.js, over
/ws/captures/; `captures/pages/live_cards.py`), then this page's main part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import Case, Count, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe

from inspector.assembly import LENIENT, POLICIES, STRICT

from .. import minimize_jobs
from ..models import Assembly, Capture, Frame
from . import export as export_page
from . import lenses as lenses_page
from .assemblies import assemblies
from .attempts import attempts
from .calls import CALLS_PER_PAGE, call_cards
from .derivation import compare_links, derivation, derivatives
from .dialect_terms import POSITION_TERMS, dialect_note
from .disagreement import lenient_calls, policies_disagree
from .frame_filter import (
    NO_FILTER,
    FilteredPage,
    FrameFilter,
    call_choices,
    filtered_frames,
    frame_filter,
    panel_links,
    panel_url,
)
from .frame_state import state_at
from .frames import FRAMES_PER_PAGE, frame_permalink, frame_rows, frame_total, load_frames
from .marks import marks_explained
from .paging import Pager, page_holding, pager, pager_links, query_int
from .timeline_picture import timeline_section
from .usage import usage_items

# What the capture page reads of the capture it was derived from (joined in).
ORIGINAL_FIELDS = ("slug", "title", "frame_count", "byte_size", "refusal_code")
DERIVATIVES_SHOWN = 20  # captures derived from this one listed on its page


def get_capture(slug: str) -> Capture:
    """The capture, with the one it was derived from (joined), how many were
    derived from it, and the newest DERIVATIVES_SHOWN of those (its
    `derivatives_shown`): one query, the derivatives being rows of the same
    select (`slug = X OR derived_from = (the id of X)`, both indexed)."""
    count = (
        Capture.objects.filter(derived_from=OuterRef("pk"))
        .order_by()
        .values("derived_from")
        .annotate(n=Count("pk"))
        .values("n")
    )
    asked = Capture.objects.filter(slug=slug).order_by().values("pk")[:1]
    rows = list(
        Capture.objects.select_related("derived_from")
        .only(*Capture.PAGE_FIELDS, *(f"derived_from__{name}" for name in ORIGINAL_FIELDS))
        .filter(Q(slug=slug) | Q(derived_from_id=Subquery(asked)))
        .annotate(
            derivative_count=Coalesce(Subquery(count), 0),
            is_derivative=Case(When(slug=slug, then=Value(0)), default=Value(1)),
        )
        .order_by("is_derivative", "-created", "-id")[: DERIVATIVES_SHOWN + 1]
    )
    if not rows or rows[0].slug != slug:
        raise Http404("no such capture")
    capture = rows[0]
    capture.derivatives_shown = rows[1:]
    return capture


@require_safe
def capture_page(request: HttpRequest, slug: str) -> HttpResponse:
    return render_capture(request, get_capture(slug), focus=None)


@require_safe
def frame_page(request: HttpRequest, slug: str, n: int) -> HttpResponse:
    capture = get_capture(slug)
    if n < 0:
        raise Http404("no such frame")
    return render_capture(request, capture, focus=n)


def render_capture(request: HttpRequest, capture: Capture, focus: int | None) -> HttpResponse:
    """The capture page; with `focus`, opened at that frame with each call's
    state after it.  A fixed number of queries whatever the capture's size."""
    found = assemblies(capture)
    strict, lenient = found.get(STRICT), found.get(LENIENT)
    total = frame_total(capture)
    # A capture still being recorded is watched live on its page (not at a frame
    # permalink); it opens at its newest frames, where the live ones are added.
    live = capture.outcome == Capture.Outcome.LIVE and focus is None
    frames_pager = pager(_frames_page_asked(request, focus, live, total), FRAMES_PER_PAGE, total)
    chosen = frame_filter(request.GET.get("frames")) if focus is None else NO_FILTER
    raw_open = request.GET.get("raw") == "1"
    filtered = _filtered(request, capture, strict, chosen, raw_open)
    frames = filtered.frames if filtered else load_frames(capture, frames_pager)
    touched = _calls_touched_at(frames, focus)
    calls_pager = _calls_pager(request, strict, touched)
    links = _Links(capture.get_absolute_url(), request.path, calls_pager.number, raw_open)
    rows = frame_rows(capture, frames, focus=focus, call_link=links.call, raw_open=raw_open)
    disagree = policies_disagree(strict, lenient)
    context = {
        "capture": capture,
        "strict": strict,
        "lenient": lenient,
        "disagree": disagree,
        "lenient_calls": lenient_calls(lenient) if disagree else [],
        "policies": POLICIES,
        "attempts": attempts(capture),
        "live": live,
        "dialect_note": dialect_note(capture.dialect, capture.dialect_basis),
        "find_text": request.GET.get("find", "")[:200],  # after "not found" (`find.py`)
        **_verdict_context(capture, strict, links),
        **_frames_context(frames_pager, rows, total, links, filtered),
        "frames_panel": panel_links(links.capture_url, request.path, request.GET, chosen, raw_open),
        "call_choices": call_choices(strict.call_count if strict else 0),
        **_calls_context(request, capture, strict, calls_pager, focus, links),
        **_focus_context(capture, strict, focus, touched, rows, total, links),
        **_tools_context(capture, disagree),
        "timeline": "" if live else timeline_section(request, capture, strict, calls_pager.total),
    }
    return render(request, _template(request), context)


def _template(request: HttpRequest) -> str:
    """The whole page, or with `?partial=main` its main part alone: what a
    live page swaps in when its capture closes (`static/inspector/live.js`)."""
    if request.GET.get("partial") == "main":
        return "inspector/_capture_main.html"
    return "inspector/capture.html"


def _filtered(
    request: HttpRequest,
    capture: Capture,
    strict: Assembly | None,
    chosen: FrameFilter,
    raw_open: bool,
) -> FilteredPage | None:
    """The filtered frames panel asked for (?frames=), else None."""
    if not chosen:
        return None
    base = panel_url(capture.get_absolute_url(), frames=chosen.value, raw="1" if raw_open else "")
    timeline = strict.timeline if strict is not None else None
    return filtered_frames(capture, chosen, request.GET, base, timeline)


def _frames_page_asked(request: HttpRequest, focus: int | None, live: bool, total: int) -> Any:
    """The frames page to show: the one holding the focus frame at a permalink,
    else the one asked for (?page=), else for a live capture its last."""
    if focus is not None:
        return page_holding(focus, FRAMES_PER_PAGE)
    asked = request.GET.get("page")
    if live and asked is None:
        return page_holding(max(0, total - 1), FRAMES_PER_PAGE)
    return asked


def _calls_touched_at(frames: list[Frame], focus: int | None) -> list[int]:
    """The positions of the calls the focus frame touched (404 when it is
    not on its page: a frame past the end)."""
    if focus is None:
        return []
    focus_frame = next((frame for frame in frames if frame.number == focus), None)
    if focus_frame is None:
        raise Http404("no such frame")
    return list(focus_frame.calls)


def _calls_pager(request: HttpRequest, strict: Assembly | None, touched: list[int]) -> Pager:
    """The page of call cards asked for (?calls=); a frame permalink opens the
    page holding the calls that frame touched."""
    first_touched = page_holding(min(touched), CALLS_PER_PAGE) if touched else 1
    total = strict.call_count if strict else 0
    return pager(request.GET.get("calls", first_touched), CALLS_PER_PAGE, total)


@dataclass(frozen=True)
class _Links:
    """URLs within one rendering of the capture page."""

    capture_url: str
    path: str  # the capture page or a frame permalink
    shown_calls_page: int  # the page of call cards shown
    raw_open: bool = False  # frames' raw text unfolded (?raw=1), kept by the pager

    def call(self, position: int) -> str:
        page = page_holding(position, CALLS_PER_PAGE)
        if page == self.shown_calls_page:
            return f"#call-{position}"
        return f"{self.capture_url}?calls={page}#call-{position}"

    def frames_page(self, number: int) -> str:
        params = {"page": number}
        if self.shown_calls_page > 1:
            params["calls"] = self.shown_calls_page
        if self.raw_open:
            params["raw"] = 1
        return f"{self.capture_url}?{urlencode(params)}#frames"

    def calls_page(self, number: int) -> str:
        return f"{self.capture_url}?{urlencode({'calls': number})}#calls"

    def fragments_page(self, position: int, number: int) -> str:
        params = {"calls": self.shown_calls_page, "call": position, "frag": number}
        if self.shown_calls_page == 1:
            del params["calls"]
        return f"{self.path}?{urlencode(params)}#call-{position}"

    def fragment_pager(self, position: int, page: Pager) -> dict[str, str]:
        return pager_links(page, lambda number: self.fragments_page(position, number))


def _verdict_context(capture: Capture, strict: Assembly | None, links: _Links) -> dict[str, Any]:
    """The strict verdict's usage and links to where it refused."""
    refused_in_call = strict is not None and strict.refusal_call is not None
    refused_at_frame = strict is not None and strict.refusal_frame is not None
    return {
        "usage": usage_items(strict.usage if strict else None),
        "refusal_link": (
            frame_permalink(capture.slug, strict.refusal_frame) if refused_at_frame else ""
        ),
        "refusal_call_link": links.call(strict.refusal_call) if refused_in_call else "",
    }


def _frames_context(
    frames_pager: Pager,
    rows: list[Any],
    total: int,
    links: _Links,
    filtered: FilteredPage | None,
) -> dict[str, Any]:
    return {
        "frames_filtered": filtered,
        "frame_total": total,
        "frames": rows,
        "marks_explained": marks_explained(rows),
        "frames_pager": frames_pager,
        "frames_links": pager_links(frames_pager, links.frames_page),
        # The live script asks for the frames after the last one stored now, and adds
        # them to the table when this is its last page.
        "last_frame": total - 1,
        "follow": not frames_pager.has_next and filtered is None,
    }


def _calls_context(
    request: HttpRequest,
    capture: Capture,
    strict: Assembly | None,
    calls_pager: Pager,
    focus: int | None,
    links: _Links,
) -> dict[str, Any]:
    """The call cards; each shows the fragment page asked for (?call=&frag=),
    else at a frame permalink the page holding the call's fragment there
    (worked out for every call shown, not only those in the state panel)."""
    cards = []
    if strict is not None:
        fragment_pages = {}
        asked_call = query_int(request.GET.get("call"))
        if asked_call is not None:
            fragment_pages[asked_call] = request.GET.get("frag")
        cards = call_cards(
            capture,
            strict,
            calls_pager,
            fragment_pages=fragment_pages,
            focus=focus,
            link=links.fragment_pager,
        )
    return {
        "cards": cards,
        "calls_pager": calls_pager,
        "calls_links": pager_links(calls_pager, links.calls_page),
    }


def _focus_context(
    capture: Capture,
    strict: Assembly | None,
    focus: int | None,
    touched: list[int],
    rows: list[Any],
    total: int,
    links: _Links,
) -> dict[str, Any]:
    """At a frame permalink: the frame's row, each call's state after it, and
    the permalinks of the frames before and after it."""
    states, more_states = [], False
    if strict is not None and focus is not None:
        states, more_states = state_at(capture, strict, focus, touched, links.call)
    context = {
        "focus": focus,
        "focus_row": next((row for row in rows if row.focus), None),
        "states": states,
        "more_states": more_states,
        "position_term": POSITION_TERMS.get(capture.dialect, "index"),
    }
    if focus is not None:
        context["previous_frame"] = frame_permalink(capture.slug, focus - 1) if focus else ""
        has_next = focus + 1 < total
        context["next_frame"] = frame_permalink(capture.slug, focus + 1) if has_next else ""
    return context


def _tools_context(capture: Capture, disagree: bool) -> dict[str, Any]:
    """The lens section, the minimize button, the export links, the derivation
    and the compare form; no query (`get_capture` read the derivatives)."""
    made = derivatives(capture)
    derived = derivation(capture)
    original = derived.original if derived else None
    finished = capture.outcome != Capture.Outcome.LIVE
    refused = capture.outcome == Capture.Outcome.REFUSED
    return {
        "derivation": derived,
        "derivatives": made,
        "more_derivatives": max(0, capture.derivative_count - len(made)),
        "export": export_page.export_links(capture) if finished else None,
        "lenses_url": reverse("capture-lenses", args=[capture.slug]) if finished else "",
        "lenses_autoload": finished and capture.byte_size <= lenses_page.LENS_AUTOLOAD_BYTES,
        "can_minimize": refused,
        "minimize_seconds": f"{float(settings.INSPECTOR_MINIMIZE_SECONDS):g}",
        "minimize_job": minimize_jobs.new_job_id() if refused else "",
        "compare_pairs": compare_links(capture, original, made, disagree),
        "compare_with": original.slug if original is not None else "",
    }
