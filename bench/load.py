"""Load on loopback: concurrent uploads and proxied streams against one daphne process;
frames lost (target: 0), captures left live or half-stored (target: 0), server memory.

Run from the repository root:

    .venv/bin/python bench/load.py                                  # 50 uploads, 10 streams
    .venv/bin/python bench/load.py --uploads 200 --streams 40 --rounds 3
    .venv/bin/python bench/load.py --database-url postgres://postgres@127.0.0.1:5432/load \\
        --redis-url redis://127.0.0.1:6379/0

Everything runs on loopback, in bounded time (`--timeout` per round):

* a fake upstream (`inspector.live.fake_upstream`) in a thread of this process replays a
  tool-call stream of `--frames` frames, one every `--pace-ms`;
* a daphne subprocess serves the inspector on a scratch SQLite database (or
  `--database-url`, which must name a scratch database: it is migrated and filled), with
  INSPECTOR_UPSTREAMS pointing at the fake;
* each round, `--uploads` distinct generated streams (`--min-frames`..`--max-frames` frames)
  are POSTed to /api/captures while `--streams` streamed chat completions are read to the
  end through /proxy/fake/v1/chat/completions, all at once, one thread each.

After each round every capture is checked (tests/hardening/hardening_load.py `verify`):
uploads answered 201 and stored with the frame count `assemble` gives for their bytes;
proxied streams relayed byte for byte and stored with the scenario's frame count and
outcome; no capture live; none without its 2 assemblies or with frame rows != frame_count.
The daphne process's VmRSS (and VmHWM, its peak) is read from /proc before and after.

Figures go to stdout and to bench-results/load.json (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "load.json"
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "hardening")]

from hardening_load import rss_kb, run, upload_set, verify, write_scenario  # noqa: E402
from server import daphne as daphne_server  # noqa: E402
from server import scratch_site  # noqa: E402

from inspector.live.fake_upstream import FakeUpstream  # noqa: E402


def load_round(base: str, pid: int, number: int, args: Any, scenario: Any) -> dict[str, Any]:
    """One round of concurrent uploads and proxied streams, checked and printed."""
    uploads = upload_set(args.uploads, args.min_frames, args.max_frames, seed=number)
    before = rss_kb(pid)
    load = run(base, uploads, args.streams, timeout=args.timeout)
    figures = verify(load, uploads, scenario)
    after = rss_kb(pid)
    figures |= {
        "round": number,
        "rss_before_mb": round(before["VmRSS"] / 1024, 1),
        "rss_after_mb": round(after["VmRSS"] / 1024, 1),
        "rss_peak_mb": round(after["VmHWM"] / 1024, 1),
        "upload_bytes": sum(len(data) for data in uploads),
    }
    statuses = ", ".join(f"{k}: {v}" for k, v in figures["upload_statuses"].items())
    print(
        f"round {number}: {figures['uploads']} uploads ({statuses})"
        f" + {figures['streams']} streams in {figures['seconds']} s;"
        f" frames {figures['frames_stored']}/{figures['frames_expected']} stored"
        f" (lost {figures['frames_lost']}); live {figures['captures_live']},"
        f" half-stored {figures['captures_half_stored']};"
        f" RSS {figures['rss_before_mb']} -> {figures['rss_after_mb']} MB"
        f" (peak {figures['rss_peak_mb']} MB)",
        flush=True,
    )
    for problem in figures["problems"]:
        print("  problem:", problem[:400])
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uploads", type=int, default=50, help="concurrent uploads (50)")
    parser.add_argument("--streams", type=int, default=10, help="concurrent proxied streams (10)")
    parser.add_argument("--frames", type=int, default=300, help="frames per proxied stream (300)")
    parser.add_argument("--pace-ms", type=float, default=2, help="pause between frames (2)")
    parser.add_argument("--min-frames", type=int, default=50, help="smallest upload (50 frames)")
    parser.add_argument("--max-frames", type=int, default=500, help="largest upload (500 frames)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds, one after another (1)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per round (120)")
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="daphne's listen backlog (default: Twisted's 50, which overflows at a few hundred "
        "simultaneous connections: the client sees ECONNRESET)",
    )
    parser.add_argument("--database-url", default="", help="default: a scratch SQLite file")
    parser.add_argument("--redis-url", default="", help="channel layer (default: in-memory)")
    args = parser.parse_args()

    scratch, env = scratch_site("bench-load-", args.database_url, args.redis_url)
    database_url = env["DATABASE_URL"]
    from django.db import connection

    scenario = write_scenario(scratch / "scenarios", args.frames, args.pace_ms)

    fake = FakeUpstream(scratch / "scenarios").start()
    env["INSPECTOR_UPSTREAMS"] = f"fake={fake.url}"
    log = scratch / "daphne.log"
    rounds: list[dict[str, Any]] = []
    failure = None
    try:
        with daphne_server(env, log, backlog=args.backlog) as (base, daphne):
            run(base, upload_set(2, seed=99), 1, timeout=args.timeout)  # warm-up
            first = rss_kb(daphne.pid)
            for number in range(args.rounds):
                figures = load_round(base, daphne.pid, number + 1, args, scenario)
                rounds.append(figures)
                if figures["problems"]:
                    failure = f"round {number + 1}: {len(figures['problems'])} problems"
    finally:
        fake.stop()
    report = {
        "rounds": rounds,
        "rss_start_mb": round(first["VmRSS"] / 1024, 1) if rounds else None,
        "failure": failure,
        "settings": vars(args) | {"database_url": database_url.split("@")[-1]},
        "environment": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "database": connection.vendor,
            "channel_layer": "redis" if args.redis_url else "in-memory",
        },
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    if failure:
        print("FAILED:", failure, f"(daphne log: {log})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
