"""The JSON API under /api/: upload a capture, read its result, list them.

Made for scripts: CSRF-exempt, JSON in every answer (errors are
`{"error": reason}`), and the stored strict result is handed back
byte-for-byte as `manage.py assemble` prints it.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError

from inspector.assembly import AUTO, FORMATS, POLICIES, REFUSAL_CODES, STRICT, UnreadableInput
from inspector.assembly.jsontext import dumps
from inspector.http_json import BadRequest, json_endpoint, json_error, json_response
from inspector.lenses.compare import all_divergences
from inspector.lenses.matrix import capture_lenses

from . import models
from .intake import TooLarge, max_upload_bytes, store_upload
from .models import capture_path

logger = logging.getLogger(__name__)

# Room for the multipart boundaries and small form fields around the file.
MULTIPART_SLACK = 64 * 1024
PER_PAGE = 50
MAX_PER_PAGE = 200

# The columns a list or detail answer reads: never `raw`.
META_FIELDS = (
    "id",
    "slug",
    "title",
    "source",
    "input_format",
    "stream_format",
    "model",
    "provider",
    "created",
    "byte_size",
    "frame_count",
    "outcome",
    "refusal_code",
    "lenient_outcome",
    "group",
    "har_entry",
    "started_at",
    "http_status",
    "interrupted",
)


# -- upload ------------------------------------------------------------------


@json_endpoint("GET", "POST")
def captures(request: HttpRequest) -> HttpResponse:
    """GET: the list; POST: an upload."""
    if request.method == "POST":
        return _upload(request)
    return _list(request)


def _too_large(size: int | str, limit: int) -> BadRequest:
    return BadRequest(f"the upload is {size} bytes; the limit is {limit}", 413)


def _content_length(request: HttpRequest) -> int | None:
    try:
        value = int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
    return value if value >= 0 else None


def _read_upload(request: HttpRequest) -> tuple[bytes, str | None, dict[str, str]]:
    """(the bytes, the file name if any, the form fields); raises BadRequest."""
    limit = max_upload_bytes()
    length = _content_length(request)
    multipart = request.content_type == "multipart/form-data"
    if length is not None and length > limit + (MULTIPART_SLACK if multipart else 0):
        raise _too_large(length, limit)
    if not multipart:
        try:
            data = request.read(limit + 1)
        except RequestDataTooBig:
            raise _too_large("over" if length is None else length, limit) from None
        if len(data) > limit:
            raise _too_large(f"over {limit}", limit)
        return data, None, {}
    try:
        files, form = request.FILES, request.POST
    except RequestDataTooBig:
        raise _too_large("over" if length is None else length, limit) from None
    except (MultiPartParserError, SuspiciousOperation) as error:
        raise BadRequest(f"the multipart body can't be read: {error}") from None
    upload = files.get("file")
    if upload is None:
        raise BadRequest("no file: send the multipart field 'file', or the stream as the body")
    if upload.size is not None and upload.size > limit:
        raise _too_large(upload.size, limit)
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise _too_large(f"over {limit}", limit)
    return data, upload.name or None, {key: form.get(key, "") for key in ("format", "title")}


def _param(request: HttpRequest, form: dict[str, str], key: str) -> str:
    return (request.GET.get(key) or form.get(key) or "").strip()


def _refusals(captures: list[models.Capture]) -> dict[int, dict[str, Any] | None]:
    """Each capture's strict refusal object, as the result writes it."""
    rows = models.Assembly.objects.filter(capture__in=captures, policy=STRICT).only(
        "capture_id",
        "refusal_code",
        "refusal_message",
        "refusal_frame",
        "refusal_call",
        "refusal_choice",
        "refusal_retryable",
    )
    out: dict[int, dict[str, Any] | None] = {}
    for row in rows:
        out[row.capture_id] = (
            {
                "code": row.refusal_code,
                "message": row.refusal_message,
                "frame": row.refusal_frame,
                "call": row.refusal_call,
                "choice": row.refusal_choice,
                "retryable": row.refusal_retryable,
            }
            if row.refusal_code
            else None
        )
    return out


def _upload(request: HttpRequest) -> HttpResponse:
    data, name, form = _read_upload(request)
    if not data:
        raise BadRequest("the upload is empty: send the stream as the body or as the field 'file'")
    fmt = _param(request, form, "format").lower() or AUTO
    if fmt not in (AUTO, *FORMATS):
        raise BadRequest(f"unknown format {fmt!r}: use {', '.join((AUTO, *FORMATS))}")
    title = _param(request, form, "title")
    try:
        stored = store_upload(data, name=name, fmt=fmt, title=title)
    except TooLarge as error:
        raise BadRequest(str(error), 413) from None
    except UnreadableInput as error:
        raise BadRequest(str(error)) from None
    except Exception:
        # Nothing was stored (one transaction); say so in JSON, not a page.
        logger.exception("storing an upload failed")
        return json_error("storing the upload failed; nothing was stored", 500)
    refusals = _refusals(stored)
    entries = [
        {
            "slug": capture.slug,
            "url": request.build_absolute_uri(capture_path(capture.slug)),
            "outcome": capture.outcome,
            "refusal": refusals.get(capture.pk),
        }
        for capture in stored
    ]
    body = dict(entries[0])
    if len(entries) > 1:
        body["captures"] = entries
    return json_response(body, 201)


