"""Lens results computed once per capture and lens, stored (`LensRun`) and
served from the database; recomputed only when a lens's version changes.

    runs = lens_runs(capture)   # {lens: LensRun}, starting what is missing or stale
    if any_pending(runs): ...   # show "computing…"; the runs go on in the background

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

A run is not stopped when its client leaves: its result is stored for the
next visitor, and the time limit bounds it.  A run whose process died with
its server (a row left pending past twice the time limit) is claimed again.

A capture with more frames than `INSPECTOR_LENS_MAX_FRAMES` is never run:
its row says `too_large`.  Inside an open transaction (ATOMIC_REQUESTS, a
test's transaction) a worker thread could not see the capture's
uncommitted rows, so there the runs happen in the caller, in this process.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import timedelta
from typing import Any

import orjson
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


def lens_runs(capture: Capture) -> dict[str, LensRun]:
    """Every lens's run of the capture: stored ones as they are, missing or
    stale ones started (and waited for, at most INSPECTOR_LENS_WAIT_SECONDS)."""
    claimed = _claim_stale(capture, stored_runs(capture))
    if not claimed:
        return stored_runs(capture)
    inline = settings.INSPECTOR_LENS_WORKERS <= 0 or connection.in_atomic_block
    if inline:
        for run in claimed:
            compute(run, in_process=connection.in_atomic_block)
    else:
        futures: list[Future[Any]] = [_workers().submit(_in_worker, run) for run in claimed]
        wait(futures, timeout=settings.INSPECTOR_LENS_WAIT_SECONDS)
    return stored_runs(capture)


def _abandoned(run: LensRun, now: Any) -> bool:
    """Pending for longer than any run may last: its worker is gone."""
    limit = timedelta(seconds=2 * settings.INSPECTOR_LENS_SECONDS + 30)
    return run.status == Status.PENDING and (run.started is None or now - run.started > limit)


def _claim_stale(capture: Capture, rows: dict[str, LensRun]) -> list[LensRun]:
    """Claim the runs to (re)compute: missing, of another version, or abandoned."""
    now = timezone.now()
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
        if (run.version != version or _abandoned(run, now)) and _claim(run, version, now):
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
    """A worker thread's run: its own database connection, closed after."""
    close_old_connections()
    try:
        compute(run)
    except Exception as error:
        logger.exception("lens run %s failed", run.pk)
        _store(run, {"status": Status.FAILED, "detail": f"{type(error).__name__}: {error}"})
    finally:
        connection.close()


def compute(run: LensRun, *, in_process: bool = False) -> None:
    """Run one claimed lens on its capture and store the answer."""
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
    else:
        answer = _run(run.lens, capture, in_process)
    _store(run, answer)


def _run(name: str, capture: Capture, in_process: bool) -> dict[str, Any]:
    body, fmt = bytes(capture.raw or b""), capture.stream_format
    tools = request_tools(capture.request_json)
    # A library not installed here needs no process: the lens says so at once.
    if not in_process and LENSES[name].available():
        return bounded_run(
            name,
            body,
            fmt,
            tools,
            seconds=settings.INSPECTOR_LENS_SECONDS,
            memory_mb=settings.INSPECTOR_LENS_MEMORY_MB,
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
    if not names or set(runs) != set(names) or any_pending(runs):
        return None
    if any(run.version != LENSES[name].current_version() for name, run in runs.items()):
        return None
    strict_json = rows[0].strict_json
    ordered = {name: runs[name] for name in names}
    return rows[0].capture, ordered, orjson.loads(strict_json) if strict_json else None
