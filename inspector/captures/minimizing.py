"""The minimizer and the export, run on stored captures.

The minimizer package (`inspector/minimize/`) is pure and knows no model; this
is where its results meet the database, so the packages depend one way
(captures on minimize, never back).

    derived = minimize_capture(capture)   # a new Capture, derived_from=capture
    derived = minimize_capture_keeping_lens(capture, "litellm")   # keep a lens's divergence
    files = export_files(capture)         # {"NAME.sse": ..., "NAME.expect.json": ...}

Both raise what the pure modules raise: `NothingToMinimize` (its subclass
`NotRefused` for a capture whose strict outcome is ok) and `UnreadableInput`.
"""

from __future__ import annotations

import re

from django.conf import settings

from inspector.assembly import AUTO_DIALECT, STRICT
from inspector.lenses import LENSES
from inspector.lenses.matrix import request_tools
from inspector.minimize.bounded import minimize_keeping_lens
from inspector.minimize.export import case_files
from inspector.minimize.lens import LensUnavailable, check_lens_name
from inspector.minimize.progress import ProgressCallback
from inspector.minimize.stream import Minimized, Predicate, minimize

from .dialects import CHOSEN, URL
from .models import Capture
from .store import store_stream


def _kept_dialect(capture: Capture) -> str:
    """A dialect that was chosen or named by a URL is kept: the frames alone
    might not tell it (and the minimized stream has no URL)."""
    return capture.dialect if capture.dialect_basis in (CHOSEN, URL) else AUTO_DIALECT


def _store_minimized(capture: Capture, found: Minimized, kept: str, dialect: str) -> Capture:
    return store_stream(
        found.data,
        stream_format=found.fmt,
        input_format=found.fmt,
        derived_from=capture,
        derivation=f"minimized: keeps {kept}"[:200],
        title=f"{capture.title or 'Untitled capture'} (minimized)",
        source=capture.source,
        dialect=dialect,
    )


def minimize_capture(
    capture: Capture,
    seconds: float | None = None,
    *,
    target: Predicate | None = None,
    keeps: str | None = None,
    progress: ProgressCallback | None = None,
) -> Capture:
    """Minimize `capture.raw` (keeping its strict failure signature, or
    `target`, named `keeps`) and store the result as a new capture linked to
    the original.  `progress` gets a `Progress` as the search goes (a page's
    bar: `Progress.to_dict()`).  The search runs here: for a target that runs
    a client library, use `minimize_capture_keeping_lens`."""
    budget = float(settings.INSPECTOR_MINIMIZE_SECONDS if seconds is None else seconds)
    dialect = _kept_dialect(capture)
    found = minimize(
        bytes(capture.raw),
        capture.stream_format,
        target=target,
        keeps=keeps,
        deadline_s=budget,
        progress=progress,
        dialect=dialect,
    )
    # The page shows what a derived capture keeps as a refusal code (presenters):
    # the code here; the full signature is `found.signature`.
    kept = found.target if target is not None else (found.code or found.target)
    return _store_minimized(capture, found, kept, dialect)


def minimize_capture_keeping_lens(
    capture: Capture,
    lens: str,
    seconds: float | None = None,
    *,
    progress: ProgressCallback | None = None,
) -> Capture:
    """Minimize `capture.raw` keeping lens `lens`'s divergence from strict (run
    with the recorded request's tools, as the lens matrix runs it) and store
    the result.  The search runs the client library on every candidate, so it
    runs in a child process bounded by the lens limits (`minimize/bounded.py`),
    never in this one.  Raises what `lens_target` raises (all
    `NothingToMinimize`), `LensSearchFailed` and `UnreadableInput`."""
    check_lens_name(lens)
    if not LENSES[lens].available():
        raise LensUnavailable(f"the {lens} lens is unavailable: its library is not installed")
    budget = float(settings.INSPECTOR_MINIMIZE_SECONDS if seconds is None else seconds)
    dialect = _kept_dialect(capture)
    found = minimize_keeping_lens(
        lens,
        bytes(capture.raw),
        capture.stream_format,
        tools=request_tools(getattr(capture, "request_json", None)),
        dialect=dialect,
        deadline_s=budget,
        memory_mb=settings.INSPECTOR_LENS_MEMORY_MB,
        progress=progress,
    )
    return _store_minimized(capture, found, found.target, dialect)


def case_name(capture: Capture) -> str:
    """A file name for the capture's case: its title, made plain, or capture-ID."""
    plain = re.sub(r"[^A-Za-z0-9_-]+", "_", capture.title or "").strip("_-")[:80]
    return plain or f"capture-{capture.pk}"


def export_files(
    capture: Capture, *, name: str | None = None, policy: str = STRICT
) -> dict[str, bytes]:
    """The capture's stream as a regression case: `{NAME.sse, NAME.expect.json}`
    (see `inspector/minimize/export.py`).  Works for any capture, minimized or not."""
    name = name or case_name(capture)
    about = f"Exported from Stream Inspector capture {capture.title or capture.pk!s}"
    if capture.derivation:
        about += f" ({capture.derivation})"
    outcome = capture.outcome
    about += f"; strict outcome {outcome}" + (
        f" {capture.refusal_code}." if capture.refusal_code else "."
    )
    return case_files(
        bytes(capture.raw), capture.stream_format, name=name, about=about, policy=policy
    )
