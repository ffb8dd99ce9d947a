"""The minimizer's button: `POST /c/<slug>/minimize`.

The minimizer runs while its POST waits, in a worker thread of its own (the
view is async and hands the work to `sync_to_async(thread_sensitive=False)`),
so the one thread daphne runs every sync view on keeps serving pages.  It is
bounded by INSPECTOR_MINIMIZE_SECONDS; reproducers.js shows the time spent
against that budget while the browser waits, then the POST redirects to the
new capture.  A `lens=NAME` field keeps that lens's divergence instead of
the refusal, on ok captures too.
"""

from __future__ import annotations

import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.db import connections
from django.http import Http404, HttpResponseBadRequest, HttpResponseRedirect
from django.views.decorators.http import require_POST

from inspector.assembly import UnreadableInput
from inspector.minimize import NothingToMinimize
from inspector.minimize.lens import LensChoiceError, check_lens_name

from ..minimizing import capture_lens_target, minimize_capture
from ..models import Capture


def _minimize_in_worker(capture: Capture, seconds: float, lens: str | None = None) -> Capture:
    """Runs in a worker thread: the search (keeping the strict refusal, or
    the divergence of `lens`), then storing its result.  The thread's own
    database connection is closed when done."""
    try:
        if lens is None:
            return minimize_capture(capture, seconds=seconds)
        target = capture_lens_target(capture, lens)
        return minimize_capture(capture, seconds=seconds, target=target, keeps=target.description)
    finally:
        connections.close_all()


def _capture_to_minimize(slug: str) -> Capture:
    try:
        return Capture.objects.only(
            "id",
            "slug",
            "title",
            "source",
            "raw",
            "stream_format",
            "dialect",
            "dialect_basis",
            "outcome",
            "refusal_code",
            "request_json",
        ).get(slug=slug)
    except Capture.DoesNotExist:
        raise Http404("no such capture") from None


def _bad_request(message: str) -> HttpResponseBadRequest:
    return HttpResponseBadRequest(
        f"Can't minimize: {message}.\n", content_type="text/plain; charset=utf-8"
    )


def _not_minimizable(capture: Capture, lens: str | None) -> str:
    """Why `capture` can't be minimized at all ("" when it can): one still
    recorded never can; an ok one only for a lens's divergence."""
    if capture.outcome == Capture.Outcome.LIVE:
        return "it is still being recorded"
    if capture.outcome != Capture.Outcome.REFUSED and lens is None:
        return "it is not refused (outcome ok under the strict policy)"
    return ""


def _see_other(url: str) -> HttpResponseRedirect:
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


@require_POST
async def minimize_view(request, slug):
    """Minimize a refused capture (bounded by INSPECTOR_MINIMIZE_SECONDS),
    store the result as a new capture and go there; anything that can't be
    minimized goes back to the capture page with a message saying why.

    An optional `lens` field keeps that lens's divergence from strict instead
    of the refusal, on refused and ok captures alike; an unknown lens, or one
    that does not diverge here, is a 400 (the form only offers lenses that do).
    """
    lens = request.POST.get("lens") or None
    if lens is not None:
        try:
            check_lens_name(lens)
        except LensChoiceError as error:
            return _bad_request(str(error))
    capture = await sync_to_async(_capture_to_minimize)(slug)
    back = capture.get_absolute_url()
    why = _not_minimizable(capture, lens)
    if why:
        messages.error(request, f"Nothing to minimize: {why}.")
        return _see_other(back)
    budget = float(settings.INSPECTOR_MINIMIZE_SECONDS)
    started = time.monotonic()
    try:
        derived = await sync_to_async(_minimize_in_worker, thread_sensitive=False)(
            capture, budget, lens
        )
    except LensChoiceError as error:
        return _bad_request(str(error))
    except NothingToMinimize as error:
        messages.error(request, f"Nothing to minimize: {error}.")
        return _see_other(back)
    except UnreadableInput as error:
        messages.error(request, f"Can't minimize this capture: the stream can't be read: {error}.")
        return _see_other(back)
    elapsed = time.monotonic() - started
    note = f"Minimized in {elapsed:.1f} s (budget {budget:g} s)."
    if elapsed >= budget:
        note += " The time ran out: this stream still fails the same way but may not be minimal."
    messages.success(request, note)
    return _see_other(derived.get_absolute_url())
