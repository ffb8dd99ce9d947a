"""Minimizing a refused stream: the smallest stream that still fails the same way.

Pure: bytes in, bytes out; no Django, no database, no network.

    from inspector.minimize import minimize
    found = minimize(data, "sse")     # keeps the strict refusal code
    found.data, found.code, found.tests_run, found.timed_out

Theory of operation.  The stream is read into frames with the assembler's
own readers.  Then passes of delta debugging (`ddmin.ddmin`) each shrink one
kind of thing, every candidate being serialised back to bytes and put to the
*target*, a `Callable[[bytes], bool]`:

1. **frames**: whole frames are removed;
2. **entries**: tool-call entries are removed from the `choices[].delta.
   tool_calls` lists of the chunk frames that are left (a list left empty
   is dropped from its delta);
3. **fragments**: whole `function.arguments` strings are emptied;
4. **characters**: each remaining arguments string is shortened, character
   by character (ddmin cuts halves first, then quarters, and so on);
5. **keys**: envelope keys every frame repeats are removed (`envelope.py`);
6. **strings**: ids, names, models and texts are shortened (`envelope.py`).

The rounds repeat until one changes nothing, so the result ends with a
frames pass that found nothing to remove: unless the time ran out, it is
*1-minimal by frames* (removing any one frame makes the target false).

What the result looks like.  Frames that no pass edited keep their raw text
exactly as read (its lines joined by LF, so CRLF input comes out as LF).
An edited frame is written anew as `data: <compact JSON>` (a JSON Lines
line for JSON Lines, an element for a JSON array), its SSE `event:` line
kept (`frames.py`).  A JSON array comes out as an array of the same shape,
its elements joined by `,\r\n`: whole elements go, never half of one.  Envelope
keys and long ids go when the failure stays without them, so the
reproducer reads in one glance.  Other frames (invalid data, comments,
`[DONE]`) are kept or removed whole, never edited: an invalid frame is the evidence.  An
unterminated last block stays unterminated.  Blocks that make no frame
(`event:` only, blank data) are not frames and do not survive.  A candidate
longer than the original is never accepted, so the result is no longer than
the original.

What the default target keeps, and why.  The default target is "assembling
the candidate under the strict policy gives the same failure signature"
(`signature.FailureSignature`): the refusal code and what makes it this bug
(the failing call's kind and identity fields, the class of an invalid
arguments' fault, the candidates of an ambiguous continuation, ...).  A
candidate refused with the same code but another signature is another bug,
not a smaller one.  `INCOMPLETE_STREAM` keeps its *cause* (the input was cut
in the middle of a frame; or it ended with no `[DONE]` and no finish reason;
or it was empty): without it every `INCOMPLETE_STREAM` would shrink to the
empty input.  Frames are otherwise all equal, the
`[DONE]` frame included: it survives exactly when the code needs it.  The
first refusal ends assembly (the assembler reads nothing after it), so for a refusal seen in the
middle of the stream (`AMBIGUOUS_CONTINUATION`, `IDENTITY_CONFLICT`,
`INVALID_FRAME`, `UPSTREAM_ERROR`) the frames after it, `[DONE]` included,
do not matter and go.  For the end-of-stream codes (`MALFORMED_TOOL_CALL`,
`INVALID_ARGUMENTS`, `EMPTY_RESPONSE`) the stream must look complete, so a
`[DONE]` or a finish reason stays, whichever the ddmin order keeps.

Any other `Callable[[bytes], bool]` can be the target (a lens divergence,
say); it is given the candidate stream's bytes in the stream's format and
must be deterministic for the result to be.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from inspector.assembly import (
    AUTO,
    AUTO_DIALECT,
    HAR,
    JSON_ARRAY,
    JSONL,
    SSE,
    UnreadableInput,
    detect_format,
    stream_bytes,
)

from .frames import read_frames
from .progress import Progress, ProgressCallback
from .search import Budget, PassReport, Predicate, Search, key
from .signature import FailureSignature, failure_signature

Signature = tuple[str, str]
PASSES = ("frames", "entries", "fragments", "characters", "keys", "strings")
MAX_ROUNDS = 50  # a safety net; each round that changes something removes items


class NothingToMinimize(Exception):
    """The original stream does not meet the target: there is nothing to
    keep while shrinking it.  The message is one line meant for a person."""


class NotRefused(NothingToMinimize):
    """The default target on a stream that is not refused (outcome ok)."""


class TargetNotMet(NothingToMinimize):
    """A custom target that is false for the original stream."""


@dataclass(frozen=True)
class Minimized:
    data: bytes  # the smallest stream found, in `fmt`
    fmt: str  # sse, jsonl or json-array (a HAR's stream comes out as sse)
    code: str | None  # its strict refusal code (None when it is not refused)
    steps: int  # smaller streams adopted, all passes
    tests_run: int  # target calls made (distinct candidates)
    timed_out: bool  # the time ran out: smaller, still failing, maybe not minimal
    passes: list[PassReport] = field(default_factory=list)
    original_bytes: int = 0
    original_frames: int = 0
    frames: int = 0
    target: str = ""  # what was kept, for people ("INVALID_ARGUMENTS (...)", or a description)
    signature: FailureSignature | None = None  # the result's (None when not refused)


# -- the default target ---------------------------------------------------------------------


def refusal_signature(data: bytes, fmt: str) -> Signature | None:
    """(code, cause) of the strict refusal of `data`, or None when it is not
    refused: the coarse part of `failure_signature`, for what names a refusal
    without telling bugs apart (a lens target's labels)."""
    found = failure_signature(data, fmt)
    return None if found is None else (found.code, found.cause)


def same_failure(signature: FailureSignature, fmt: str, dialect: str = AUTO_DIALECT) -> Predicate:
    """The default target: a candidate, read in `dialect`, is refused with
    this very signature."""

    def target(data: bytes) -> bool:
        return failure_signature(data, fmt, dialect) == signature

    return target


def same_refusal(signature: Signature, fmt: str) -> Predicate:
    """A coarser target: a candidate is refused with this (code, cause)."""

    def target(data: bytes) -> bool:
        return refusal_signature(data, fmt) == signature

    return target


def describe(signature: Signature) -> str:
    code, cause = signature
    return f"{code} ({cause})" if cause else code


def strict_code(data: bytes, fmt: str) -> str | None:
    found = failure_signature(data, fmt)
    return found.code if found else None


# -- minimize -------------------------------------------------------------------------------


def _prepare(data: bytes, fmt: str, entry: int) -> tuple[bytes, str]:
    if fmt == AUTO:
        fmt = detect_format(None, data)
    if fmt not in (SSE, JSONL, JSON_ARRAY, HAR):
        raise UnreadableInput(f"unknown format {fmt!r}: use sse, jsonl, json-array or har")
    fmt, body = stream_bytes(data, fmt, entry)
    return body, fmt


def _choose_target(
    body: bytes, fmt: str, target: Predicate | None, keeps: str | None, dialect: str
) -> tuple[Predicate, str]:
    """(the target, what it keeps in words); NothingToMinimize when it is
    false for the original."""
    if target is None:
        signature = failure_signature(body, fmt, dialect)
        if signature is None:
            raise NotRefused(
                "the stream is not refused (outcome ok under the strict policy): "
                "there is nothing to minimize"
            )
        return same_failure(signature, fmt, dialect), str(signature)
    if not target(body):
        raise TargetNotMet("the target does not hold for the original stream")
    return target, keeps or getattr(target, "__name__", "") or "the target"


def _run_rounds(search: Search) -> None:
    """Rounds of every pass until one changes nothing after its frames pass,
    so the result ends with a frames pass that found nothing to remove."""
    passes = [search.by_entries, search.by_fragments, search.by_characters]
    passes += [search.by_keys, search.by_strings]
    while search.round < MAX_ROUNDS and not search.timed_out:
        search.round += 1
        search.run_pass("frames", search.by_frames)
        after_frames = search.framing.write(search.frames)
        for name, step in zip(PASSES[1:], passes, strict=True):
            search.run_pass(name, step)
        if search.framing.write(search.frames) == after_frames:
            break


def _result(
    search: Search, body: bytes, original_frames: int, wanted: str, dialect: str
) -> Minimized:
    data = search.framing.write(search.frames)
    if len(data) > len(body):  # nothing came off but a line ending: give the input back
        data = body
    signature = failure_signature(data, search.fmt, dialect)
    return Minimized(
        data=data,
        fmt=search.fmt,
        code=signature.code if signature else None,
        steps=search.steps,
        tests_run=search.tests_run,
        timed_out=search.timed_out,
        passes=search.reports,
        original_bytes=len(body),
        original_frames=original_frames,
        frames=len(search.frames) if data is not body else original_frames,
        target=wanted,
        signature=signature,
    )


def minimize(
    data: bytes,
    fmt: str,
    *,
    target: Predicate | None = None,
    deadline_s: float = 30,
    progress: ProgressCallback | None = None,
    keeps: str | None = None,
    entry: int = 0,
    clock: Callable[[], float] = time.monotonic,
    dialect: str = AUTO_DIALECT,
) -> Minimized:
    """The smallest stream found that still meets `target` (by default: the
    same strict failure signature as `data`; see the module docstring),
    within `deadline_s` seconds.

    `fmt` is sse, jsonl, json-array, har (its `entry`-th event stream) or
    auto.  `keeps` names a custom target for people (the default target
    names itself).
    `dialect` reads the stream and every candidate in that dialect (default
    auto: a candidate must still be read in the original's dialect, since the
    signature names it).
    `progress` is called with a `Progress` as the search goes.  Raises
    `NotRefused` when the default target is asked of a stream that is not
    refused, `TargetNotMet` when a custom target is false for `data`, and
    `UnreadableInput` when the input can't be read at all.
    """
    budget = Budget(clock(), deadline_s, clock)
    body, fmt = _prepare(data, fmt, entry)
    target, wanted = _choose_target(body, fmt, target, keeps, dialect)
    frames, framing = read_frames(body, fmt)
    # A JSON Lines input without its last line ending reads back one byte longer.
    limit = max(len(body), len(framing.write(frames)))
    search = Search(frames, framing, limit, target, budget, progress, wanted)
    search.cache[key(body)] = True  # just seen to meet the target
    if not search.fails(search.frames):
        # The frames read back differently for this target (line endings, a BOM,
        # blocks that make no frame): the passes can't keep it; give the input back.
        return _unchanged(body, fmt, len(frames), search.tests_run, wanted, dialect)
    _run_rounds(search)
    return _result(search, body, len(frames), wanted, dialect)


def _unchanged(
    body: bytes, fmt: str, frames: int, tests_run: int, wanted: str, dialect: str
) -> Minimized:
    signature = failure_signature(body, fmt, dialect)
    return Minimized(
        data=body,
        fmt=fmt,
        code=signature.code if signature else None,
        steps=0,
        tests_run=tests_run,
        timed_out=False,
        original_bytes=len(body),
        original_frames=frames,
        frames=frames,
        target=wanted,
        signature=signature,
    )


__all__ = [
    "Minimized",
    "NotRefused",
    "NothingToMinimize",
    "PassReport",
    "Predicate",
    "Progress",
    "TargetNotMet",
    "minimize",
    "refusal_signature",
    "same_failure",
    "same_refusal",
]
