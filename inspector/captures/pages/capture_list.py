"""The capture list (`/`): the captures, newest first, paged and filtered by
outcome, refusal code, dialect, source, model, HAR upload, retry chain, and a
search (`q`: tool names, call ids, arguments, refusals, titles, models; `search.py`)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from ..forms import CaptureFilterForm
from ..models import Capture, with_lenient_code

CAPTURES_PER_PAGE = 50
MODELS_LISTED = 200  # distinct models offered in the filter's list


@require_safe
def capture_list(request: HttpRequest) -> HttpResponse:
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
        .distinct()[:MODELS_LISTED]
    )
    context = {
        "filters": filters,
        "page": page,
        "models": models,
        "query": urlencode(kept),
        "filtered": bool(kept),
        "har_upload": filters.cleaned_data.get("har_upload") if valid else "",
        "searched": filters.cleaned_data.get("q") if valid else "",
    }
    return render(request, "inspector/capture_list.html", context, status=200 if valid else 400)
