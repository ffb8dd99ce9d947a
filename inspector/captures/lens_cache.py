"""Lens results computed once per capture and lens, stored (`LensRun`) and
served from the database; recomputed only when a lens's version changes.

    runs = lens_runs(capture)   # {lens: LensRun}, starting what is missing or stale
    if any_pending(runs): ...   # show "computing…"; the runs go on in the background
    runs = await lens_runs_async(capture)   # the same for an async view

The first request for a capture's lenses claims a row per lens (a
conditional UPDATE, so two requests or two processes never run the same
lens twice) and hands the runs to this process's worker pool: a small
`ThreadPoolExecutor` (`INSPECTOR_LENS_WORKERS` threads).  A thread, not an
asyncio task: the work is a blocking wait on a child process and a few
queries through Django's sync ORM, and the pool works the same under daphne
(ASGI) and the WSGI test server.  Each run is a forked process bounded in
time and memory (`inspector/lenses/runner.py`).  The request then waits at
most `INSPECTOR_LENS_WAIT_SECONDS` for them, so a small capture's matrix
shows at once and a large one never holds a request thread longer.

A run goes on only while someone waits for it.  Whoever waits asks again:
the lens page reloads itself every 3 s while it says "computing…", the
capture page's script asks for the matrix every second, an API client
polls its 202s.  Every such request renews `requested` on the capture's
pending rows (one UPDATE, only while some are pending); the worker asks the
row every second or so (`runner.bounded_run(wanted=…)`), and a run whose
`requested` is older than `INSPECTOR_LENS_ABANDON_SECONDS` is killed (its
process, then its pool slot) and stored as `abandoned`: no result, and the
next request claims it again.  A queued run nobody waits for any more is
stored so without forking.  The interest is a column, not an in-process
registry, because the request that polls may be served by another server
process than the one running the run (the claim is shared the same way).
An async view whose client disconnects while it waits for the runs it
started takes its mark back (`drop_interest`), so they stop at once unless
someone else asked since.  `INSPECTOR_LENS_ABANDON_SECONDS=0` lets every
run go to its limits, its result stored for the next visitor.

A run whose process died with its server (a row left pending past twice the
time limit) is claimed again.

A capture with more frames than `INSPECTOR_LENS_MAX_FRAMES` is never run:
its row says `too_large`.  Inside an open transaction (ATOMIC_REQUESTS, a
test's transaction) a worker thread could not see the capture's
uncommitted rows, so there the runs happen in the caller's thread; each is
still a bounded child process, as everywhere: no client library ever runs in
the server's process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from inspector.assembly import STRICT
from inspector.lenses import LENSES, LensResult, lenses_for
from inspector.lenses.matrix import matrix, request_tools
from inspector.lenses.runner import bounded_run, run_one

from .lens_runs import LensRun
from .models import Assembly, Capture

logger = logging.getLogger(__name__)
Status = LensRun.Status

_pool: ThreadPoolExecutor | None = None


def _workers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(
            max_workers=max(1, settings.INSPECTOR_LENS_WORKERS), thread_name_prefix="lens"
        )
    return _pool


def any_pending(runs: dict[str, LensRun]) -> bool:
    return any(run.status == Status.PENDING for run in runs.values())


def stored_runs(capture: Capture) -> dict[str, LensRun]:
    """The capture's runs by lens, in the matrix's order."""
    rows = {run.lens: run for run in LensRun.objects.filter(capture=capture)}
    return {name: rows[name] for name in lenses_for(capture.dialect) if name in rows}


@dataclass
class Asked:
    """One request's ask for a capture's runs: its time (the mark it left on
    the pending rows) and the runs it handed to the pool."""

    capture: Capture
    at: datetime
    futures: list[Future[Any]] = field(default_factory=list)


def lens_runs(capture: Capture) -> dict[str, LensRun]:
    """Every lens's run of the capture: stored ones as they are, missing,
    stale or abandoned ones started (and waited for, at most
    INSPECTOR_LENS_WAIT_SECONDS); the pending ones marked as still wanted."""
    asked = ask(capture)
    if asked.futures:
        wait(asked.futures, timeout=settings.INSPECTOR_LENS_WAIT_SECONDS)
    return stored_runs(capture)


async def lens_runs_async(capture: Capture) -> dict[str, LensRun]:
    """`lens_runs` for an async view: if the view is cancelled while it
    waits (Django cancels it when its client disconnects), its mark on the
    runs is taken back first."""
    asked = await sync_to_async(ask)(capture)
    if asked.futures:
        waiting = [asyncio.wrap_future(future) for future in asked.futures]
        try:
            await asyncio.wait(waiting, timeout=settings.INSPECTOR_LENS_WAIT_SECONDS)
        except asyncio.CancelledError:
            await sync_to_async(drop_interest)(asked)
            raise
    return await sync_to_async(stored_runs)(capture)


def ask(capture: Capture) -> Asked:
    """Mark the capture's pending runs as wanted now, and claim and start the
    missing, stale or abandoned ones (in the pool, or here inside a
    transaction or with no workers)."""
    asked = Asked(capture, timezone.now())
    rows = stored_runs(capture)
    if any_pending(rows):
        LensRun.objects.filter(capture=capture, status=Status.PENDING).update(requested=asked.at)
    claimed = _claim_stale(capture, rows, asked.at)
    if settings.INSPECTOR_LENS_WORKERS <= 0 or connection.in_atomic_block:
        for run in claimed:
            compute(run)
    else:
        asked.futures = [_workers().submit(_in_worker, run) for run in claimed]
    return asked


def drop_interest(asked: Asked) -> None:
    """The request gone: its mark on the pending runs made old, unless a
    later request marked them since (then `requested` is no longer its)."""
    old = asked.at - timedelta(seconds=settings.INSPECTOR_LENS_ABANDON_SECONDS + 1)
    marked = LensRun.objects.filter(capture=asked.capture, status=Status.PENDING)
    marked.filter(requested=asked.at).update(requested=old)


def _still_wanted(run: LensRun) -> bool:
    """Whether the run is still ours and someone asked for it in the last
    INSPECTOR_LENS_ABANDON_SECONDS (asked by the worker while it runs)."""
    since = timezone.now() - timedelta(seconds=settings.INSPECTOR_LENS_ABANDON_SECONDS)
    return LensRun.objects.filter(
        pk=run.pk, started=run.started, status=Status.PENDING, requested__gte=since
    ).exists()


def _orphaned(run: LensRun, now: Any) -> bool:
    """Pending for longer than any run may last: its worker is gone."""
    limit = timedelta(seconds=2 * settings.INSPECTOR_LENS_SECONDS + 30)
    return run.status == Status.PENDING and (run.started is None or now - run.started > limit)


def _to_run_again(run: LensRun, version: str, now: Any) -> bool:
    """Of another version, abandoned, or orphaned."""
    return run.version != version or run.status == Status.ABANDONED or _orphaned(run, now)


def _claim_stale(capture: Capture, rows: dict[str, LensRun], now: Any) -> list[LensRun]:
    """Claim the runs to (re)compute: missing, of another version, abandoned
    or orphaned."""
    claimed = []
    for name in lenses_for(capture.dialect):
        lens = LENSES[name]
        version = lens.current_version()
        run = rows.get(name)
        if run is None:
            run, created = LensRun.objects.get_or_create(
                capture=capture,
                lens=name,
                defaults={
                    "version": version,
                    "library": lens.library,
                    "requested": now,
                    "started": now,
                },
            )
            if created:
                claimed.append(run)
                continue
        if _to_run_again(run, version, now) and _claim(run, version, now):
            claimed.append(run)
    return claimed


def _claim(run: LensRun, version: str, now: Any) -> bool:
    """Mark the run pending for us; False when another request got there first."""
    won = LensRun.objects.filter(
        pk=run.pk, version=run.version, status=run.status, started=run.started
    ).update(version=version, status=Status.PENDING, requested=now, started=now, finished=None)
    if won:
        run.version, run.status, run.started = version, Status.PENDING, now
    return bool(won)


def _in_worker(run: LensRun) -> None:
    """A worker thread's run: its own database connection, closed after;
    stopped once nobody waits for it (unless INSPECTOR_LENS_ABANDON_SECONDS
    is 0)."""
    close_old_connections()
    wanted = partial(_still_wanted, run) if settings.INSPECTOR_LENS_ABANDON_SECONDS > 0 else None
    try:
        compute(run, wanted=wanted)
    except Exception as error:
        logger.exception("lens run %s failed", run.pk)
        _store(run, {"status": Status.FAILED, "detail": f"{type(error).__name__}: {error}"})
    finally:
        connection.close()


def compute(run: LensRun, *, wanted: Callable[[], bool] | None = None) -> None:
    """Run one claimed lens on its capture and store the answer; a run that
    `wanted()` says nobody waits for any more is stopped, stored `abandoned`."""
    capture = Capture.objects.only("raw", "stream_format", "request_json", "frame_count").get(
        pk=run.capture_id
    )
    limit = settings.INSPECTOR_LENS_MAX_FRAMES
    if capture.frame_count > limit:
        answer: dict[str, Any] = {
            "status": Status.TOO_LARGE,
            "frames": capture.frame_count,
            "detail": f"{capture.frame_count} frames: this lens reads at most {limit} "
            "(INSPECTOR_LENS_MAX_FRAMES)",
        }
    elif wanted is not None and not wanted():
        answer = {"status": Status.ABANDONED}  # still queued when its last visitor left
    else:
        answer = _run(run.lens, capture, wanted)
    if answer["status"] == Status.ABANDONED:
        answer["detail"] = _nobody_waiting(run, answer.get("pid"))
    _store(run, answer)


def _nobody_waiting(run: LensRun, pid: int | None) -> str:
    """Why an abandoned run stopped, logged (with its process) and stored."""
    abandon = settings.INSPECTOR_LENS_ABANDON_SECONDS
    why = f"nobody asked for it in {abandon:g} s (INSPECTOR_LENS_ABANDON_SECONDS)"
    logger.info("lens run %s stopped: %s; process %s", run, why, pid or "never started")
    return why


def _run(name: str, capture: Capture, wanted: Callable[[], bool] | None) -> dict[str, Any]:
    body, fmt = bytes(capture.raw or b""), capture.stream_format
    tools = request_tools(capture.request_json)
    # A library not installed here needs no process: the lens says so at once.
    if LENSES[name].available():
        abandon = settings.INSPECTOR_LENS_ABANDON_SECONDS
        return bounded_run(
            name,
            body,
            fmt,
            tools,
            seconds=settings.INSPECTOR_LENS_SECONDS,
            memory_mb=settings.INSPECTOR_LENS_MEMORY_MB,
            wanted=wanted,
            check_every=min(1.0, abandon / 4) if abandon > 0 else 1.0,
        )
    try:
        return run_one(name, body, fmt, tools)
    except Exception as error:  # unreadable input and the like: the run's answer
        return {"status": Status.FAILED, "detail": f"{type(error).__name__}: {error}"}


def _store(run: LensRun, answer: dict[str, Any]) -> None:
    """Write the answer, unless the run was claimed again meanwhile."""
    result = answer.get("result") or {}
    divergences = answer.get("divergences") or []
    LensRun.objects.filter(pk=run.pk, started=run.started).update(
        status=answer["status"],
        detail=str(answer.get("detail") or "")[:2000],
        library=result.get("library") or LENSES[run.lens].library,
        available=result.get("available", True),
        error=result.get("error") or "",
        call_count=len(result.get("calls") or []),
        divergence_count=len(divergences),
        result_json=orjson.dumps(result).decode() if result else "",
        divergences_json=orjson.dumps(divergences).decode() if result else "",
        frames=answer.get("frames"),
        finished=timezone.now(),
        seconds=answer.get("seconds"),
        wall_seconds=answer.get("wall_seconds"),
        peak_memory_kb=answer.get("peak_memory_kb"),
    )


# --- serving what was stored -------------------------------------------------------------

STATUS_TEXT = {
    Status.PENDING: "computing\u2026",
    Status.TOO_LARGE: "too large for this lens",
    Status.FAILED: "the lens failed on this stream",
    Status.TIMEOUT: "stopped: over the time limit",
    Status.ABANDONED: "stopped: nobody was waiting for it",
}


def lens_result_of(run: LensRun) -> LensResult:
    """The stored result; for a run that has none (too large, failed, stopped)
    an unavailable result whose note says why, so the matrix shows its column
    without divergences."""
    if run.status == Status.DONE and run.result_json:
        return LensResult.from_dict(orjson.loads(run.result_json))
    note = STATUS_TEXT.get(run.status, run.status)
    if run.detail:
        note += f" ({run.detail})"
    return LensResult(
        lens=run.lens,
        library=run.library or LENSES[run.lens].library,
        version=run.version,
        available=False,
        calls_from=None,
        notes=[note],
    )


def strict_document(capture: Capture) -> dict[str, Any] | None:
    """The stored strict result of the capture (None while it is live)."""
    text = (
        Assembly.objects.filter(capture=capture, policy=STRICT)
        .values_list("result_json", flat=True)
        .first()
    )
    return orjson.loads(text) if text else None


def stored_matrix(strict: dict[str, Any], runs: dict[str, LensRun]) -> dict[str, Any]:
    """The lens matrix (`inspector.lenses.matrix`) from the stored results;
    each lens column also says its run's status."""
    table = matrix(strict, {name: lens_result_of(run) for name, run in runs.items()})
    for column in table["columns"]:
        run = runs.get(column["key"])
        column["status"] = run.status if run is not None else Status.DONE
    return table


def current_runs(slug: str) -> tuple[Capture, dict[str, LensRun], dict[str, Any] | None] | None:
    """A capture whose every lens run is stored, final and current, read in
    one query (the runs, their capture and its strict result): the capture,
    its runs and the strict document; None when one is missing, stale or
    computing (then `lens_runs` is the way)."""
    strict = Assembly.objects.filter(capture=OuterRef("capture_id"), policy=STRICT)
    rows = list(
        LensRun.objects.filter(capture__slug=slug)
        .select_related("capture")
        .defer("capture__raw", "capture__request_json")
        .annotate(strict_json=Subquery(strict.values("result_json")[:1]))
    )
    runs = {run.lens: run for run in rows}
    names = lenses_for(rows[0].capture.dialect) if rows else []
    if not names or set(runs) != set(names) or any(run.status not in LensRun.FINAL for run in rows):
        return None
    if any(run.version != LENSES[name].current_version() for name, run in runs.items()):
        return None
    strict_json = rows[0].strict_json
    ordered = {name: runs[name] for name in names}
    return rows[0].capture, ordered, orjson.loads(strict_json) if strict_json else None
