"""The JSON API under /api/: upload a capture, read its result, list them.

Made for scripts: CSRF-exempt, JSON in every answer (errors are
`{"error": reason}`), and the stored strict result is handed back
byte-for-byte as `manage.py assemble` prints it.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError

from inspector.assembly import AUTO, AUTO_DIALECT, POLICIES, STRICT, UnreadableInput
from inspector.assembly.jsontext import dumps
from inspector.http_json import BadRequest, json_endpoint, json_error, json_response, page_and_size

from . import models
from .forms import ApiUploadForm, CaptureFilterForm, first_error
from .intake import PlannedStream, plan_upload, store_planned_async
from .models import capture_path
from .records import RefusalRecord, StoredRecord
from .uploads import (
    Busy,
    TooLarge,
    check_declared_size,
    declared_size,
    large_upload_slot,
    read_capped,
)

logger = logging.getLogger(__name__)


# -- upload ------------------------------------------------------------------


@json_endpoint("GET", "POST")
async def captures_async(request: HttpRequest) -> HttpResponse:
    """GET: the list; POST: an upload (the route `/api/captures`).  Async, so
    that Django's ASGI handler can cancel an upload whose client went away
    (`intake.store_planned_async` then stops after the step in hand and
    deletes what it stored)."""
    if request.method == "POST":
        return await _upload(request)
    return await sync_to_async(_list)(request)


def captures(request: HttpRequest) -> HttpResponse:
    """`captures_async` for a sync caller (a test, a WSGI server)."""
    return async_to_sync(captures_async)(request)


def _upload_form(request: HttpRequest) -> ApiUploadForm:
    """The upload form filled from the request: the body, or a multipart
    body's field `file`; `format` and `title` from the query string or the
    multipart fields.  Raises TooLarge or BadRequest."""
    check_declared_size(request)
    try:
        if request.content_type != "multipart/form-data":
            return ApiUploadForm(_options(request, {}), body=_body(request))
        files, fields = request.FILES, request.POST
    except RequestDataTooBig:
        raise TooLarge(declared_size(request)) from None
    except (MultiPartParserError, SuspiciousOperation) as error:
        raise BadRequest(f"the multipart body can't be read: {error}") from None
    return ApiUploadForm(_options(request, fields), files)


def _body(request: HttpRequest) -> bytes:
    return read_capped(request.read, declared_size(request))


def _options(request: HttpRequest, fields: Any) -> dict[str, str]:
    """`format` and `dialect` (lower case, auto when not given) and `title`,
    the query string first."""
    keys = ("format", "title", "dialect")
    value = {key: (request.GET.get(key) or fields.get(key) or "").strip() for key in keys}
    value["format"] = value["format"].lower() or AUTO
    value["dialect"] = value["dialect"].lower() or AUTO_DIALECT
    return value


def _refusals(captures: list[models.Capture]) -> dict[int, RefusalRecord | None]:
    """Each capture's strict refusal record, one query."""
    rows = models.Assembly.objects.filter(capture__in=captures, policy=STRICT).only(
        "capture_id", *models.Assembly.REFUSAL_FIELDS
    )
    return {row.capture_id: row.refusal_record() for row in rows}


async def _upload(request: HttpRequest) -> HttpResponse:
    try:
        plan, size = await sync_to_async(_planned_upload, thread_sensitive=False)(request)
        with large_upload_slot(size):
            stored = await store_planned_async(plan)
    except TooLarge as error:
        raise BadRequest(str(error), 413) from None
    except UnreadableInput as error:
        raise BadRequest(str(error)) from None
    except Busy as error:
        response = json_error(str(error), 503)
        response["Retry-After"] = str(error.retry_after)
        return response
    except BadRequest:
        raise
    except Exception:
        # Nothing was kept (intake deletes what it stored); say so in JSON, not a page.
        logger.exception("storing an upload failed")
        return json_error("storing the upload failed; nothing was stored", 500)
    return await sync_to_async(_stored_answer)(request, stored)


def _planned_upload(request: HttpRequest) -> tuple[list[PlannedStream], int]:
    """The upload's form read and checked, and its captures planned (no
    database; a thread of its own, as reading a HAR takes a while); the
    plan and the upload's size."""
    form = _upload_form(request)
    if not form.is_valid():
        raise BadRequest(first_error(form), 413 if form.too_large() else 400)
    data, name = form.payload()
    plan = plan_upload(
        data,
        name=name,
        fmt=form.cleaned_data["format"],
        title=form.cleaned_data["title"],
        dialect=form.cleaned_data["dialect"] or AUTO_DIALECT,
    )
    return plan, len(data)


def _stored_answer(request: HttpRequest, stored: list[models.Capture]) -> HttpResponse:
    refusals = _refusals(stored)
    entries = [
        StoredRecord(
            slug=capture.slug,
            url=request.build_absolute_uri(capture_path(capture.slug)),
            outcome=capture.outcome,
            refusal=refusals.get(capture.pk),
        )
        for capture in stored
    ]
    body = dict(entries[0])
    if len(entries) > 1:
        body["captures"] = entries
    return json_response(body, 201)


# -- reading -----------------------------------------------------------------


@json_endpoint("GET")
def capture_detail(request: HttpRequest, slug: str, policy: str | None = None) -> HttpResponse:
    """The capture's metadata and, under "result", the stored result JSON of
    one policy (strict unless `?policy=lenient` or `/lenient`)."""
    policy = policy or request.GET.get("policy") or STRICT
    if policy not in POLICIES:
        raise BadRequest(f"unknown policy {policy!r}: use {' or '.join(POLICIES)}")
    capture = models.Capture.objects.only(*models.Capture.SUMMARY_FIELDS).filter(slug=slug).first()
    if capture is None:
        return json_error(f"no capture {slug!r}", 404)
    result = models.Assembly.document_of(capture.pk, policy)
    head = dumps({**capture.summary(), "policy": policy})
    # Splice the stored text in as it is: the same bytes `assemble` prints.
    # A capture still being recorded has no assembly yet: null.
    body = head[:-1] + b',"result":' + (result.encode() if result else b"null") + b"}"
    return HttpResponse(body, content_type="application/json")


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
    """Captures, newest first, paged; filtered as the list page filters
    (`CaptureFilterForm`: outcome, code, dialect, source, model, har_upload,
    retry_chain, and the search `q`)."""
    filters = CaptureFilterForm(request.GET)
    if not filters.is_valid():
        raise BadRequest(first_error(filters))
    rows = filters.filter(models.Capture.objects.only(*models.Capture.SUMMARY_FIELDS))
    page, per_page = page_and_size(request)
    count = rows.count()
    found = _page_rows(rows, page, per_page, count)
    return json_response(
        {
            "count": count,
            "page": page,
            "pages": max(1, math.ceil(count / per_page)),
            "per_page": per_page,
            "results": [capture.summary() for capture in found],
        }
    )
