"""Any capture as a regression test: `/c/<slug>/regression.<kind>` gives
`NAME.sse`, `NAME.expect.json` or both in `NAME.zip`, in the shape of the
conformance cases."""

from __future__ import annotations

import io
import re
import zipfile

from django.http import Http404, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from inspector.assembly import POLICIES, STRICT, UnreadableInput

from ..minimizing import export_files
from ..models import Capture

EXPORT_KINDS = {
    "sse": ("application/octet-stream", ".sse"),
    "expect.json": ("application/json", ".expect.json"),
    "zip": ("application/zip", ".zip"),
}


def export_name(capture: Capture) -> str:
    """A plain file name for the capture's case: its title made plain (letters,
    digits, '_' and '-'), else capture-<slug>."""
    plain = re.sub(r"[^A-Za-z0-9_-]+", "_", capture.title or "").strip("_-")[:80]
    return plain or "capture-" + re.sub(r"[^A-Za-z0-9_-]", "_", capture.slug)


def export_links(capture: Capture) -> dict[str, str]:
    name = export_name(capture)
    return {
        "name": name,
        "sse": reverse("capture-export", args=[capture.slug, "sse"]),
        "expect": reverse("capture-export", args=[capture.slug, "expect.json"]),
        "zip": reverse("capture-export", args=[capture.slug, "zip"]),
    }


@require_safe
def export_view(request, slug, kind):
    """The capture as a regression case (`NAME.sse`, `NAME.expect.json`, or
    both in `NAME.zip`), in the shape of the conformance cases."""
    if kind not in EXPORT_KINDS:
        raise Http404("no such export")
    policy = request.GET.get("policy", STRICT)
    if policy not in POLICIES:
        raise Http404("no such policy")
    try:
        capture = Capture.objects.only(
            "id", "slug", "title", "raw", "stream_format", "outcome", "refusal_code", "derivation"
        ).get(slug=slug)
    except Capture.DoesNotExist:
        raise Http404("no such capture") from None
    if capture.outcome == Capture.Outcome.LIVE:
        return HttpResponse(
            "This capture is still being recorded: export it once it ends.\n",
            status=409,
            content_type="text/plain; charset=utf-8",
        )
    name = export_name(capture)
    try:
        files = export_files(capture, name=name, policy=policy)
    except (UnreadableInput, ValueError) as error:
        return HttpResponse(
            f"Can't export this capture: {error}\n",
            status=409,
            content_type="text/plain; charset=utf-8",
        )
    content_type, suffix = EXPORT_KINDS[kind]
    if kind == "zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for filename, data in files.items():
                archive.writestr(filename, data)
        body = buffer.getvalue()
    else:
        body = files[name + suffix]
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}{suffix}"'
    return response
