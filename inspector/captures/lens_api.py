"""GET /api/captures/<slug>/lenses: a summary of every lens's stored run of
the capture, with its records (calls, divergences) one page at a time.

    {"slug", "status": "done" | "computing",
     "strict": {"outcome", "refusal"},
     "page", "per_page", "pages",
     "lenses": {name: {"status", "library", "version", "available", "outcome",
                       "error", "detail", "call_count", "divergence_count",
                       "divergence_kinds": {kind: n}, "frames", "seconds",
                       "calls_from", "gates_on_parse", "notes",
                       "calls": [this page of its calls]}},
     "divergence_count", "divergences": [this page of every lens's, lens by lens]}

Pages (`?page=`, `?per_page=` up to 200, 50 by default) count records:
page N holds calls N of each lens and divergences N of the whole list.  The
answer is 202 while a lens is still computing (the summary says which);
each request while it computes keeps it going, and a client that
disconnects while its request waits lets it stop (`lens_cache.py`).
A 1.4M-frame capture once answered 206 MB here; now the answer is bounded
by `per_page`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse

from inspector.assembly import STRICT
from inspector.http_json import BadRequest, json_endpoint, json_error, json_response, page_and_size

from . import models
from .lens_cache import any_pending, lens_runs_async
from .lens_runs import LensRun


def _strict(capture: models.Capture) -> dict[str, Any]:
    row = (
        models.Assembly.objects.filter(capture=capture, policy=STRICT)
        .only("capture_id", "outcome", *models.Assembly.REFUSAL_FIELDS)
        .first()
    )
    if row is None:
        return {"outcome": None, "refusal": None}
    return {"outcome": row.outcome, "refusal": row.refusal_record()}


def _lens_summary(run: LensRun, result: dict[str, Any], kinds: Counter) -> dict[str, Any]:
    outcome = None
    if run.status == LensRun.Status.DONE:
        outcome = "unavailable" if not run.available else ("error" if run.error else "ok")
    return {
        "status": run.status,
        "library": run.library,
        "version": run.version,
        "available": run.available if run.status == LensRun.Status.DONE else False,
        "outcome": outcome,
        "error": run.error or None,
        "detail": run.detail or None,
        "call_count": run.call_count,
        "divergence_count": run.divergence_count,
        "divergence_kinds": dict(kinds),
        "frames": run.frames,
        "seconds": run.seconds,
        "calls_from": result.get("calls_from"),
        "gates_on_parse": bool(result.get("gates_on_parse")),
        "notes": result.get("notes") or [],
    }


@json_endpoint("GET")
async def capture_lenses_view(request: HttpRequest, slug: str) -> HttpResponse:
    """Every lens's stored run of the capture, summarized, its records paged;
    the first request starts the runs (202 while they compute), and every
    request while they compute keeps them going (`lens_cache.py`).  Async,
    so that Django cancels it when its client disconnects: a client gone
    while this waits for the runs it started leaves them unwanted."""
    capture = await sync_to_async(_capture)(slug)
    if capture is None:
        return json_error(f"no capture {slug!r}", 404)
    if capture.outcome == models.Capture.Outcome.LIVE:
        raise BadRequest(
            "the capture is still being recorded: the lenses read it once it ends", 409
        )
    page, per_page = page_and_size(request)
    runs = await lens_runs_async(capture)
    body = await sync_to_async(_answer)(capture, runs, page, per_page)
    return json_response(body, 202 if body["status"] == "computing" else 200)


def _capture(slug: str) -> models.Capture | None:
    return models.Capture.objects.only("slug", "outcome", "frame_count").filter(slug=slug).first()


def _answer(
    capture: models.Capture, runs: dict[str, LensRun], page: int, per_page: int
) -> dict[str, Any]:
    """The answer's body: the summaries, and page `page` of the records."""
    start, stop = (page - 1) * per_page, page * per_page
    lenses, divergences, longest = {}, [], 0
    for name, run in runs.items():
        result = orjson.loads(run.result_json) if run.result_json else {}
        found = orjson.loads(run.divergences_json) if run.divergences_json else []
        calls = result.get("calls") or []
        longest = max(longest, len(calls), len(divergences) + len(found))
        lenses[name] = _lens_summary(run, result, Counter(entry["kind"] for entry in found))
        lenses[name]["calls"] = calls[start:stop]
        divergences.extend(found)
    return {
        "slug": capture.slug,
        "status": "computing" if any_pending(runs) else "done",
        "strict": _strict(capture),
        "page": page,
        "per_page": per_page,
        "pages": max(1, math.ceil(longest / per_page)),
        "lenses": lenses,
        "divergence_count": len(divergences),
        "divergences": divergences[start:stop],
    }
