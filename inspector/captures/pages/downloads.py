"""The capture's two downloads: the stream exactly as received
(`/c/<slug>/raw`) and one policy's result document (`/c/<slug>/result.json`).
The only pages that read `Capture.raw` or `Assembly.result_json`."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from inspector.assembly import POLICIES, STRICT

from ..models import Assembly, Capture

# The raw stream's file name ending, by how it reads.
RAW_EXTENSIONS = {"sse": "sse", "jsonl": "jsonl", "json-array": "json"}


@require_safe
def download_raw(request: HttpRequest, slug: str) -> HttpResponse:
    """The stream exactly as received (a HAR's stream: its event-stream body)."""
    capture = _download_capture(slug, "raw")
    extension = RAW_EXTENSIONS.get(capture.stream_format, "sse")
    response = HttpResponse(bytes(capture.raw), content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{capture.slug}.{extension}"'
    return response


@require_safe
def download_result(request: HttpRequest, slug: str) -> HttpResponse:
    """The result document of one policy (strict unless ?policy=lenient)."""
    policy = request.GET.get("policy", STRICT)
    if policy not in POLICIES:
        raise Http404("no such policy")
    capture = _download_capture(slug)
    document = Assembly.document_of(capture.pk, policy)
    if document is None:
        raise Http404("no result for this policy")
    response = HttpResponse(document, content_type="application/json")
    name = f"{capture.slug}.{policy}.json"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# The raw stream's file name ending, by how it reads.
RAW_EXTENSIONS = {"sse": "sse", "jsonl": "jsonl", "json-array": "json"}


def _download_capture(slug: str, *extra: str) -> Capture:
    try:
        return Capture.objects.only("id", "slug", "stream_format", *extra).get(slug=slug)
    except Capture.DoesNotExist:
        raise Http404("no such capture") from None
