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
   by character (ddmin cuts halves first, then quarters, and so on).

The rounds repeat until one changes nothing, so the result ends with a
frames pass that found nothing to remove: unless the time ran out, it is
*1-minimal by frames* (removing any one frame makes the target false).

What the result looks like.  Frames that no pass edited keep their raw text
exactly as read (its lines joined by LF, so CRLF input comes out as LF).
An edited chunk frame is written anew as `data: <compact JSON>` (a JSON Lines
line for JSON Lines).  Only tool-call entries and their arguments are ever
edited; everything else of a chunk (id, object, model, content, finish
reasons, usage) stays, so the reproducer still looks like what a provider
sends.  Non-chunk frames (errors, invalid data, comments, `[DONE]`) are kept
or removed whole, never edited: an invalid frame is the evidence.  An
unterminated last block stays unterminated.  Blocks that make no frame
(`event:` only, blank data) are not frames and do not survive.  A candidate
longer than the original is never accepted, so the result is no longer than
the original.

What the default target keeps, and why.  The default target is "assembling
the candidate under the strict policy gives the same refusal code", with
one refinement: `INCOMPLETE_STREAM` must keep its *cause* too (the input
was cut in the middle of a frame; or it ended with no `[DONE]` and no
finish reason; or it was empty).  Without that every `INCOMPLETE_STREAM`
would shrink to the empty input, which is also `INCOMPLETE_STREAM` and says
nothing about the stream it came from.  Frames are otherwise all equal, the
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

import hashlib
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from inspector.assembly import (
    AUTO,
    HAR,
    JSONL,
    SSE,
    STRICT,
    FrameKind,
    JSONLReader,
    SSEReader,
    UnreadableInput,
    detect_format,
    read_stream,
    stream_bytes,
)
from inspector.assembly.jsontext import compact

from .ddmin import DDProgress, DDStats, ddmin

Predicate = Callable[[bytes], bool]
Signature = tuple[str, str]

INCOMPLETE = "INCOMPLETE_STREAM"
CAUSE_CUT = "cut in the middle of a frame"
CAUSE_UNFINISHED = "no [DONE] and no finish_reason"
CAUSE_EMPTY = "empty input"
PASSES = ("frames", "entries", "fragments", "characters")
MAX_ROUNDS = 50  # a safety net; each round that changes something removes items
PROGRESS_EVERY_S = 0.25


class NothingToMinimize(Exception):
    """The original stream does not meet the target: there is nothing to
    keep while shrinking it.  The message is one line meant for a person."""


class NotRefused(NothingToMinimize):
    """The default target on a stream that is not refused (outcome ok)."""


class TargetNotMet(NothingToMinimize):
    """A custom target that is false for the original stream."""


@dataclass(frozen=True)
class PassReport:
    """One pass of one round."""

    name: str
    round: int
    tests_run: int  # target calls made by this pass (cache hits not counted)
    bytes_before: int
    bytes_after: int
    frames_before: int
    frames_after: int
    timed_out: bool


@dataclass(frozen=True)
class Progress:
    """Sent to the progress callback: at each pass's start and end, and as
    smaller streams are found (at most a few times a second)."""

    pass_name: str
    round: int
    tests_run: int  # target calls so far, all passes
    size: int  # bytes of the smallest stream so far
    frames: int  # its frames
    done: bool = False  # the pass has ended


@dataclass(frozen=True)
class Minimized:
    data: bytes  # the smallest stream found, in `fmt`
    fmt: str  # sse or jsonl (a HAR's stream comes out as sse)
    code: str | None  # its strict refusal code (None when it is not refused)
    steps: int  # smaller streams adopted, all passes
    tests_run: int  # target calls made (distinct candidates)
    timed_out: bool  # the time ran out: smaller, still failing, maybe not minimal
    passes: list[PassReport] = field(default_factory=list)
    original_bytes: int = 0
    original_frames: int = 0
    frames: int = 0
    target: str = ""  # what was kept, for people ("INVALID_ARGUMENTS", or a description)


# -- the default target ---------------------------------------------------------------------


