"""A late joiner's snapshot of a live capture: `SnapshotPager` paging through
every stored frame of a capture still being recorded (read back, assembled
again for the calls' state, each row rendered), as a viewer who opens the
page of a long stream gets it before its live messages.  Run from the
repository root:

    .venv/bin/python bench/snapshot.py                  # 20,000 frames
    .venv/bin/python bench/snapshot.py --frames 5000

Prints the whole snapshot's time (best of `--rounds`, wall clock: the
database's share counts) and the queries it ran.  Compare trees by running
each tree's copy alternately (`git archive REV | tar -x -C DIR`).  A scratch
SQLite database unless DATABASE_URL is set (then a scratch one: the capture
stays in it).
"""

from __future__ import annotations

import argparse
import time

from in_process import setup_django

setup_django(INSPECTOR_DEBUG="0")

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from live_viewer import frames  # noqa: E402

from inspector.live.session import LiveCapture  # noqa: E402
from inspector.live.snapshot import DONE, SnapshotPager  # noqa: E402


def snapshot(live: LiveCapture) -> tuple[float, int, int]:
    """(seconds, pages, queries) of one whole snapshot of `live`'s capture."""
    queries = 0

    def counted(execute, sql, params, many, context):  # noqa: ANN001 - Django's signature
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    start = time.perf_counter()
    pages = 0
    with connection.execute_wrapper(counted):
        pager = SnapshotPager(live.capture, -1)
        while pager.next_page() is not DONE:
            pages += 1
    return time.perf_counter() - start, pages, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    live = LiveCapture.open(stream_format="sse", title="bench snapshot")
    reads = frames(args.frames)
    for at in range(0, len(reads), 50):
        now = time.monotonic()
        live.append_reads([(read, now) for read in reads[at : at + 50]])
    runs = [snapshot(live) for _ in range(args.rounds)]
    best, pages, queries = min(runs)
    print(
        f"snapshot of a live capture of {args.frames} frames ({connection.vendor}): "
        f"best {best * 1000:.0f} ms of {args.rounds} "
        f"({', '.join(f'{run[0] * 1000:.0f}' for run in runs)}), {pages} pages, {queries} queries"
    )


if __name__ == "__main__":
    main()
