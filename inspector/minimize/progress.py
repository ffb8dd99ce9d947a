"""What the minimizer reports while it runs, for the command line and pages.

    minimize(data, "sse", progress=lambda p: print(p.line()))
    minimize(data, "sse", progress=lambda p: send(p.to_dict()))  # a page's bar

A report is sent at each pass's start and end, and as smaller failing
streams are found (at most a few times a second).  It says what a person
watching wants: how many candidates were tried, how big the smallest failing
stream is now (frames and bytes, against the original's), which pass is
running, and how much of the time budget is spent (`fraction`, a bar's
length: the search may well end before its budget).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Progress:
    """One report (see the module docstring)."""

    pass_name: str
    round: int
    tests_run: int  # candidates tried so far, all passes (distinct streams)
    size: int  # bytes of the smallest failing stream so far
    frames: int  # its frames
    done: bool = False  # the pass has ended
    original_size: int = 0
    original_frames: int = 0
    elapsed_s: float = 0.0
    budget_s: float = 0.0
    target: str = ""  # what is kept, for people

    @property
    def fraction(self) -> float:
        """Of the time budget spent, 0 to 1."""
        return min(1.0, self.elapsed_s / self.budget_s) if self.budget_s > 0 else 0.0

    def line(self) -> str:
        """One line for a terminal."""
        state = "done" if self.done else "..."
        return (
            f"minimize: round {self.round} {self.pass_name} {state} "
            f"{self.tests_run} tests, {self.frames} of {self.original_frames} frames, "
            f"{self.size} of {self.original_size} bytes, "
            f"{self.elapsed_s:.1f} of {self.budget_s:g} s"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, for a websocket message or a polled status."""
        return {**asdict(self), "fraction": round(self.fraction, 3)}


ProgressCallback = Callable[[Progress], None]
