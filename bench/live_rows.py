"""A live frame's row, rendered: what `row_stamps.live_row_html` costs a row,
against the row template rendered the slow way.

The rows are those of a real live capture of `live_viewer.py`'s stream (its
calls, marks and what each frame did, as `LiveCapture` renders them): one
capture is recorded with the renderer's arguments noted, then the rows are
rendered again from the notes, `--rounds` times.  Run from the repository root:

    .venv/bin/python bench/live_rows.py                # 20,000 rows
    .venv/bin/python bench/live_rows.py --profile      # where the time goes (cProfile)

Prints microseconds a row (best of `--rounds`, process CPU time) for the stamps
and, on every tenth row, for the template.  Compare trees by running each
tree's copy alternately (`git archive REV | tar -x -C DIR`).  A scratch SQLite
database unless DATABASE_URL is set.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from in_process import setup_django

setup_django(INSPECTOR_DEBUG="0")

from django.core.management import call_command  # noqa: E402
from live_viewer import frames  # noqa: E402

from inspector.live import broadcast, row_stamps  # noqa: E402
from inspector.live.session import LiveCapture  # noqa: E402

Call = tuple[tuple, dict]


def noted_rows(reads: list[bytes]) -> list[Call]:
    """The arguments of each row a live capture of `reads` renders."""
    noted: list[Call] = []
    render = broadcast.live_row_html

    def noting(*args, **kwargs):
        noted.append((args, kwargs))
        return render(*args, **kwargs)

    broadcast.live_row_html = noting
    try:
        live = LiveCapture.open(stream_format="sse")
        for at in range(0, len(reads), 20):
            now = time.monotonic()
            live.append_reads([(read, now) for read in reads[at : at + 20]])
        live.close()
    finally:
        broadcast.live_row_html = render
    return noted


def us_a_row(render, rows: list[Call], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for args, kwargs in rows:
            render(*args, **kwargs)
        best = min(best, time.process_time() - start)
    return best / len(rows) * 1e6


def template_row(slug, number, kind, raw, arrived_ms, **kwargs) -> str:
    raw = raw.replace("\x00", "\ufffd")
    row = row_stamps.frame_row(
        slug, number, kind, raw[: row_stamps.RAW_SHOWN], len(raw), arrived_ms, **kwargs
    )
    return row_stamps.render(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile one round")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    rows = noted_rows(frames(args.frames))
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(us_a_row, row_stamps.live_row_html, rows, 1)
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
        return
    for args_, kwargs in rows[::97]:  # the stamps give the template's rows
        assert row_stamps.live_row_html(*args_, **kwargs) == template_row(*args_, **kwargs)
    stamps = us_a_row(row_stamps.live_row_html, rows, args.rounds)
    template = us_a_row(template_row, rows[::10], args.rounds)
    print(f"live rows, {len(rows)} rows, CPU best of {args.rounds}")
    print(f"  stamps: {stamps:.2f} us/row   template: {template:.1f} us/row")


if __name__ == "__main__":
    main()
