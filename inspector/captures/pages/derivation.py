"""The capture page's derivation line and comparisons: how a capture was made
from another (the minimizer's), the captures made from it, and the compare
links that follow from both.  No query: `capture.get_capture` reads the
original and the derivatives with the capture itself."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from django.urls import reverse

from inspector.assembly import LENIENT

from ..models import Capture

COMPARED_DERIVATIVES = 3  # derivatives offered a compare link


@dataclass
class Derivation:
    """How a capture was made from another: "minimized from <original>:
    keeps CODE, N of M frames, X of Y bytes"."""

    kind: str  # "minimized", or the derivation text when it reads otherwise
    keeps: str
    original: Capture | None  # None once the original was deleted
    frames: int
    bytes: int


def derivation(capture: Capture) -> Derivation | None:
    """How the capture was derived; None for one that was not."""
    if not capture.derivation and capture.derived_from_id is None:
        return None
    kind, _, keeps = capture.derivation.partition(": keeps ")
    if not keeps:
        kind, keeps = capture.derivation or "derived", ""
    return Derivation(
        kind=kind,
        keeps=keeps,
        original=capture.derived_from,
        frames=capture.frame_count,
        bytes=capture.byte_size,
    )


def derivatives(capture: Capture) -> list[Capture]:
    """The captures made from this one, newest first, as `get_capture` read
    them (no query)."""
    return list(getattr(capture, "derivatives_shown", []))


def compare_links(
    capture: Capture, original: Capture | None, made: list[Capture], disagree: bool
) -> list[tuple[str, str]]:
    """(label, URL) of the comparisons worth offering: with the original, with
    the first few derivatives, and strict with lenient when they disagree."""
    compare = reverse("compare")
    pairs = []
    if original is not None:
        pairs.append(
            ("with the original", f"{compare}?{urlencode({'a': original.slug, 'b': capture.slug})}")
        )
    for derived in made[:COMPARED_DERIVATIVES]:
        query = urlencode({"a": capture.slug, "b": derived.slug})
        pairs.append((f"with {derived.title or derived.slug}", f"{compare}?{query}"))
    if disagree:
        query = urlencode({"a": capture.slug, "b": capture.slug, "pb": LENIENT})
        pairs.append(("strict with lenient", f"{compare}?{query}"))
    return pairs