def refusal_signature(data: bytes, fmt: str) -> Signature | None:
    """(code, cause) of the strict refusal of `data`, or None when it is not
    refused.  The cause is "" except for INCOMPLETE_STREAM (see the module
    docstring)."""
    frames, results = read_stream(data, fmt)
    refusal = results[STRICT].refusal
    if refusal is None:
        return None
    cause = ""
    if refusal.code == INCOMPLETE:
        if refusal.frame is None:
            cause = CAUSE_EMPTY
        else:
            frame = frames[refusal.frame]
            cut = frame.kind is FrameKind.INVALID and frame.unterminated and frame.parse_failed
            cause = CAUSE_CUT if cut else CAUSE_UNFINISHED
    return refusal.code, cause


def same_refusal(signature: Signature, fmt: str) -> Predicate:
    """The default target: a candidate is refused with this signature."""

    def target(data: bytes) -> bool:
        return refusal_signature(data, fmt) == signature

    return target


def describe(signature: Signature) -> str:
    code, cause = signature
    return f"{code} ({cause})" if cause else code


def strict_code(data: bytes, fmt: str) -> str | None:
    signature = refusal_signature(data, fmt)
    return signature[0] if signature else None


# -- frames as the minimizer sees them ------------------------------------------------------


class _Frame:
    """One frame: its text as it will be written, and for chunk frames the
    (current) parsed payload.  Never changed once made: an edit makes a new one."""

    __slots__ = ("text", "payload", "unterminated")

    def __init__(self, text: str, payload: dict[str, Any] | None, unterminated: bool) -> None:
        self.text = text
        self.payload = payload
        self.unterminated = unterminated


def _read(data: bytes, fmt: str) -> list[_Frame]:
    reader = SSEReader() if fmt == SSE else JSONLReader()
    frames = reader.feed(data)
    frames.extend(reader.close())
    return [
        _Frame(f.raw, f.payload if f.kind is FrameKind.CHUNK else None, f.unterminated)
        for f in frames
    ]


def _serialise(frames: list[_Frame], fmt: str) -> bytes:
    if fmt == JSONL:
        return "".join(f.text + "\n" for f in frames).encode()
    return "".join(f.text if f.unterminated else f.text + "\n\n" for f in frames).encode()


def _rewritten(frame: _Frame, payload: dict[str, Any], fmt: str) -> _Frame:
    body = compact(payload)
    return _Frame(body if fmt == JSONL else "data: " + body, payload, frame.unterminated)


# Where a tool-call entry is: (frame position, choice position, entry position).
Ref = tuple[int, int, int]


def _entry_lists(payload: dict[str, Any] | None) -> list[tuple[int, list[Any]]]:
    """(choice position, its delta.tool_calls list) for every such list."""
    if payload is None or type(payload.get("choices")) is not list:
        return []
    out = []
    for ci, item in enumerate(payload["choices"]):
        delta = item.get("delta") if type(item) is dict else None
        entries = delta.get("tool_calls") if type(delta) is dict else None
        if type(entries) is list:
            out.append((ci, entries))
    return out


def _entry_refs(frames: list[_Frame]) -> list[Ref]:
    return [
        (fi, ci, ei)
        for fi, frame in enumerate(frames)
        for ci, entries in _entry_lists(frame.payload)
        for ei in range(len(entries))
    ]


def _fragment(frames: list[_Frame], ref: Ref) -> str | None:
    """The entry's arguments when it is a non-empty string, else None."""
    fi, ci, ei = ref
    entry = frames[fi].payload["choices"][ci]["delta"]["tool_calls"][ei]
    function = entry.get("function") if type(entry) is dict else None
    arguments = function.get("arguments") if type(function) is dict else None
    return arguments if type(arguments) is str and arguments else None


