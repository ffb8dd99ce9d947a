"""Pages: the capture list, the upload form, the capture page, frame
permalinks and the two downloads.

Plain function views; what a page shows is shaped in `presenters`.  Every
page renders completely on the server: JavaScript adds copy buttons and, on
the pages of captures still being recorded, the frames, calls and outcome
as they arrive (static/inspector/live.js, over /ws/captures/).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_safe

from inspector.assembly import LENIENT, POLICIES, STRICT, UnreadableInput

from . import presenters as p
from .forms import CaptureFilterForm, UploadForm
from .intake import store_upload
from .models import Assembly, Capture, verdicts_differ, with_lenient_code
from .pages import export as export_page
from .pages import lenses as lenses_page
from .uploads import TooLarge, declared_size

log = logging.getLogger(__name__)

CAPTURES_PER_PAGE = 50


@require_safe
def capture_list(request):
    """The captures, newest first, paged and filtered.  A filter that can't be
    used (`?outcome=zzz`) is a 400 page with the form and the reason, listing
    nothing: listing every capture would look like the filter was applied."""
    filters = CaptureFilterForm(request.GET)
    valid = filters.is_valid()
    page = None
    if valid:
        captures = filters.filter(with_lenient_code(Capture.objects.only(*Capture.SUMMARY_FIELDS)))
        page = Paginator(captures, CAPTURES_PER_PAGE).get_page(request.GET.get("page"))
    kept = {k: v for k, v in request.GET.items() if k != "page" and v}
    models = (
        Capture.objects.exclude(model="")
        .order_by("model")
        .values_list("model", flat=True)
        .distinct()[:200]
    )
    context = {
        "filters": filters,
        "page": page,
        "models": models,
        "query": urlencode(kept),
        "filtered": bool(kept),
        "group": filters.cleaned_data.get("group") if valid else "",
    }
    return render(request, "inspector/capture_list.html", context, status=200 if valid else 400)


@require_http_methods(["GET", "POST"])
def upload(request):
    if request.method != "POST":
        return render(request, "inspector/upload.html", {"form": UploadForm()})
    try:
        form = UploadForm(request.POST, request.FILES)
        valid = form.is_valid()
    except RequestDataTooBig:
        form = UploadForm()
        form.cleaned_data = {}  # an unbound form has none, and add_error needs it
        form.add_error(None, _sentence(str(TooLarge(declared_size(request)))))
        return _upload_refused(request, form, too_large=True)
    if not valid:
        return _upload_refused(request, form, too_large=form.too_large())
    data, name = form.payload()
    try:
        captures = store_upload(
            data, name=name, fmt=form.cleaned_data["format"], title=form.cleaned_data["title"]
        )
    except TooLarge as error:
        form.add_error(None, f"Can't read this input: {error}")
        return _upload_refused(request, form, too_large=True)
    except UnreadableInput as error:
        form.add_error(None, f"Can't read this input: {error}")
        return _upload_refused(request, form)
    except (ValueError, DatabaseError) as error:  # e.g. text the database can't hold
        log.warning("upload could not be stored: %s", error)
        form.add_error(None, f"Can't store this input: {error}")
        return _upload_refused(request, form)
    if len(captures) == 1:
        return redirect(captures[0])
    return redirect(reverse("capture-list") + "?" + urlencode({"group": captures[0].group}))


def _upload_refused(request, form: UploadForm, *, too_large: bool = False) -> HttpResponse:
    """The form again with its errors: 413 when the upload was too large (as
    the API answers), else 400."""
    status = 413 if too_large else 400
    return render(request, "inspector/upload.html", {"form": form}, status=status)


def _sentence(text: str) -> str:
    """A message as the page says it: capitalised, with a full stop."""
    return text[:1].upper() + text[1:] + "."


@require_safe
def capture_page(request, slug):
    return _render_capture(request, p.get_capture(slug), focus=None)


@require_safe
def frame_page(request, slug, n):
    capture = p.get_capture(slug)
    if n < 0:
        raise Http404("no such frame")
    return _render_capture(request, capture, focus=n)


def _render_capture(request, capture, focus):
    """The capture page; with `focus`, opened at that frame with each call's
    state after it.  A fixed number of queries whatever the capture's size."""
    found = p.assemblies(capture)
    strict, lenient = found.get(STRICT), found.get(LENIENT)
    frame_total = p.frame_total(capture)
    # A capture still being recorded is watched live on its page (not at a frame
    # permalink); it opens at its newest frames, where the live ones are added.
    live = capture.outcome == Capture.Outcome.LIVE and focus is None
    asked = request.GET.get("page") if focus is None else p.page_holding(focus, p.FRAMES_PER_PAGE)
    if live and asked is None:
        asked = p.page_holding(max(0, frame_total - 1), p.FRAMES_PER_PAGE)
    frames_pager = p.pager(asked, p.FRAMES_PER_PAGE, frame_total)
    frames = p.load_frames(capture, frames_pager)
    focus_frame = next((frame for frame in frames if frame.number == focus), None)
    if focus is not None and focus_frame is None:
        raise Http404("no such frame")
    touched = list(focus_frame.calls) if focus_frame is not None else []

    # A frame permalink opens the call page holding the calls that frame touched.
    first_touched = p.page_holding(min(touched), p.CALLS_PER_PAGE) if touched else 1
    calls_pager = p.pager(
        request.GET.get("calls", first_touched),
        p.CALLS_PER_PAGE,
        strict.call_count if strict else 0,
    )
    links = _Links(capture.get_absolute_url(), request.path, calls_pager.number)
    states, more_states = [], False
    if strict is not None and focus is not None:
        states, more_states = p.state_at(capture, strict, focus, touched, links.call)
    cards = _call_cards(request, capture, strict, calls_pager, focus, links)
    rows = p.frame_rows(capture, frames, focus=focus, call_link=links.call)
    disagree = _policies_disagree(strict, lenient)
    context = {
        "capture": capture,
        "strict": strict,
        "lenient": lenient,
        "disagree": disagree,
        "lenient_calls": p.lenient_calls(lenient) if disagree else [],
        "usage": p.usage_items(strict.usage if strict else None),
        "refusal_link": _refusal_link(capture, strict),
        "refusal_call_link": (
            links.call(strict.refusal_call) if strict and strict.refusal_call is not None else ""
        ),
        "policies": POLICIES,
        "frame_total": frame_total,
        "frames": rows,
        "frames_pager": frames_pager,
        "frames_links": _pager_links(frames_pager, links.frames_page),
        "cards": cards,
        "calls_pager": calls_pager,
        "calls_links": _pager_links(calls_pager, links.calls_page),
        "focus": focus,
        "focus_row": next((row for row in rows if row.focus), None),
        "states": states,
        "more_states": more_states,
        "attempts": p.attempts(capture),
        "live": live,
        # The live script asks for the frames after the last one stored now, and adds
        # them to the table when this is its last page.
        "last_frame": frame_total - 1,
        "follow": not frames_pager.has_next,
        **_reproducer_context(capture, disagree),
    }
    if focus is not None:
        context["previous_frame"] = p.frame_permalink(capture.slug, focus - 1) if focus else ""
        has_next = focus + 1 < frame_total
        context["next_frame"] = p.frame_permalink(capture.slug, focus + 1) if has_next else ""
    return render(request, "inspector/capture.html", context)


