"""Minimize runs in progress, for the page's progress bar.

    job = new_job_id()                      # a form's hidden `job` field
    start(job, slug, lens=None); report(job, progress) # from the minimizer's callback
    finish(job, derived_url) or fail(job, "why")
    status(job, slug)                       # {"state", "progress", "result", "lens", ...}

One registry for every Minimize form: the capture page's (keeping the
refusal) and the lens matrix's, one per diverging lens (keeping that lens's
divergence, named by `lens`).

The registry is a dict in this process, behind a lock (the minimizer reports
from its worker thread).  With several server processes a job's status is
known only to the process that runs it: a status request that lands on
another one gets "unknown job" (a 404), as for a job that never existed or
was forgotten.  Ended jobs are kept for KEEP_ENDED_S, and at most MAX_JOBS
jobs are kept in all (the oldest go first).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass, field

from inspector.minimize.progress import Progress, ProgressCallback

JOB_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
KEEP_ENDED_S = 600.0
MAX_JOBS = 256

RUNNING, DONE, FAILED = "running", "done", "failed"


@dataclass
class _Job:
    slug: str
    lens: str | None = None  # the lens whose divergence it keeps; None: the refusal
    state: str = RUNNING
    progress: dict[str, object] | None = None
    result: str = ""
    error: str = ""
    touched: float = field(default_factory=time.monotonic)


_jobs: dict[str, _Job] = {}
_lock = threading.Lock()


def new_job_id() -> str:
    """A fresh random job id (the page's hidden field)."""
    return secrets.token_urlsafe(12)


def valid_job_id(job: str | None) -> bool:
    """Whether `job` looks like a job id (a token the page or script made)."""
    return bool(job) and JOB_ID.match(job) is not None


def _forget_old(now: float) -> None:
    """Drop ended jobs past KEEP_ENDED_S, then the oldest past MAX_JOBS (lock held)."""
    for job, entry in list(_jobs.items()):
        if entry.state != RUNNING and now - entry.touched > KEEP_ENDED_S:
            del _jobs[job]
    while len(_jobs) >= MAX_JOBS:
        del _jobs[min(_jobs, key=lambda job: _jobs[job].touched)]


def start(job: str | None, slug: str, lens: str | None = None) -> None:
    """Register a run of capture `slug` as `job`, keeping the divergence of
    `lens` or the refusal (a new run replaces an old one)."""
    if not valid_job_id(job):
        return
    with _lock:
        _forget_old(time.monotonic())
        _jobs[job] = _Job(slug=slug, lens=lens)


def _update(job: str | None, **changes: object) -> None:
    with _lock:
        entry = _jobs.get(job or "")
        if entry is None:
            return
        for name, value in changes.items():
            setattr(entry, name, value)
        entry.touched = time.monotonic()


def report(job: str | None, progress: Progress) -> None:
    """The minimizer's latest report for `job`."""
    _update(job, progress=progress.to_dict())


def reporter(job: str | None) -> ProgressCallback | None:
    """A progress callback reporting to `job` (None when there is no job)."""
    if not valid_job_id(job):
        return None
    return lambda progress: report(job, progress)


def finish(job: str | None, result_url: str) -> None:
    """`job` ended with the capture at `result_url`."""
    _update(job, state=DONE, result=result_url)


def fail(job: str | None, error: str) -> None:
    """`job` ended without a result, for the reason `error`."""
    _update(job, state=FAILED, error=error)


def status(job: str, slug: str) -> dict[str, object] | None:
    """What is known of `job` on capture `slug`, JSON-ready; None if unknown here."""
    with _lock:
        entry = _jobs.get(job)
        if entry is None or entry.slug != slug:
            return None
        return {
            "job": job,
            "lens": entry.lens,
            "state": entry.state,
            "progress": dict(entry.progress) if entry.progress else None,
            "result": entry.result,
            "error": entry.error,
        }


def progress_text(progress: dict[str, object] | None) -> str:
    """For people: "N candidates tried · F of F0 frames · B of B0 bytes · s of S s"."""
    if not progress:
        return "starting…"
    return (
        f"{progress['tests_run']} candidates tried · "
        f"{progress['frames']} of {progress['original_frames']} frames · "
        f"{progress['size']} of {progress['original_size']} bytes · "
        f"{float(progress['elapsed_s']):.1f} of {float(progress['budget_s']):g} s"
    )
