"""What the timeline picture draws, summarized once when a capture is stored.

A capture page must draw its timeline in a few milliseconds at any size, so
the picture's data is computed from the strict result while the capture is
stored (one pass over each call's frames, which the store walks anyway) and
kept with the strict assembly (`Assembly.timeline`):

    {"total": frames, "lanes": [{"position": 0, "runs": [[first, last, frames], ...]}],
     "prose": [{"kind": "text", "runs": [...]}, {"kind": "reasoning", "runs": [...]}],
     "marks": [[frame, ["anomaly", ...]], ...], "marks_cut": false,
     "time": null | {"start": ms, "end": ms, "lanes": [...], "prose": [...],
                     "clock": [[frame, ms], ...]}}

Frames are counted per bucket (`BUCKETS` across the picture); buckets closer
than `JOIN_BUCKETS` make one run, so a call interleaved with others is one
bar, not hundreds.  At most `LANES` calls get a lane and `MARKED_FRAMES`
marked frames are kept.  `prose` are the frames that carried the text and
the reasoning, as the assembler's `text_delta` and `reasoning_delta` events
name them (`ProseFrames`), one entry per kind the stream has.

`time` is there when the frames have arrival times (a live capture): the
same lanes counted in buckets of arrival time instead of frame number, and a
`clock` giving the arrival time of every frame the picture draws (the runs'
ends, the calls' identity, settling and invalid frames, the marks, the
refusal), so the page needs no frame to place them.

Summaries stored before `prose` and `time` existed still draw (no text lane,
no time axis); captures stored before there were timelines have none, and the
page then counts the calls' runs from the database
(`pages/timeline_picture.py`), through the same `runs_from_buckets`.
"""

from __future__ import annotations

import math
import operator
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from inspector.assembly import Result

from .models import Capture

BUCKETS = 300  # columns the frames are counted in
# Buckets this close are one run: a call interleaved with others streams
# through the gaps.
JOIN_BUCKETS = 3
LANES = 30  # calls drawn; the picture says how many more there are
MARKED_FRAMES = 2000  # marked frames kept; the picture says when there were more
PROSE_KINDS = ("text", "reasoning")
_PROSE_EVENTS = {"text_delta": "text", "reasoning_delta": "reasoning"}

Bucket = tuple[int, int, int, int]  # (bucket, first frame, last frame, frames)


class ProseFrames:
    """The frames that carried text or reasoning, noted from the result
    document's events as they pass (an upload's events are drained while it
    is stored, so they can't be read again at the end)."""

    def __init__(self) -> None:
        self.frames: dict[str, array[int]] = {kind: array("q") for kind in PROSE_KINDS}

    def add(self, event: dict[str, Any]) -> None:
        kind = _PROSE_EVENTS.get(event["type"])
        frame = event.get("frame")
        if kind is None or frame is None:
            return
        frames = self.frames[kind]
        if not frames or frames[-1] != frame:
            frames.append(frame)

    def add_all(self, events: Iterable[dict[str, Any]]) -> ProseFrames:
        for event in events:
            self.add(event)
        return self


def bucket_of(frame: int, total: int) -> int:
    return frame * BUCKETS // max(total, 1)