def _edit(
    frames: list[_Frame],
    fmt: str,
    *,
    remove: AbstractSet[Ref] = frozenset(),
    arguments: dict[Ref, str] | None = None,
) -> list[_Frame]:
    """`frames` with these entries removed and these arguments replaced.
    Frames no edit touches are the same objects; the others are rewritten,
    copying only the dicts and lists on the way to what changed."""
    arguments = arguments or {}
    by_frame: dict[int, set[tuple[int, int]]] = {}
    for fi, ci, ei in (*remove, *arguments):
        by_frame.setdefault(fi, set()).add((ci, ei))
    if not by_frame:
        return frames
    out = list(frames)
    for fi, places in by_frame.items():
        frame = frames[fi]
        payload = dict(frame.payload)
        choices = payload["choices"] = list(payload["choices"])
        for ci in sorted({ci for ci, _ in places}):
            choice = choices[ci] = dict(choices[ci])
            delta = choice["delta"] = dict(choice["delta"])
            kept = []
            for ei, entry in enumerate(delta["tool_calls"]):
                ref = (fi, ci, ei)
                if ref in remove:
                    continue
                if ref in arguments:
                    entry = dict(entry)
                    function = entry["function"] = dict(entry["function"])
                    function["arguments"] = arguments[ref]
                kept.append(entry)
            if kept:
                delta["tool_calls"] = kept
            else:
                del delta["tool_calls"]
        out[fi] = _rewritten(frame, payload, fmt)
    return out


# -- the search -----------------------------------------------------------------------------


