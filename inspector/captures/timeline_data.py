"""What the timeline picture draws, summarized once when a capture is stored.

A capture page must draw its timeline in a few milliseconds at any size, so
the picture's data is computed from the strict result while the capture is
stored (one pass over each call's frames, which the store walks anyway) and
kept with the strict assembly (`Assembly.timeline`):

    {"total": frames, "lanes": [{"position": 0, "runs": [[first, last, frames], ...]}],
     "marks": [[frame, ["anomaly", ...]], ...], "marks_cut": false}

Frames are counted per bucket (`BUCKETS` across the picture); buckets closer
than `JOIN_BUCKETS` make one run, so a call interleaved with others is one
bar, not hundreds.  At most `LANES` calls get a lane and `MARKED_FRAMES`
marked frames are kept.  Captures stored before there were timelines have
none; the page then counts the same from the database
(`pages/timeline_picture.py`), through the same `runs_from_buckets`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from inspector.assembly import Result

BUCKETS = 300  # columns the frames are counted in
# Buckets this close are one run: a call interleaved with others streams
# through the gaps.
JOIN_BUCKETS = 3
LANES = 30  # calls drawn; the picture says how many more there are
MARKED_FRAMES = 2000  # marked frames kept; the picture says when there were more


def bucket_of(frame: int, total: int) -> int:
    return frame * BUCKETS // max(total, 1)


def bucket_end(bucket: int, total: int) -> int:
    """The last frame number of a bucket."""
    return min(total - 1, -(-(bucket + 1) * total // BUCKETS) - 1)


def runs_from_buckets(buckets: Iterable[tuple[int, int, int]], total: int) -> list[list[int]]:
    """(bucket, first frame, frames) in bucket order -> [first, last, frames] runs."""
    runs: list[list[int]] = []
    previous = None
    for bucket, first, count in buckets:
        end = bucket_end(bucket, total)
        if runs and previous is not None and bucket - previous <= JOIN_BUCKETS:
            runs[-1][1] = end
            runs[-1][2] += count
        else:
            runs.append([first, end, count])
        previous = bucket
    return runs


def _call_buckets(frames: list[int], total: int) -> list[tuple[int, int, int]]:
    counted: dict[int, list[int]] = {}
    for frame in frames:
        bucket = bucket_of(frame, total)
        entry = counted.get(bucket)
        if entry is None:
            counted[bucket] = [frame, 1]
        else:
            entry[0] = min(entry[0], frame)
            entry[1] += 1
    return [(bucket, first, count) for bucket, (first, count) in sorted(counted.items())]


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


def summarize(result: Result) -> dict[str, Any]:
    """The timeline's data for a strict result (see the module docstring)."""
    total = result.frames
    lanes = [
        {
            "position": call.position,
            "runs": runs_from_buckets(_call_buckets(call.frames, total), total),
        }
        for call in result.calls[:LANES]
    ]
    marked = sorted(frame_marks(result).items())
    return {
        "total": total,
        "lanes": lanes,
        "marks": [[frame, kinds] for frame, kinds in marked[:MARKED_FRAMES]],
        "marks_cut": len(marked) > MARKED_FRAMES,
    }
