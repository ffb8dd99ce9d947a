"""Delta debugging: Zeller and Hildebrandt's `ddmin`, generic and pure.

Given a configuration (a list of items) that makes a test fail, `ddmin`
returns a sub-list that still fails and is *1-minimal*: removing any single
item of it makes the test pass.

Theory of operation.  The current configuration is cut into `n` parts
(`n` starts at 2).  Each part is tried on its own ("reduce to subset"),
then each complement, the configuration without one part ("reduce to
complement").  A failing subset restarts with `n = 2`; a failing complement
keeps the granularity (`n - 1`, at least 2); when nothing fails the
granularity doubles, up to one item per part.  When every single-item
complement passes, the configuration is 1-minimal and the search stops.

* Pure and deterministic: the same items and the same (deterministic) test
  give the same result and the same sequence of tests.  Items keep their
  order.  Parts are contiguous runs of items, cut as evenly as possible.
* Every configuration is tested at most once: results are cached by the
  positions (in the original list) of the items it keeps.
* Bounded in time: before each test the clock is read; past the deadline the
  search stops and returns the smallest failing configuration found so far
  (which still fails: only configurations seen to fail are ever kept), with
  `stats.timed_out` set.
* The input is assumed to fail and is not tested; the empty configuration
  is tested only when one item is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass
class DDStats:
    """What one `ddmin` run did (pass one in to read it afterwards)."""

    tests_run: int = 0  # calls of the test function
    cache_hits: int = 0  # configurations asked for again, answered from the cache
    reductions: int = 0  # times a smaller failing configuration was adopted
    timed_out: bool = False


@dataclass(frozen=True)
class DDProgress:
    """Sent to the progress callback after every test."""

    tests_run: int
    size: int  # items in the smallest failing configuration so far
    granularity: int


class _Timeout(Exception):
    pass


def _split(positions: tuple[int, ...], n: int) -> list[tuple[int, ...]]:
    """`positions` cut into `n` contiguous, non-empty parts of near-equal size
    (the first `len % n` parts one longer)."""
    size, extra = divmod(len(positions), n)
    parts, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        parts.append(positions[start:end])
        start = end
    return parts


class _Tester:
    """The test function with its cache, deadline, statistics and progress."""

    def __init__(
        self,
        items: Sequence[T],
        still_fails: Callable[[list[T]], bool],
        deadline: float | None,
        progress: Callable[[DDProgress], None] | None,
        stats: DDStats,
        clock: Callable[[], float],
    ) -> None:
        self.items, self.still_fails, self.deadline = items, still_fails, deadline
        self.progress, self.stats, self.clock = progress, stats, clock
        self.cache: dict[tuple[int, ...], bool] = {}
        self.current: tuple[int, ...] = tuple(range(len(items)))
        self.n = 2

    def __call__(self, config: tuple[int, ...]) -> bool:
        known = self.cache.get(config)
        if known is not None:
            self.stats.cache_hits += 1
            return known
        if self.deadline is not None and self.clock() >= self.deadline:
            self.stats.timed_out = True
            raise _Timeout
        outcome = bool(self.still_fails([self.items[i] for i in config]))
        self.cache[config] = outcome
        self.stats.tests_run += 1
        if self.progress is not None:
            size = len(config) if outcome else len(self.current)
            self.progress(DDProgress(self.stats.tests_run, size, self.n))
        return outcome

    def adopt(self, config: tuple[int, ...], n: int) -> None:
        self.current, self.n = config, n
        self.stats.reductions += 1

    def reduce_once(self) -> bool:
        """One step: a failing part ("reduce to subset"), else a failing
        complement ("reduce to complement"); False when neither fails."""
        parts = _split(self.current, self.n)
        for part in parts:
            if self(part):
                self.adopt(part, 2)
                return True
        if self.n > 2:  # with two parts, the complements are the parts
            for i in range(self.n):
                complement = tuple(p for j, part in enumerate(parts) if j != i for p in part)
                if self(complement):
                    self.adopt(complement, max(self.n - 1, 2))
                    return True
        return False

    def run(self) -> None:
        while len(self.current) >= 2:
            if self.reduce_once():
                continue
            if self.n >= len(self.current):
                break  # every single-item complement passed: 1-minimal
            self.n = min(self.n * 2, len(self.current))
        if len(self.current) == 1 and self(()):
            self.adopt((), 2)


def ddmin(
    items: Sequence[T],
    still_fails: Callable[[list[T]], bool],
    *,
    deadline: float | None = None,
    progress: Callable[[DDProgress], None] | None = None,
    stats: DDStats | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[T]:
    """A 1-minimal sub-list of `items` for which `still_fails` is true.

    `deadline` is a time on `clock` (default `time.monotonic`), or None for
    no limit.  `progress`, when given, is called after every test.  `stats`,
    when given, is filled in.
    """
    stats = stats if stats is not None else DDStats()
    tester = _Tester(items, still_fails, deadline, progress, stats, clock)
    try:
        tester.run()
    except _Timeout:
        pass
    return [items[i] for i in tester.current]