def _reproducer_context(capture, disagree) -> dict:
    """The lens section, the minimize button, the export links, the derivation
    and the compare form; no query but the list of derivatives, when any."""
    derivatives = p.derivatives(capture)
    derivation = p.derivation(capture)
    original = derivation.original if derivation else None
    compare = reverse("compare")
    pairs = []
    if original is not None:
        pairs.append(
            ("with the original", f"{compare}?{urlencode({'a': original.slug, 'b': capture.slug})}")
        )
    for derived in derivatives[:3]:
        query = urlencode({"a": capture.slug, "b": derived.slug})
        pairs.append((f"with {derived.title or derived.slug}", f"{compare}?{query}"))
    if disagree:
        query = urlencode({"a": capture.slug, "b": capture.slug, "pb": LENIENT})
        pairs.append(("strict with lenient", f"{compare}?{query}"))
    finished = capture.outcome != Capture.Outcome.LIVE
    return {
        "derivation": derivation,
        "derivatives": derivatives,
        "more_derivatives": max(0, capture.derivative_count - len(derivatives)),
        "export": export_page.export_links(capture) if finished else None,
        "lenses_url": reverse("capture-lenses", args=[capture.slug]) if finished else "",
        "lenses_autoload": finished and capture.byte_size <= lenses_page.LENS_AUTOLOAD_BYTES,
        "can_minimize": capture.outcome == Capture.Outcome.REFUSED,
        "minimize_seconds": f"{float(settings.INSPECTOR_MINIMIZE_SECONDS):g}",
        "compare_pairs": pairs,
        "compare_with": original.slug if original is not None else "",
    }


