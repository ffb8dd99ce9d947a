"""The minimizer and the export, run on stored captures.

The minimizer package (`inspector/minimize/`) is pure and knows no model; this
is where its results meet the database, so the packages depend one way
(captures on minimize, never back).

    derived = minimize_capture(capture)   # a new Capture, derived_from=capture
    target = capture_lens_target(capture, "litellm")   # keep a lens's divergence instead
    derived = minimize_capture(capture, target=target, keeps=target.description)
    files = export_files(capture)         # {"NAME.sse": ..., "NAME.expect.json": ...}

Both raise what the pure modules raise: `NothingToMinimize` (its subclass
`NotRefused` for a capture whose strict outcome is ok) and `UnreadableInput`.
"""

from __future__ import annotations

import re

from django.conf import settings

from inspector.assembly import AUTO_DIALECT, STRICT
from inspector.lenses.matrix import request_tools
from inspector.minimize.export import case_files
from inspector.minimize.lens import LensTarget, lens_target
from inspector.minimize.progress import ProgressCallback
from inspector.minimize.stream import Predicate, minimize

from .dialects import CHOSEN, URL
from .models import Capture
from .store import store_stream


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
    bar: `Progress.to_dict()`)."""
    budget = float(settings.INSPECTOR_MINIMIZE_SECONDS if seconds is None else seconds)
    # A dialect that was chosen or named by a URL is kept: the frames alone
    # might not tell it (and the minimized stream has no URL).
    dialect = capture.dialect if capture.dialect_basis in (CHOSEN, URL) else AUTO_DIALECT
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


def capture_lens_target(capture: Capture, lens: str) -> LensTarget:
    """The target "lens `lens` diverges from strict as on this capture", with
    the recorded request's tools, as the capture's lens matrix runs it.
    Raises what `lens_target` raises (all `NothingToMinimize`)."""
    return lens_target(
        lens,
        bytes(capture.raw),
        capture.stream_format,
        tools=request_tools(getattr(capture, "request_json", None)),
    )


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
