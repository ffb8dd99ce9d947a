"""A live frame's cost inside the recorder, without sockets: `LiveCapture`'s
`append_reads` (assemble, file what each frame did, render its row, store the
batch) and `due_cards`, over `live_viewer.py`'s stream, in batches of
`--reads` reads, then `close`.  Run from the repository root:

    .venv/bin/python bench/live_recorder.py                  # 20,000 frames, 20 reads a batch
    .venv/bin/python bench/live_recorder.py --profile        # where the time goes (cProfile)
    .venv/bin/python bench/live_recorder.py --joiners        # a joining viewer's snapshot

Prints microseconds per frame (best of `--rounds` captures, process CPU time, so
the figure holds on a shared machine) for the batches and for the close, and
each close's wall time (the close writes to the database).  `--joiners`
instead times, every `--join-every` frames of one capture, a viewer's
snapshot from the recording's memory (`LiveCapture.snapshot`, its page
rendered `--behind` frames ago): CPU ms (best of five), its size and how many
cards it rendered; the recording's clock is the stream's own (`--rate`
frames/s), as the cards' throttle would see it live.  Compare
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

from inspector.captures.pages import live_cards  # noqa: E402
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


def joiners(reads: list[bytes], per_batch: int, every: int, behind: int, rate: float) -> None:
    """Print what a joining viewer's snapshot costs along one capture."""
    live = LiveCapture.open(stream_format="sse", keep_rows=True)
    clock = [0.0]
    live.rows.clock = lambda: clock[0]
    live.card_budget = live_cards.CardBudget(clock=lambda: clock[0])
    renders = [0]
    render = live_cards.CardToRender.render

    def counted(card: live_cards.CardToRender) -> live_cards.Rendered:
        renders[0] += 1
        return render(card)

    print(f"a joiner's snapshot from memory, its page rendered {behind} frames ago (CPU best of 5)")
    live_cards.CardToRender.render = counted
    try:
        for at in range(0, len(reads), per_batch):
            clock[0] = at / rate
            live.append_reads([(read, time.monotonic()) for read in reads[at : at + per_batch]])
            live.due_cards()
            if not at or at % every >= per_batch:
                continue
            costs = []
            for _ in range(5):
                renders[0], start = 0, time.process_time()
                message, _ = live.snapshot(max(-1, at - behind))
                costs.append(time.process_time() - start)
            size = sum(len(frame["html"]) for frame in message["frames"])
            size += sum(len(call["html"]) for call in message["calls"])
            print(
                f"  at frame {at}: {min(costs) * 1000:.2f} ms, {len(message['frames'])} rows,"
                f" {len(message['calls'])} cards ({renders[0]} rendered), {size // 1024} KiB"
            )
    finally:
        live_cards.CardToRender.render = render
    live.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--reads", type=int, default=20, help="reads per batch (20)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one capture")
    parser.add_argument("--joiners", action="store_true", help="a joiner's snapshot, timed")
    parser.add_argument("--join-every", type=int, default=2500, help="frames (2,500)")
    parser.add_argument("--behind", type=int, default=300, help="frames (300)")
    parser.add_argument("--rate", type=float, default=5000.0, help="frames/s (5,000)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    reads = frames(args.frames)
    if args.joiners:
        joiners(reads, args.reads, args.join_every, args.behind, args.rate)
        return
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
