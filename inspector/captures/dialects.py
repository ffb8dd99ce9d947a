"""Which dialect a stored capture speaks, and on what grounds.

The assembler decides a stream's dialect (`assembly.dialect_of`); this
module only writes down why, so the capture page can say it: the dialect was
chosen by whoever stored the stream, named by a HAR entry's request URL, told
by a frame, or assumed (no frame of any known dialect: read as chat).
"""

from __future__ import annotations

from collections.abc import Iterable

from inspector.assembly import AUTO_DIALECT, DIALECTS, Frame, FrameKind, dialect_of

# The grounds a capture's dialect was decided on (`Capture.dialect_basis`).
CHOSEN = "chosen"  # --dialect, the upload form or the API said it
URL = "url"  # a HAR entry's request URL named it
FRAMES = "frames"  # a frame of the stream told it
ASSUMED = "assumed"  # nothing told it: read as chat, as before dialects

DIALECT_LABELS = {
    "chat": "OpenAI chat completions",
    "responses": "OpenAI Responses",
    "messages": "Anthropic Messages",
    "gemini": "Google Gemini",
}
DIALECT_CHOICES = [
    (AUTO_DIALECT, "Detect (by the request URL of a HAR, else by the frames)"),
    *((name, f"{DIALECT_LABELS[name]} ({name})") for name in DIALECTS),
]


def dialect_basis(
    frames: Iterable[Frame], requested: str = AUTO_DIALECT, hint: str | None = None
) -> str:
    """Why the assembler read the stream in the dialect it did.

    Mirrors the assembler's `auto` rule: a forced dialect wins, then the
    hint, then the first JSON object frame (or Anthropic ping) that
    `dialect_of` places; with none, chat was assumed."""
    if requested != AUTO_DIALECT:
        return CHOSEN
    if hint in DIALECTS:
        return URL
    for frame in frames:
        if frame.kind is FrameKind.PING:
            return FRAMES
        if frame.kind is FrameKind.CHUNK and dialect_of(frame.payload) is not None:  # type: ignore[arg-type]
            return FRAMES
    return ASSUMED


def chosen_fields(dialect: str) -> dict[str, str]:
    """A new capture's fields for the dialect its client chose (none for
    `auto`), written when it opens, not with its first frames: a process
    that resumes it, or recovery after its process died, reads it in that
    dialect even before any frame (`requested` gives it back)."""
    return {} if dialect == AUTO_DIALECT else {"dialect": dialect, "dialect_basis": CHOSEN}


def requested(dialect: str, basis: str) -> tuple[str, str | None]:
    """The `(dialect, hint)` a stored capture was read with, from its
    `dialect` and `dialect_basis`: what reading its frames again (a capture
    left live by a dead process, an ingest another process resumes) must be
    given to read them as its live assembler did.  Chosen: that dialect;
    named by a URL (a proxy's route): that hint; else `auto`, which finds
    again what the frames told."""
    if basis == CHOSEN and dialect in DIALECTS:
        return dialect, None
    if basis == URL and dialect in DIALECTS:
        return AUTO_DIALECT, dialect
    return AUTO_DIALECT, None
