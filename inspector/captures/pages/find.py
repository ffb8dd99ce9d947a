"""Find in arguments (`GET /c/<slug>/find/?text=`): the capture page's small
form, answered with a redirect to the fragment where the text first appears
in a call's arguments (the permalink of the frame that brought that
fragment, at its row), or back to the page with a "not found" message.

"First" is the lowest call position whose arguments hold the text, and in it
the fragment that completed the first occurrence (the text may span
fragments).  A substring, any case, as the capture search compares
(`UPPER`, so the position counts as the database does).  Three queries: the
capture, the call with the match's position, its fragment."""

from __future__ import annotations

from urllib.parse import urlencode

from django.db.models import Value
from django.db.models.functions import StrIndex, Upper
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.http import require_safe

from inspector.assembly import STRICT

from ..call_forms import PATH_PIECES
from ..models import Call, Capture, Fragment
from .calls import CALLS_PER_PAGE, fragment_permalink
from .paging import page_holding

MAX_TEXT = 200


@require_safe
def find_in_arguments(request: HttpRequest, slug: str) -> HttpResponse:
    capture = Capture.objects.only("id", "slug").filter(slug=slug).first()
    if capture is None:
        raise Http404("no such capture")
    text = request.GET.get("text", "")[:MAX_TEXT]
    if not text.strip():  # nothing to look for
        return _see_other(f"{capture.get_absolute_url()}#calls")
    target = _first_occurrence(capture, text)
    if target is None:  # the page says so beside the form, which keeps the text
        return _see_other(f"{capture.get_absolute_url()}?{urlencode({'find': text})}#calls")
    return _see_other(target)


def _first_occurrence(capture: Capture, text: str) -> str | None:
    """The permalink of the fragment where `text` first appears, the call's
    card when no fragment holds that offset (Gemini path pieces); None
    when no call's arguments hold it."""
    found = (
        Call.objects.filter(assembly__capture=capture, assembly__policy=STRICT)
        .annotate(at=StrIndex(Upper("arguments_text"), Upper(Value(text))))
        .filter(at__gt=0)
        .order_by("position")
        .values_list("pk", "position", "at", "argument_form")
        .first()
    )
    if found is None:
        return None
    pk, position, at, form = found
    last = at - 1 + len(text) - 1  # where the occurrence ends, from 0
    fragment = None
    if form != PATH_PIECES:  # path pieces' offsets are not into the arguments text
        fragment = (
            Fragment.objects.filter(capture=capture, position=position, offset__lte=last)
            .order_by("-offset", "-seq")
            .values_list("seq", "frame")
            .first()
        )
    if fragment is None:
        page = page_holding(position, CALLS_PER_PAGE)
        return f"{capture.get_absolute_url()}?calls={page}#call-{position}"
    seq, frame = fragment
    return fragment_permalink(capture.slug, position, seq, frame)


def _see_other(url: str) -> HttpResponse:
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response