# -- reading -----------------------------------------------------------------


def _meta(capture: models.Capture) -> dict[str, Any]:
    return {
        "slug": capture.slug,
        "title": capture.title,
        "source": capture.source,
        "input_format": capture.input_format,
        "stream_format": capture.stream_format,
        "model": capture.model,
        "provider": capture.provider,
        "created": capture.created.isoformat(),
        "byte_size": capture.byte_size,
        "frame_count": capture.frame_count,
        "outcome": capture.outcome,
        "refusal_code": capture.refusal_code,
        "lenient_outcome": capture.lenient_outcome,
        "group": capture.group,
        "har_entry": capture.har_entry,
        "started_at": capture.started_at.isoformat() if capture.started_at else None,
        "http_status": capture.http_status,
        "interrupted": capture.interrupted,
    }


@json_endpoint("GET")
def capture_detail(request: HttpRequest, slug: str, policy: str | None = None) -> HttpResponse:
    """The capture's metadata and, under "result", the stored result JSON of
    one policy (strict unless `?policy=lenient` or `/lenient`)."""
    policy = policy or request.GET.get("policy") or STRICT
    if policy not in POLICIES:
        raise BadRequest(f"unknown policy {policy!r}: use {' or '.join(POLICIES)}")
    capture = models.Capture.objects.only(*META_FIELDS).filter(slug=slug).first()
    if capture is None:
        return json_error(f"no capture {slug!r}", 404)
    result = (
        models.Assembly.objects.filter(capture=capture, policy=policy)
        .values_list("result_json", flat=True)
        .first()
    )
    meta = _meta(capture)
    meta["policy"] = policy
    head = dumps(meta)
    # Splice the stored text in as it is: the same bytes `assemble` prints.
    # A capture still being recorded has no assembly yet: null.
    body = head[:-1] + b',"result":' + (result.encode() if result else b"null") + b"}"
    return HttpResponse(body, content_type="application/json")


@json_endpoint("GET")
def capture_lenses_view(request: HttpRequest, slug: str) -> HttpResponse:
    """What each client library would have assembled from the capture's
    stored stream, and every way each parts from the strict result; computed
    afresh from `raw` (the lenses are not stored)."""
    capture = (
        models.Capture.objects.only("slug", "raw", "stream_format", "request_json")
        .filter(slug=slug)
        .first()
    )
    if capture is None:
        return json_error(f"no capture {slug!r}", 404)
    try:
        strict, results = capture_lenses(capture)
    except UnreadableInput as error:
        raise BadRequest(f"the stored stream can't be read: {error}", 409) from None
    return json_response(
        {
            "slug": capture.slug,
            "strict": {
                "outcome": strict.outcome,
                "refusal": strict.refusal.to_dict() if strict.refusal else None,
            },
            "lenses": {name: result.to_dict() for name, result in results.items()},
            "divergences": all_divergences(results, strict),
        }
    )


def _positive_int(request: HttpRequest, key: str, default: int) -> int:
    text = request.GET.get(key)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{key} must be a whole number, not {text!r}") from None
    if value < 1:
        raise BadRequest(f"{key} must be 1 or more")
    return value


def _page_rows(
    rows: QuerySet[models.Capture], page: int, per_page: int, count: int
) -> list[models.Capture]:
    """The captures on one page; none past the last page.

    A page past the last is answered with no results (not clamped, so a
    script paging until the results run out stops) and without a query: an
    OFFSET as large as `?page=99999999999999999999` makes would overflow
    the database's integers.
    """
    start = (page - 1) * per_page
    if start >= count:
        return []
    return list(rows.order_by("-created", "-id")[start : start + per_page])


def _list(request: HttpRequest) -> HttpResponse:
    """Captures, newest first, paged; filters outcome, code, model, group, q."""
    rows = models.Capture.objects.only(*META_FIELDS)
    outcome = request.GET.get("outcome")
    if outcome:
        if outcome not in models.Capture.Outcome.values:
            choices = ", ".join(models.Capture.Outcome.values)
            raise BadRequest(f"unknown outcome {outcome!r}: use {choices}")
        rows = rows.filter(outcome=outcome)
    code = request.GET.get("code")
    if code:
        if code not in REFUSAL_CODES:
            raise BadRequest(f"unknown refusal code {code!r}: use {', '.join(REFUSAL_CODES)}")
        rows = rows.filter(refusal_code=code)
    for key in ("model", "group"):
        value = request.GET.get(key)
        if value:
            rows = rows.filter(**{key: value})
    query = request.GET.get("q")
    if query:
        rows = rows.filter(title__icontains=query)
    page = _positive_int(request, "page", 1)
    per_page = min(_positive_int(request, "per_page", PER_PAGE), MAX_PER_PAGE)
    count = rows.count()
    found = _page_rows(rows, page, per_page, count)
    return json_response(
        {
            "count": count,
            "page": page,
            "pages": max(1, math.ceil(count / per_page)),
            "per_page": per_page,
            "results": [_meta(capture) for capture in found],
        }
    )
