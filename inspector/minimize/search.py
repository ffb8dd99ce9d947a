"""The search behind `stream.minimize`: passes of delta debugging, each
shrinking one kind of thing, every candidate put to the target as bytes.

Passes, in the order of a round: frames, entries, fragments, characters
(chat tool-call entries and their arguments), keys and strings (what every
frame repeats: `envelope.py`).  `stream.minimize` repeats rounds until one
changes nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .ddmin import DDStats, ddmin
from .entries import Ref, edit_entries, entry_refs, fragment
from .envelope import key_refs, replace_string, short_strings, shorter_versions, without_keys
from .frames import Framing, MinFrame
from .progress import Progress, ProgressCallback

Predicate = Callable[[bytes], bool]
PROGRESS_EVERY_S = 0.25


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
class Budget:
    """When the search started and must stop, on `clock`."""

    started: float
    seconds: float
    clock: Callable[[], float] = time.monotonic

    @property
    def deadline(self) -> float:
        return self.started + self.seconds

    def spent(self) -> bool:
        return self.clock() >= self.deadline


def key(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=20).digest()


class Search:
    """The current smallest failing frames, the cache of tried candidates,
    and what has been done so far."""

    def __init__(
        self,
        frames: list[MinFrame],
        framing: Framing,
        limit: int,
        target: Predicate,
        budget: Budget,
        progress: ProgressCallback | None = None,
        wanted: str = "",
    ) -> None:
        self.frames, self.framing, self.target, self.budget = frames, framing, target, budget
        self.fmt = framing.fmt
        self.progress, self.wanted = progress, wanted
        self.limit = self.best = limit  # never accept anything longer than the original
        self.original = (limit, len(frames))
        self.cache: dict[bytes, bool] = {}
        self.tests_run = self.steps = self.round = 0
        self.timed_out = False
        self.pass_name = ""
        self.last_report = float("-inf")
        self.reports: list[PassReport] = []

    def fails(self, frames: list[MinFrame]) -> bool:
        """The predicate every pass uses: the candidate's bytes meet the target."""
        data = self.framing.write(frames)
        if len(data) > self.limit:
            return False
        digest = key(data)
        known = self.cache.get(digest)
        if known is None:
            known = self.cache[digest] = bool(self.target(data))
            self.tests_run += 1
            if known and len(data) < self.best:
                self.best = len(data)
                self.report(len(data), len(frames))
        return known

    def report(self, size: int, frames: int, *, force: bool = False, done: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if force or now - self.last_report >= PROGRESS_EVERY_S:
            self.last_report = now
            self.progress(self._progress(size, frames, done))

    def _progress(self, size: int, frames: int, done: bool) -> Progress:
        return Progress(
            self.pass_name,
            self.round,
            self.tests_run,
            size,
            frames,
            done=done,
            original_size=self.original[0],
            original_frames=self.original[1],
            elapsed_s=max(0.0, self.budget.clock() - self.budget.started),
            budget_s=self.budget.seconds,
            target=self.wanted,
        )

    def shrink(self, items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
        stats = DDStats()
        found = ddmin(
            items, fails, deadline=self.budget.deadline, stats=stats, clock=self.budget.clock
        )
        self.steps += stats.reductions
        self.timed_out = self.timed_out or stats.timed_out
        return found

    def run_pass(self, name: str, step: Callable[[], None]) -> None:
        if self.timed_out or self.budget.spent():
            self.timed_out = True
            return
        self.pass_name = name
        before = len(self.framing.write(self.frames))
        frames_before, tests_before = len(self.frames), self.tests_run
        self.report(before, frames_before, force=True)
        step()
        after = len(self.framing.write(self.frames))
        self.reports.append(
            PassReport(
                name=name,
                round=self.round,
                tests_run=self.tests_run - tests_before,
                bytes_before=before,
                bytes_after=after,
                frames_before=frames_before,
                frames_after=len(self.frames),
                timed_out=self.timed_out,
            )
        )
        self.report(after, len(self.frames), force=True, done=True)

    # -- the passes ---------------------------------------------------------------------

    def by_frames(self) -> None:
        self.frames = self.shrink(self.frames, self.fails)

    def by_entries(self) -> None:
        frames, fmt = self.frames, self.fmt
        refs = entry_refs(frames)
        if refs:

            def build(kept: list[Ref]) -> list[MinFrame]:
                return edit_entries(frames, fmt, remove=set(refs) - set(kept))

            self.frames = build(self.shrink(refs, lambda kept: self.fails(build(kept))))

    def by_fragments(self) -> None:
        frames, fmt = self.frames, self.fmt
        refs = [ref for ref in entry_refs(frames) if fragment(frames, ref) is not None]
        if refs:

            def build(kept: list[Ref]) -> list[MinFrame]:
                emptied = dict.fromkeys(set(refs) - set(kept), "")
                return edit_entries(frames, fmt, arguments=emptied)

            self.frames = build(self.shrink(refs, lambda kept: self.fails(build(kept))))

    def by_characters(self) -> None:
        for ref in entry_refs(self.frames):
            text = fragment(self.frames, ref)
            if self.timed_out or text is None or len(text) < 2:
                continue  # emptying it was the fragments pass's job
            frames, fmt = self.frames, self.fmt

            def build(kept: list[str], frames=frames, fmt=fmt, ref=ref) -> list[MinFrame]:
                return edit_entries(frames, fmt, arguments={ref: "".join(kept)})

            kept = self.shrink(list(text), lambda kept, build=build: self.fails(build(kept)))
            self.frames = build(kept)

    def by_keys(self) -> None:
        frames, fmt = self.frames, self.fmt
        refs = key_refs(frames)
        if refs:

            def build(kept: list[Any]) -> list[MinFrame]:
                return without_keys(frames, fmt, set(refs) - set(kept))

            self.frames = build(self.shrink(refs, lambda kept: self.fails(build(kept))))

    def by_strings(self) -> None:
        for value in short_strings(self.frames):
            if self.timed_out or self.budget.spent():
                self.timed_out = True
                return
            taken = set(short_strings(self.frames)) - {value}
            for shorter in shorter_versions(value, taken):
                candidate = replace_string(self.frames, self.fmt, value, shorter)
                if self.fails(candidate):
                    self.frames, self.steps = candidate, self.steps + 1
                    break
