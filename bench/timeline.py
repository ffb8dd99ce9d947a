"""The timeline picture's cost against the capture's size.

Run from the repository root (a throw-away SQLite file unless DATABASE_URL
is set, which must then name a scratch database):

    .venv/bin/python bench/timeline.py                 # 1k, 10k and 100k frames
    .venv/bin/python bench/timeline.py --frames 1000,20000

For each size it stores one generated stream (8 interleaved parallel calls,
`bench/assemble.py`'s generator) and times `timeline_picture()` from the
summary stored with the capture (one query and the SVG) over `--rounds`
calls, next to the capture page's own server time for the same capture, and
the same picture counted from the database as for a capture stored before
timelines ("counted"); it prints best and median milliseconds, the
picture's share of the page, and the SVG's size.  Target: under 50 ms
for any capture, and about the same at 100k frames as at 1k (the work is
bucketed, never per frame).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
os.environ.setdefault("INSPECTOR_MAX_UPLOAD_BYTES", str(200 * 1024 * 1024))

import django  # noqa: E402

django.setup()

from assemble import parallel_stream  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from inspector.assembly import STRICT  # noqa: E402
from inspector.captures.intake import store_upload  # noqa: E402
from inspector.captures.pages.timeline_picture import timeline_picture  # noqa: E402


def timed(function, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        out.append((time.perf_counter() - start) * 1000)
    return out


def measure(frames: int, rounds: int, client: Client) -> dict:
    data, _ = parallel_stream(frames)
    (capture,) = store_upload(data, name=f"timeline-{frames}.sse")
    strict = capture.assemblies.get(policy=STRICT)
    calls = strict.calls.count()
    svg = timeline_picture(capture, strict, calls)
    picture = timed(lambda: timeline_picture(capture, strict, calls), rounds)
    page = timed(lambda: client.get(capture.get_absolute_url()), max(3, rounds // 4))
    strict.timeline = None  # as a capture stored before timelines: counted by queries
    counted = timed(lambda: timeline_picture(capture, strict, calls), max(3, rounds // 4))
    capture.delete()
    return {
        "frames": frames,
        "picture": picture,
        "counted": counted,
        "page": page,
        "svg_bytes": len(svg),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    client = Client()
    print(
        f"{'frames':>8} {'picture best/median ms':>24} {'page median ms':>15} {'share':>6} "
        f"{'counted median ms':>18} svg"
    )
    for frames in (int(n) for n in args.frames.split(",")):
        row = measure(frames, args.rounds, client)
        best, median = min(row["picture"]), statistics.median(row["picture"])
        page = statistics.median(row["page"])
        print(
            f"{frames:>8} {best:>11.1f} / {median:<10.1f} {page:>15.1f} "
            f"{median / page:>6.0%} {statistics.median(row['counted']):>18.1f} "
            f"{row['svg_bytes']:,} B"
        )


if __name__ == "__main__":
    main()
