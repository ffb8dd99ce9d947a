"""A live frame's cost inside the recorder, without sockets: `LiveCapture`'s
`append_reads` (assemble, file what each frame did, render its row, store the
batch) and `due_cards`, over `live_viewer.py`'s stream, in batches of
`--reads` reads, then `close`.  Run from the repository root:

    .venv/bin/python bench/live_recorder.py                  # 20,000 frames, 20 reads a batch
    .venv/bin/python bench/live_recorder.py --profile        # where the time goes (cProfile)

Prints microseconds per frame (best of `--rounds` captures, process CPU time, so
the figure holds on a shared machine) for the batches and for the close, and
each close's wall time (the close writes to the database).  Compare
trees by running each tree's copy of this script alternately (`git archive REV |
tar -x -C DIR`): a second tree can't be imported beside this one in one Django
process.  A scratch SQLite database unless DATABASE_URL is set.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from in_process import setup_django

setup_django(INSPECTOR_DEBUG="0")  # as in production: no SQL kept per query

from django.core.management import call_command  # noqa: E402
from live_viewer import frames  # noqa: E402

from inspector.live.session import LiveCapture  # noqa: E402


def record(reads: list[bytes], per_batch: int) -> tuple[float, float, float]:
    """(CPU seconds of the batches, of the close; wall seconds of the close)
    for one live capture."""
    live = LiveCapture.open(stream_format="sse")
    start = time.process_time()
    for at in range(0, len(reads), per_batch):
        now = time.monotonic()
        live.append_reads([(read, now) for read in reads[at : at + per_batch]])
        live.due_cards()
    batches = time.process_time() - start
    start, wall = time.process_time(), time.perf_counter()
    live.close()
    return batches, time.process_time() - start, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=20, help="reads per batch (20)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one capture")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    reads = frames(args.frames)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(record, reads, args.reads)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return
    runs = [record(reads, args.reads) for _ in range(args.rounds)]
    best = min(runs)
    per_frame = [seconds / len(reads) * 1e6 for seconds in best[:2]]
    shape = f"{len(reads)} frames, {args.reads} reads a batch"
    print(f"live recorder, {shape}, CPU best of {args.rounds}")
    print(f"  batches: {per_frame[0]:.1f} us/frame   close: {per_frame[1]:.1f} us/frame")
    walls = ", ".join(f"{run[2] * 1000:.0f}" for run in runs)
    print(f"  close, wall time of each capture: {walls} ms")


if __name__ == "__main__":
    main()
