"""The upload form (`/upload/`): one stream, JSON Lines or HAR file, or pasted
text, validated by the same form as the API's uploads (`captures/forms.py`)."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from inspector.assembly import AUTO_DIALECT, UnreadableInput

from ..forms import UploadForm
from ..intake import PlannedStream, plan_upload, store_planned_async
from ..uploads import Busy, TooLarge, declared_size, large_upload_slot

log = logging.getLogger(__name__)


@require_http_methods(["GET", "POST"])
async def upload(request: HttpRequest) -> HttpResponse:
    """The form; posted, the stored capture's page (the list of the HAR
    upload's captures when the input held several streams), or the form again
    with why not.  Async, as the API's upload is: Django's ASGI handler
    cancels an async view whose client went away, and the upload then stops
    after the step in hand and deletes what it stored
    (`intake.store_planned_async`)."""
    if request.method != "POST":
        return await sync_to_async(render)(request, "inspector/upload.html", {"form": UploadForm()})
    planned = await sync_to_async(_planned, thread_sensitive=False)(request)
    if isinstance(planned, HttpResponse):
        return planned
    form, plan, size = planned
    try:
        with large_upload_slot(size):
            captures = await store_planned_async(plan)
    except Exception as error:
        return await sync_to_async(_not_stored)(request, form, error)
    if len(captures) == 1:
        return redirect(captures[0])
    return redirect(
        reverse("capture-list") + "?" + urlencode({"har_upload": captures[0].har_upload})
    )


def _planned(request: HttpRequest) -> HttpResponse | tuple[UploadForm, list[PlannedStream], int]:
    """The posted form read and its captures planned (nothing stored yet):
    (the form, the plan, the upload's size), or the form again with why not."""
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
        plan = plan_upload(
            data,
            name=name,
            fmt=form.cleaned_data["format"],
            title=form.cleaned_data["title"],
            dialect=form.cleaned_data["dialect"] or AUTO_DIALECT,
        )
    except (TooLarge, UnreadableInput) as error:
        return _not_stored(request, form, error)
    return form, plan, len(data)


def _not_stored(request: HttpRequest, form: UploadForm, error: Exception) -> HttpResponse:
    """The form again, saying why the upload was not stored (nothing of it was)."""
    if isinstance(error, Busy):  # as the API answers: 503, try again later
        form.add_error(None, _sentence(str(error)))
        response = render(request, "inspector/upload.html", {"form": form}, status=503)
        response["Retry-After"] = str(error.retry_after)
        return response
    if isinstance(error, TooLarge):
        form.add_error(None, f"Can't read this input: {error}")
        return _upload_refused(request, form, too_large=True)
    if isinstance(error, UnreadableInput):
        form.add_error(None, f"Can't read this input: {in_form_words(str(error))}")
        return _upload_refused(request, form)
    if isinstance(error, (ValueError, DatabaseError)):  # e.g. text the database can't hold
        log.warning("upload could not be stored: %s", error)
        form.add_error(None, f"Can't store this input: {error}")
        return _upload_refused(request, form)
    raise error


def _upload_refused(
    request: HttpRequest, form: UploadForm, *, too_large: bool = False
) -> HttpResponse:
    """The form again with its errors: 413 when the upload was too large (as
    the API answers), else 400."""
    status = 413 if too_large else 400
    return render(request, "inspector/upload.html", {"form": form}, status=status)


# The reader's advice names the command line's choices; the page has a Format field.
_CHOOSE_FORMAT = re.compile(r"choose (?:it|the format) \(sse, jsonl, json-array or har\)")


def in_form_words(message: str) -> str:
    """An unreadable input's reason as the upload form says it: its fields, not `--format`."""
    return _CHOOSE_FORMAT.sub("choose it in the Format field (SSE, JSON Lines or HAR)", message)


def _sentence(text: str) -> str:
    """A message as the page says it: capitalised, with a full stop."""
    return text[:1].upper() + text[1:] + "."