@dataclass(frozen=True)
class _Links:
    """URLs within one rendering of the capture page."""

    capture_url: str
    path: str  # the capture page or a frame permalink
    shown_calls_page: int  # the page of call cards shown

    def call(self, position: int) -> str:
        page = p.page_holding(position, p.CALLS_PER_PAGE)
        if page == self.shown_calls_page:
            return f"#call-{position}"
        return f"{self.capture_url}?calls={page}#call-{position}"

    def frames_page(self, number: int) -> str:
        params = {"page": number}
        if self.shown_calls_page > 1:
            params["calls"] = self.shown_calls_page
        return f"{self.capture_url}?{urlencode(params)}#frames"

    def calls_page(self, number: int) -> str:
        return f"{self.capture_url}?{urlencode({'calls': number})}#calls"

    def fragments_page(self, position: int):
        def url(number: int) -> str:
            params = {"calls": self.shown_calls_page, "call": position, "frag": number}
            if self.shown_calls_page == 1:
                del params["calls"]
            return f"{self.path}?{urlencode(params)}#call-{position}"

        return url


def _pager_links(pager: p.Pager, url) -> dict[str, str]:
    return {
        "previous": url(pager.previous) if pager.has_previous else "",
        "next": url(pager.next) if pager.has_next else "",
        "first": url(1),
        "last": url(pager.count),
    }


def _call_cards(request, capture, strict, calls_pager, focus, links):
    """The call cards; each shows the fragment page asked for (?call=&frag=),
    else at a frame permalink the page holding the call's fragment there
    (worked out for every call shown, not only those in the state panel)."""
    if strict is None:
        return []
    fragment_pages = {}
    asked_call = p.query_int(request.GET.get("call"))
    if asked_call is not None:
        fragment_pages[asked_call] = request.GET.get("frag")
    return p.call_cards(
        capture,
        strict,
        calls_pager,
        fragment_pages=fragment_pages,
        focus=focus,
        link=lambda position, pager: _pager_links(pager, links.fragments_page(position)),
    )


def _refusal_link(capture, strict) -> str:
    if strict is None or strict.refusal_frame is None:
        return ""
    return p.frame_permalink(capture.slug, strict.refusal_frame)


def _policies_disagree(strict, lenient) -> bool:
    if strict is None or lenient is None:
        return False
    return verdicts_differ(
        (strict.outcome, strict.refusal_code), (lenient.outcome, lenient.refusal_code)
    )


@require_safe
def download_raw(request, slug):
    """The stream exactly as received (a HAR's stream: its event-stream body)."""
    capture = _download_capture(slug, "raw")
    extension = "jsonl" if capture.stream_format == "jsonl" else "sse"
    response = HttpResponse(bytes(capture.raw), content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{capture.slug}.{extension}"'
    return response


@require_safe
def download_result(request, slug):
    """The result document of one policy (strict unless ?policy=lenient)."""
    policy = request.GET.get("policy", STRICT)
    if policy not in POLICIES:
        raise Http404("no such policy")
    capture = _download_capture(slug)
    try:
        assembly = Assembly.objects.only("result_json").get(capture=capture, policy=policy)
    except Assembly.DoesNotExist:
        raise Http404("no result for this policy") from None
    response = HttpResponse(assembly.result_json, content_type="application/json")
    name = f"{capture.slug}.{policy}.json"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _download_capture(slug, *extra):
    try:
        return Capture.objects.only("id", "slug", "stream_format", *extra).get(slug=slug)
    except Capture.DoesNotExist:
        raise Http404("no such capture") from None