def bucket_end(bucket: int, total: int) -> int:
    """The last frame number of a bucket."""
    return min(total - 1, -(-(bucket + 1) * total // BUCKETS) - 1)


def join_runs(buckets: Iterable[Bucket], *, adjacent: bool = False) -> list[list[int]]:
    """(bucket, first, last, frames) in bucket order -> [first, last, frames]
    runs, buckets at most JOIN_BUCKETS apart joined; with `adjacent`, also
    buckets whose frames follow each other (a capture of fewer frames than
    buckets has gaps of empty buckets between its frames: frames 3 and 4 of
    28 are one run, not two).  The time axis does not join those: a pause
    between two frames is a gap there."""
    runs: list[list[int]] = []
    previous = None
    for bucket, first, last, count in buckets:
        close = previous is not None and bucket - previous <= JOIN_BUCKETS
        if runs and (close or (adjacent and first == runs[-1][1] + 1)):
            runs[-1][1] = last
            runs[-1][2] += count
        else:
            runs.append([first, last, count])
        previous = bucket
    return runs


def runs_from_buckets(buckets: Iterable[tuple[int, int, int]], total: int) -> list[list[int]]:
    """(bucket, first frame, frames) in bucket order -> [first, last, frames]
    runs on the frame axis, each reaching its last bucket's end."""
    return join_runs(
        ((bucket, first, bucket_end(bucket, total), count) for bucket, first, count in buckets),
        adjacent=True,
    )


def count_buckets(
    frames: Sequence[int],
    bucket: Callable[[int], int | None],
    *,
    ordered: bool = False,
    last_of: Callable[[int], int] | None = None,
) -> list[Bucket]:
    """Frames counted per bucket (`bucket(frame)`; None: not placed).
    `ordered`: `frames` ascend and so do their buckets, none None (a call's
    frames on the frame axis; on the time axis, when their arrival times do):
    then each bucket's frames are found by bisection, about log2(frames)
    calls of `bucket` a bucket (at most BUCKETS of them) instead of one a
    frame.  A capture's close summarizes every call and the text this way.
    `last_of(slot)`: the last frame number of a bucket or of those before it,
    when every frame number's bucket is known to ascend: then one call of
    `bucket` a bucket, and a bisection without a key."""
    if ordered:
        return _count_ordered(frames, bucket, last_of)
    counted: dict[int, list[int]] = {}
    for frame in frames:
        slot = bucket(frame)
        if slot is None:
            continue
        entry = counted.get(slot)
        if entry is None:
            counted[slot] = [frame, frame, 1]
        else:
            entry[0] = min(entry[0], frame)
            entry[1] = max(entry[1], frame)
            entry[2] += 1
    return [(slot, first, last, count) for slot, (first, last, count) in sorted(counted.items())]


def _count_ordered(
    frames: Sequence[int], bucket: Callable[[int], Any], last_of: Callable[[int], int] | None
) -> list[Bucket]:
    counted: list[Bucket] = []
    start, end = 0, len(frames)
    while start < end:
        slot = bucket(frames[start])
        # past the slot's last frame
        if last_of is None:
            stop = bisect_right(frames, slot, start, end, key=bucket)
        else:
            stop = bisect_right(frames, last_of(slot), start, end)
        counted.append((slot, frames[start], frames[stop - 1], stop - start))
        start = stop
    return counted


def slot_ends(count: int, bucket: Callable[[int], int]) -> list[int]:
    """For frames 0 to count - 1 whose buckets never decrease: the last frame
    of each bucket or of those before it (-1 before the first), a bisection
    a bucket, once for every lane counted with them (`count_buckets`'s `last_of`)."""
    frames = range(count)
    return [bisect_right(frames, slot, key=bucket) - 1 for slot in range(BUCKETS)]


def known_ascending(times: Sequence[float]) -> bool:
    """Whether every time is known (no NaN) and they never decrease."""
    return not math.isnan(sum(times)) and ascending(times)


def ascending(values: Sequence[Any]) -> bool:
    """Whether `values` never decrease (a NaN compares false with any other)."""
    return all(map(operator.le, values, values[1:]))


def _frame_runs(frames: Sequence[int], total: int) -> list[list[int]]:
    buckets = count_buckets(
        frames,
        lambda frame: bucket_of(frame, total),
        ordered=ascending(frames),
        last_of=lambda slot: bucket_end(slot, total),
    )
    return runs_from_buckets(((slot, first, count) for slot, first, _, count in buckets), total)


def frame_marks(result: Result) -> dict[int, list[str]]:
    """Each marked frame's marks: dropped deltas, anomalies, the refusal code."""
    marks: dict[int, list[str]] = {}
    for drop in result.dropped:
        marks.setdefault(drop["frame"], []).append(drop["reason"])
    for anomaly in result.anomalies:
        if anomaly.frame is not None:
            marks.setdefault(anomaly.frame, []).append(anomaly.kind)
    if result.refusal is not None and result.refusal.frame is not None:
        marks.setdefault(result.refusal.frame, []).append(result.refusal.code)
    return marks


def summarize(
    result: Result,
    prose: ProseFrames | None = None,
    arrived: Sequence[float] | None = None,
) -> dict[str, Any]:
    """The timeline's data for a strict result (see the module docstring);
    `prose`: the frames of its text and reasoning; `arrived`: each frame's
    arrival time by frame number (NaN: none), when the capture has them."""
    total = result.frames
    prose = prose or ProseFrames()
    every_mark = sorted(frame_marks(result).items())
    marked = every_mark[:MARKED_FRAMES]
    return {
        "total": total,
        "lanes": [
            {"position": call.position, "runs": _frame_runs(call.frames, total)}
            for call in result.calls[:LANES]
        ],
        "prose": [
            {"kind": kind, "runs": _frame_runs(frames, total)}
            for kind, frames in prose.frames.items()
            if frames
        ],
        "marks": [[frame, kinds] for frame, kinds in marked],
        "marks_cut": len(every_mark) > MARKED_FRAMES,
        "time": time_summary(result, prose, arrived, [frame for frame, _ in marked]),
    }


def time_summary(
    result: Result, prose: ProseFrames, arrived: Sequence[float] | None, marked: list[int]
) -> dict[str, Any] | None:
    """The lanes counted in buckets of arrival time, and the clock of the
    frames drawn; None when the frames have no arrival times."""
    times: Sequence[float] = arrived or ()
    if not times:
        return None
    if math.isnan(sum(times)):  # some frame has none: NaN is in every sum it is in
        known = [ms for ms in times if not math.isnan(ms)]
        if not known:
            return None
        start, end = min(known), max(known)
    else:
        start, end = min(times), max(times)
    bucket, counted = _time_buckets(times, start, end - start)
    calls = result.calls[:LANES]
    lanes = [{"position": call.position, "runs": join_runs(counted(call.frames))} for call in calls]
    prose_lanes = [
        {"kind": kind, "runs": join_runs(counted(frames))}
        for kind, frames in prose.frames.items()
        if frames
    ]
    drawn = set(marked)
    for lane in (*lanes, *prose_lanes):
        for first, last, _ in lane["runs"]:
            drawn.update((first, last))
    for call in calls:
        invalid = call.invalid_at.get("frame") if isinstance(call.invalid_at, dict) else None
        drawn.update((call.started_frame, call.settled_frame, invalid))
    if result.refusal is not None:
        drawn.add(result.refusal.frame)
    placed = sorted(frame for frame in drawn if frame is not None and bucket(frame) is not None)
    clock = [[frame, times[frame]] for frame in placed]
    return {"start": start, "end": end, "lanes": lanes, "prose": prose_lanes, "clock": clock}


def _time_buckets(
    times: Sequence[float], start: float, span: float
) -> tuple[Callable[[int], int | None], Callable[[Sequence[int]], list[Bucket]]]:
    """The time axis's `bucket(frame)` (None: the frame has no time) and
    `counted(frames)`, their frames counted in buckets: bisected where the
    frames and their times ascend, all placed."""

    def bucket(frame: int) -> int | None:
        ms = times[frame] if 0 <= frame < len(times) else math.nan
        if math.isnan(ms):
            return None
        return min(BUCKETS - 1, int((ms - start) * BUCKETS / span)) if span > 0 else 0

    # Every frame's time known and ascending (a live capture's): each bucket's
    # last frame is found once, for every lane.
    ends = slot_ends(len(times), bucket) if known_ascending(times) else None
    last_of = ends.__getitem__ if ends is not None else None

    def counted(frames: Sequence[int]) -> list[Bucket]:
        ordered = ascending(frames) and (
            not len(frames) or (0 <= frames[0] and frames[-1] < len(times))
        )
        if ordered and ends is None:
            arrived = [times[frame] for frame in frames]
            ordered = not math.isnan(sum(arrived)) and ascending(arrived)
        return count_buckets(frames, bucket, ordered=ordered, last_of=last_of)

    return bucket, counted


def arrival_times(capture: Capture) -> array[float] | None:
    """Each stored frame's arrival time by frame number (NaN where a frame
    has none); None when the capture's last frame has none (an upload), read
    in one indexed query before the frames are."""
    frames = capture.frames.order_by("-number")
    if frames.values_list("arrived_ms", flat=True).first() is None:
        return None
    times = array("d")
    rows = capture.frames.order_by("number").values_list("number", "arrived_ms")
    for number, ms in rows.iterator(chunk_size=5000):
        while len(times) < number:
            times.append(math.nan)
        times.append(math.nan if ms is None else ms)
    return times
