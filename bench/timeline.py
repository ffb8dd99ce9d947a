"""The timeline picture's cost against the capture's size.

Run from the repository root (a throw-away SQLite file unless DATABASE_URL
is set, which must then name a scratch database):

    .venv/bin/python bench/timeline.py                 # 1k, 10k and 100k frames
    .venv/bin/python bench/timeline.py --frames 1000,20000

For each size it stores one generated stream (8 interleaved parallel calls,
`bench/assemble.py`'s generator) with an arrival time per frame (in bursts
with three pauses, as a live capture has them) and times
`timeline_picture()` from the summary stored with the capture (one query
and the SVG) on each axis, frame number ("frames") and arrival time
("time"), over `--rounds` calls, side by side, next to the capture page's own
server time for the same capture, and the same picture counted from the
database as for a capture stored before timelines ("counted", frame axis
only); it prints best and median milliseconds, the picture's share of the
page, the SVG's size, and what the time axis adds to storing the capture
(reading the frames' arrival times, once, "clock read").  Target: under 50 ms
for any capture on either axis, and about the same at 100k frames as at 1k
(the work is bucketed, never per frame).
"""

from __future__ import annotations

import argparse
import statistics
import time

from in_process import setup_django

setup_django(INSPECTOR_MAX_UPLOAD_BYTES=str(200 * 1024 * 1024))

from assemble import parallel_stream  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from inspector.assembly import STRICT  # noqa: E402
from inspector.captures.pages.timeline_picture import FRAMES, TIME, timeline_picture  # noqa: E402
from inspector.captures.store import store_stream  # noqa: E402
from inspector.captures.timeline_data import arrival_times  # noqa: E402


def timed(function, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        out.append((time.perf_counter() - start) * 1000)
    return out


def bursts(frames: int) -> list[float]:
    """Arrival times (ms) of `frames` frames: 0.2 ms apart, in four bursts
    with a second's pause between them."""
    burst = max(frames // 4, 1)
    return [n * 0.2 + 1000.0 * (n // burst) for n in range(frames)]


def measure(frames: int, rounds: int, client: Client) -> dict:
    data, _ = parallel_stream(frames)
    capture = store_stream(data, stream_format="sse", arrived_ms=bursts(frames + 16))
    strict = capture.assemblies.get(policy=STRICT)
    assert strict.timeline["time"], "no time axis stored"
    calls = strict.calls.count()
    row: dict = {"frame_count": capture.frame_count}
    for axis in (FRAMES, TIME):
        row[f"svg_{axis}"] = len(timeline_picture(capture, strict, calls, axis))
        row[axis] = timed(lambda axis=axis: timeline_picture(capture, strict, calls, axis), rounds)
    page = capture.get_absolute_url()
    row["page"] = timed(lambda: client.get(page), max(3, rounds // 4))
    row["page_time"] = timed(lambda: client.get(page + "?timeline=time"), max(3, rounds // 4))
    row["clock_read"] = timed(lambda: arrival_times(capture), 3)
    strict.timeline = None  # as a capture stored before timelines: counted by queries
    row["counted"] = timed(lambda: timeline_picture(capture, strict, calls), max(3, rounds // 4))
    capture.delete()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    client = Client()
    print(
        f"{'frames':>8} {'picture best/median ms: frames':>31} {'time':>13} "
        f"{'page median ms: frames':>23} {'time':>6} {'share':>6} {'counted':>8} "
        f"{'clock read':>10} {'svg frames / time':>18}"
    )
    for frames in (int(n) for n in args.frames.split(",")):
        row = measure(frames, args.rounds, client)
        median = {key: statistics.median(row[key]) for key in ("page", "page_time", "counted")}
        cells = [f"{min(row[a]):.1f} / {statistics.median(row[a]):.1f}" for a in (FRAMES, TIME)]
        worst = max(statistics.median(row[FRAMES]), statistics.median(row[TIME]))
        print(
            f"{row['frame_count']:>8} {cells[0]:>31} {cells[1]:>13} {median['page']:>23.1f} "
            f"{median['page_time']:>6.1f} {worst / median['page']:>6.0%} "
            f"{median['counted']:>8.1f} {min(row['clock_read']):>10.1f} "
            f"{row['svg_frames']:>8,} / {row['svg_time']:,} B"
        )


if __name__ == "__main__":
    main()