class _Search:
    def __init__(
        self,
        frames: list[_Frame],
        fmt: str,
        limit: int,
        target: Predicate,
        deadline: float,
        progress: Callable[[Progress], None] | None,
        clock: Callable[[], float],
    ) -> None:
        self.frames = frames
        self.fmt = fmt
        self.target = target
        self.deadline = deadline
        self.progress = progress
        self.clock = clock
        self.limit = limit  # never accept anything longer than the original
        self.best = limit
        self.cache: dict[bytes, bool] = {}
        self.tests_run = 0
        self.steps = 0
        self.timed_out = False
        self.pass_name = ""
        self.round = 0
        self.last_report = float("-inf")
        self.reports: list[PassReport] = []

    # The predicate every pass uses: the candidate's bytes meet the target.
    def fails(self, frames: list[_Frame]) -> bool:
        data = _serialise(frames, self.fmt)
        if len(data) > self.limit:
            return False
        key = _key(data)
        known = self.cache.get(key)
        if known is None:
            known = self.cache[key] = bool(self.target(data))
            self.tests_run += 1
            if known and len(data) < self.best:
                self.best = len(data)
                self._report(len(data), len(frames))
        return known

    def _report(self, size: int, frames: int, *, force: bool = False, done: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if force or now - self.last_report >= PROGRESS_EVERY_S:
            self.last_report = now
            self.progress(
                Progress(self.pass_name, self.round, self.tests_run, size, frames, done=done)
            )

    def _ddmin(self, items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
        stats = DDStats()
        found = ddmin(items, fails, deadline=self.deadline, stats=stats, clock=self.clock)
        self.steps += stats.reductions
        if stats.timed_out:
            self.timed_out = True
        return found

    def run_pass(self, name: str, step: Callable[[], None]) -> None:
        if self.timed_out or self.clock() >= self.deadline:
            self.timed_out = True
            return
        self.pass_name = name
        before = _serialise(self.frames, self.fmt)
        frames_before, tests_before = len(self.frames), self.tests_run
        self._report(len(before), frames_before, force=True)
        step()
        after = len(_serialise(self.frames, self.fmt))
        self.reports.append(
            PassReport(
                name=name,
                round=self.round,
                tests_run=self.tests_run - tests_before,
                bytes_before=len(before),
                bytes_after=after,
                frames_before=frames_before,
                frames_after=len(self.frames),
                timed_out=self.timed_out,
            )
        )
        self._report(after, len(self.frames), force=True, done=True)

    # -- the passes ---------------------------------------------------------------------

    def by_frames(self) -> None:
        self.frames = self._ddmin(self.frames, self.fails)

    def by_entries(self) -> None:
        frames = self.frames
        refs = _entry_refs(frames)
        if not refs:
            return

        def build(kept: list[Ref]) -> list[_Frame]:
            return _edit(frames, self.fmt, remove=set(refs) - set(kept))

        self.frames = build(self._ddmin(refs, lambda kept: self.fails(build(kept))))

    def by_fragments(self) -> None:
        frames = self.frames
        refs = [ref for ref in _entry_refs(frames) if _fragment(frames, ref) is not None]
        if not refs:
            return

        def build(kept: list[Ref]) -> list[_Frame]:
            return _edit(frames, self.fmt, arguments=dict.fromkeys(set(refs) - set(kept), ""))

        self.frames = build(self._ddmin(refs, lambda kept: self.fails(build(kept))))

    def by_characters(self) -> None:
        for ref in _entry_refs(self.frames):
            if self.timed_out:
                return
            text = _fragment(self.frames, ref)
            if text is None or len(text) < 2:
                continue  # emptying it was the fragments pass's job
            frames = self.frames

            def build(kept: list[str], frames=frames, ref=ref) -> list[_Frame]:
                return _edit(frames, self.fmt, arguments={ref: "".join(kept)})

            kept = self._ddmin(list(text), lambda kept, build=build: self.fails(build(kept)))
            self.frames = build(kept)


def _key(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


def _prepare(data: bytes, fmt: str, entry: int) -> tuple[bytes, str]:
    if fmt == AUTO:
        fmt = detect_format(None, data)
    if fmt not in (SSE, JSONL, HAR):
        raise UnreadableInput(f"unknown format {fmt!r}: use sse, jsonl or har")
    fmt, body = stream_bytes(data, fmt, entry)
    return body, fmt


def minimize(
    data: bytes,
    fmt: str,
    *,
    target: Predicate | None = None,
    deadline_s: float = 30,
    progress: Callable[[Progress], None] | None = None,
    keeps: str | None = None,
    entry: int = 0,
    clock: Callable[[], float] = time.monotonic,
) -> Minimized:
    """The smallest stream found that still meets `target` (by default: the
    same strict refusal as `data`; see the module docstring), within
    `deadline_s` seconds.

    `fmt` is sse, jsonl, har (its `entry`-th event stream) or auto.  `keeps`
    names a custom target for people (the default target names itself).  Raises
    `NotRefused` when the default target is asked of a stream that is not
    refused, `TargetNotMet` when a custom target is false for `data`, and
    `UnreadableInput` when the input can't be read at all.
    """
    started = clock()
    body, fmt = _prepare(data, fmt, entry)
    if target is None:
        signature = refusal_signature(body, fmt)
        if signature is None:
            raise NotRefused(
                "the stream is not refused (outcome ok under the strict policy): "
                "there is nothing to minimize"
            )
        target, wanted = same_refusal(signature, fmt), describe(signature)
    else:
        if not target(body):
            raise TargetNotMet("the target does not hold for the original stream")
        wanted = keeps or getattr(target, "__name__", "") or "the target"

    frames = _read(body, fmt)
    # A JSON Lines input without its last line ending reads back one byte longer.
    limit = max(len(body), len(_serialise(frames, fmt)))
    search = _Search(frames, fmt, limit, target, started + deadline_s, progress, clock)
    search.cache[_key(body)] = True  # just seen to meet the target
    original_frames = len(search.frames)
    if not search.fails(search.frames):
        # The frames read back differently for this target (line endings, a BOM,
        # blocks that make no frame): the passes can't keep it; give the input back.
        return Minimized(
            data=body,
            fmt=fmt,
            code=strict_code(body, fmt),
            steps=0,
            tests_run=search.tests_run,
            timed_out=False,
            original_bytes=len(body),
            original_frames=original_frames,
            frames=original_frames,
            target=wanted,
        )
    while search.round < MAX_ROUNDS and not search.timed_out:
        search.round += 1
        search.run_pass("frames", search.by_frames)
        after_frames = _serialise(search.frames, fmt)
        search.run_pass("entries", search.by_entries)
        search.run_pass("fragments", search.by_fragments)
        search.run_pass("characters", search.by_characters)
        if _serialise(search.frames, fmt) == after_frames:
            break  # the frames pass ran last on this very stream: nothing more to take

    result = _serialise(search.frames, fmt)
    if len(result) > len(body):  # nothing came off but that line ending: give the input back
        result = body
    return Minimized(
        data=result,
        fmt=fmt,
        code=strict_code(result, fmt),
        steps=search.steps,
        tests_run=search.tests_run,
        timed_out=search.timed_out,
        passes=search.reports,
        original_bytes=len(body),
        original_frames=original_frames,
        frames=len(search.frames),
        target=wanted,
    )


__all__ = [
    "DDProgress",
    "Minimized",
    "NotRefused",
    "NothingToMinimize",
    "PassReport",
    "Predicate",
    "Progress",
    "TargetNotMet",
    "minimize",
    "refusal_signature",
    "same_refusal",
]
