"""The minimizer's button: `POST /c/<slug>/minimize`.

The minimizer runs while its POST waits, in a worker thread of its own (the
view is async and hands the work to `sync_to_async(thread_sensitive=False)`),
so the one thread daphne runs every sync view on keeps serving pages.  It is
bounded by INSPECTOR_MINIMIZE_SECONDS; reproducers.js shows the time spent
against that budget while the browser waits, then the POST redirects to the
new capture.  A `lens=NAME` field keeps that lens's divergence instead of
the refusal, on ok captures too; that search runs the client library on
every candidate, so it runs in a bounded child process
(`inspector/minimize/bounded.py`), never in the server's.

A `job=TOKEN` field (each Minimize form's hidden field, the capture page's
and every lens form's; reproducers.js puts a fresh one there at each
submit) names the run: while it runs, the minimizer's
latest report is at `GET /c/<slug>/minimize/<job>` (`minimize_status`), JSON
for the script's progress bar, or a page that reloads itself for people
without JavaScript; once ended it gives the new capture's URL or the error.
The POST itself still waits and redirects, so nothing needs the status.
The jobs are kept in this process (`minimize_jobs`): with several server
processes, a status request served by another process than the POST's is
answered 404 "unknown job", as for a job that never was.
"""

from __future__ import annotations

import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.db import connections
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
    JsonResponse,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from inspector.assembly import UnreadableInput
from inspector.lenses import title
from inspector.minimize import NothingToMinimize
from inspector.minimize.bounded import LensSearchFailed
from inspector.minimize.lens import LensChoiceError, check_lens_name

from .. import minimize_jobs
from ..minimizing import minimize_capture, minimize_capture_keeping_lens
from ..models import Capture


def _minimize_in_worker(
    capture: Capture, seconds: float, lens: str | None = None, job: str | None = None
) -> Capture:
    """Runs in a worker thread: the search (keeping the strict refusal, or
    the divergence of `lens`, reporting its progress to `job`), then storing
    its result.  The thread's own database connection is closed when done."""
    progress = minimize_jobs.reporter(job)
    try:
        if lens is None:
            return minimize_capture(capture, seconds=seconds, progress=progress)
        return minimize_capture_keeping_lens(capture, lens, seconds, progress=progress)
    finally:
        connections.close_all()


async def _minimize_as_job(
    capture: Capture, seconds: float, lens: str | None, job: str | None
) -> Capture:
    """`_minimize_in_worker` in its own thread, registered as `job` (when the
    form named one) from its start to its result or error."""
    minimize_jobs.start(job, capture.slug, lens)
    try:
        derived = await sync_to_async(_minimize_in_worker, thread_sensitive=False)(
            capture, seconds, lens, job
        )
    except Exception as error:
        minimize_jobs.fail(job, str(error) or type(error).__name__)
        raise
    minimize_jobs.finish(job, derived.get_absolute_url())
    return derived


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
        derived = await _minimize_as_job(capture, budget, lens, request.POST.get("job"))
    except LensChoiceError as error:
        return _bad_request(str(error))
    except LensSearchFailed as error:
        messages.error(request, f"Can't minimize keeping the {lens} lens: {error}.")
        return _see_other(back)
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


def _wants_html(request: HttpRequest) -> bool:
    """A browser navigating (no JavaScript) asks for HTML; the script asks for JSON."""
    if request.GET.get("format") == "json":
        return False
    return "text/html" in request.headers.get("Accept", "")


@require_GET
def minimize_status(request: HttpRequest, slug: str, job: str) -> HttpResponse:
    """The latest progress of minimize run `job` on capture `slug`: JSON
    (`state` running/done/failed, `progress` as `Progress.to_dict()`, `result`
    the new capture's URL, `error`), or for a browser a page that reloads
    itself every second while the run goes on.  No query: the jobs are kept
    in this process only (see the module docstring); unknown here is a 404."""
    found = minimize_jobs.status(job, slug) if minimize_jobs.valid_job_id(job) else None
    if _wants_html(request):
        response = _status_page(request, slug, found)
    elif found is None:
        response = JsonResponse({"error": "unknown job"}, status=404)
    else:
        response = JsonResponse(found)
    response["Cache-Control"] = "no-store"
    return response


def _status_page(request: HttpRequest, slug: str, found: dict[str, object] | None) -> HttpResponse:
    progress = found["progress"] if found else None
    context = {
        "slug": slug,
        "job": found,
        "lens_title": title(str(found["lens"])) if found and found["lens"] else "",
        "text": minimize_jobs.progress_text(progress),
        "fraction": progress["fraction"] if progress else 0,
    }
    return render(
        request,
        "inspector/minimize_status.html",
        context,
        status=200 if found else 404,
    )
