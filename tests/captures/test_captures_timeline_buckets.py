"""The timeline's buckets found by bisection (`count_buckets(ordered=True)`,
what a capture's close uses for ascending frames and times) are the buckets
counted frame by frame."""

from __future__ import annotations

import math
from array import array
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.captures import timeline_data
from inspector.captures.timeline_data import (
    BUCKETS,
    ProseFrames,
    ascending,
    bucket_end,
    bucket_of,
    count_buckets,
    slot_ends,
    summarize,
)

frame_lists = st.lists(st.integers(min_value=0, max_value=5_000), max_size=400)


@settings(max_examples=300, deadline=None)
@given(frame_lists, st.integers(min_value=1, max_value=6_000))
def test_the_frame_axis_by_bisection_counts_as_frame_by_frame(frames, total):
    frames = array("q", sorted(frames))
    bucket = lambda frame: bucket_of(frame, total)  # noqa: E731
    assert count_buckets(frames, bucket, ordered=True) == count_buckets(frames, bucket)
    # A capture's frames are numbered below its total: each bucket's last frame is known.
    frames = array("q", [frame for frame in frames if frame < total])
    last_of = lambda slot: bucket_end(slot, total)  # noqa: E731
    by_last = count_buckets(frames, bucket, ordered=True, last_of=last_of)
    assert by_last == count_buckets(frames, bucket)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=300),
    st.data(),
)
def test_the_time_axis_by_bisection_counts_as_frame_by_frame(steps, data):
    times = array("d", sorted(steps))
    frames = sorted(data.draw(st.lists(st.integers(0, len(times) - 1), max_size=300)))
    start, span = times[0], times[-1] - times[0]

    def bucket(frame):
        ms = times[frame]
        return min(BUCKETS - 1, int((ms - start) * BUCKETS / span)) if span > 0 else 0

    assert count_buckets(frames, bucket, ordered=True) == count_buckets(frames, bucket)
    ends = slot_ends(len(times), bucket)
    by_ends = count_buckets(frames, bucket, ordered=True, last_of=ends.__getitem__)
    assert by_ends == count_buckets(frames, bucket)


def calls_result(frames_of_calls, total):
    calls = [
        SimpleNamespace(
            position=n, frames=array("q", frames), started_frame=None, settled_frame=None,
            invalid_at=None,
        )
        for n, frames in enumerate(frames_of_calls)
    ]  # fmt: skip
    return SimpleNamespace(frames=total, calls=calls, dropped=[], anomalies=[], refusal=None)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(frame_lists, min_size=1, max_size=4),
    st.lists(st.floats(min_value=0, max_value=1e5) | st.just(math.nan), max_size=60),
    st.booleans(),
    st.sampled_from([5_001, 4_990]),
)
def test_a_summary_is_the_same_with_bisection_or_without(
    frames_of_calls, pauses, ordered_times, timed
):
    total = 5_001
    frames_of_calls = [sorted(set(frames)) for frames in frames_of_calls]
    # Arrival times: ascending (a live capture's) or in any order, some unknown (NaN);
    # and sometimes fewer than the frames (the last frames' unknown: not placed).
    times = [0.0] * timed
    for n, pause in enumerate(pauses):
        times[n * (timed // max(1, len(pauses)))] = pause
    times = array("d", sorted(times) if ordered_times else times)
    result = calls_result(frames_of_calls, total)
    prose = ProseFrames()
    prose.frames["text"].extend(frames_of_calls[0])
    fast = summarize(result, prose, times)
    original = timeline_data.ascending
    timeline_data.ascending = lambda values: False  # every count frame by frame
    try:
        slow = summarize(result, prose, times)
    finally:
        timeline_data.ascending = original
    assert fast == slow


def test_ascending_says_no_to_a_descent_and_to_nan_among_others():
    assert ascending([]) and ascending([1]) and ascending([1, 1, 2])
    assert not ascending([2, 1]) and not ascending([1.0, math.nan, 2.0])
    assert not ascending([math.nan, 2.0]) and not ascending([1.0, math.nan])
