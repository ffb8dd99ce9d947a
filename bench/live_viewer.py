"""Frame-to-viewer latency of live capture, on loopback.

Starts daphne (a subprocess, on a temporary SQLite file unless --database-url
is given), opens a viewer websocket on `/ws/captures/<slug>/`, pushes a stream
through the ingest websocket `/ws/ingest/` one frame per message at a paced
rate, and records, for every frame, the time its last byte was handed to the
socket and the time the viewer received the message holding it.  Both clocks
are this process's `time.perf_counter()`.

    .venv/bin/python bench/live_viewer.py                 # 5,000 frames at 1,000 frames/s
    .venv/bin/python bench/live_viewer.py --frames 20000 --rate 2000
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/live_viewer.py --viewer-process

Prints p50/p95/p99/max latency, frames lost and frames seen twice; targets:
p99 <= 50 ms, 0 lost.  Figures also go to bench-results/live_viewer.json.
Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from server import daphne as daphne_server
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
TARGET_P99_MS = 50.0


# --- the stream ---------------------------------------------------------------------------


def frames(count: int, calls: int = 4) -> list[bytes]:
    """`count` SSE frames: a role frame, `calls` parallel tool calls whose
    argument fragments interleave, a finish frame and [DONE]."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1718000000}
    base["model"] = "gpt-4o-mini"

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"

    out = [chunk({"role": "assistant", "content": None})]
    for i in range(calls):
        header = {"index": i, "id": f"call_{i}", "type": "function"}
        header["function"] = {"name": "write_note", "arguments": '{"text": "'}
        out.append(chunk({"tool_calls": [header]}))
    body = count - len(out) - calls - 2
    for n in range(max(0, body)):
        piece = {"index": n % calls, "function": {"arguments": f"word{n} "}}
        out.append(chunk({"tool_calls": [piece]}))
    for i in range(calls):
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": '"}'}}]}))
    out.append(chunk({}, "tool_calls"))
    out.append(b"data: [DONE]\n\n")
    return out


# --- the server ---------------------------------------------------------------------------


@contextlib.contextmanager
def daphne(env: dict[str, str], log_path: Path):
    """The websocket base URL of a daphne serving the inspector with `env`."""
    with daphne_server(env, log_path) as (url, _):
        yield url.replace("http://", "ws://")


# --- the run ------------------------------------------------------------------------------


async def run(
    ingest_base: str,
    viewer_base: str,
    stream: list[bytes],
    rate: float,
    limit: float,
    batch: float,
):
    sent: list[float | None] = [None] * len(stream)
    received: dict[int, float] = {}
    repeats = 0
    messages = 0
    outcome = None

    async with connect(ingest_base + "/ws/ingest/", max_size=None) as ingest:
        await ingest.send(orjson.dumps({"open": {"title": "bench live viewer"}}).decode())
        opened = orjson.loads(await ingest.recv())
        slug = opened["slug"]
        async with connect(f"{viewer_base}/ws/captures/{slug}/?after=-1", max_size=None) as viewer:
            snapshot = orjson.loads(await viewer.recv())
            assert snapshot["type"] == "snapshot" and not snapshot["frames"], snapshot

            async def watch() -> None:
                nonlocal repeats, messages, outcome
                while True:
                    message = orjson.loads(await viewer.recv())
                    now = time.perf_counter()
                    messages += 1
                    for frame in message.get("frames", []):
                        if frame["number"] in received:
                            repeats += 1
                        else:
                            received[frame["number"]] = now
                    if message["type"] == "finished":
                        outcome = message["outcome"]
                        return

            watcher = asyncio.ensure_future(watch())
            start = time.perf_counter()
            number = 0
            while number < len(stream):
                due = start + number / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                # The frames due by now: one, or with --batch-ms what a reader of an
                # upstream would have got in one read.  Each frame's latency counts
                # from its due time, so waiting for a batch is part of it.
                now = time.perf_counter()
                last = number
                while batch and last + 1 < len(stream) and start + (last + 1) / rate <= now + batch:
                    last += 1
                if batch:
                    remaining = start + last / rate - time.perf_counter()
                    if remaining > 0:
                        await asyncio.sleep(remaining)
                await ingest.send(b"".join(stream[number : last + 1]))
                handed = time.perf_counter()
                for n in range(number, last + 1):
                    sent[n] = start + n / rate if batch else handed
                number = last + 1
                if handed - start > limit:
                    print(f"stopped sending after {limit} s at frame {number}", file=sys.stderr)
                    break
            send_seconds = time.perf_counter() - start
            await ingest.send(orjson.dumps({"close": True}).decode())
            closed = orjson.loads(await asyncio.wait_for(ingest.recv(), limit + 60))
            close_wait = time.perf_counter() - start - send_seconds
            try:
                await asyncio.wait_for(watcher, 30)
            except TimeoutError:
                watcher.cancel()
                print("the viewer never got the finished message", file=sys.stderr)
    return {
        "slug": slug,
        "sent": sent,
        "received": received,
        "repeats": repeats,
        "messages": messages,
        "outcome": outcome,
        "closed": closed,
        "send_seconds": send_seconds,
        "close_wait": close_wait,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=5000, help="frames in the stream (5000)")
    parser.add_argument("--rate", type=float, default=1000.0, help="frames per second (1000)")
    parser.add_argument("--limit", type=float, default=60.0, help="stop sending after S seconds")
    parser.add_argument(
        "--batch-ms",
        type=float,
        default=0.0,
        help="send the frames due within this many ms in one message, like one read of an"
        " upstream (default 0: one frame per message)",
    )
    parser.add_argument(
        "--database-url", default="", help="default: a new SQLite file in a temporary folder"
    )
    parser.add_argument(
        "--viewer-process",
        action="store_true",
        help="viewer on a second daphne process (needs REDIS_URL: the layer joins them)",
    )
    parser.add_argument("--out", default=str(ROOT / "bench-results" / "live_viewer.json"))
    parser.add_argument("--log", default="", help="keep daphne's log in this file")
    args = parser.parse_args()
    if args.viewer_process and not os.environ.get("REDIS_URL"):
        raise SystemExit("--viewer-process needs REDIS_URL")

    stream = frames(args.frames)
    with tempfile.TemporaryDirectory(prefix="live-viewer-bench-") as tmp:
        database_url = args.database_url or f"sqlite:///{tmp}/bench.sqlite3"
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "inspector.settings"}
        env["DATABASE_URL"] = database_url
        env["INSPECTOR_DEBUG"] = "0"
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        migrate = [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
        subprocess.run(migrate, cwd=ROOT, env=env, check=True)
        log = Path(args.log) if args.log else Path(tmp) / "daphne.log"
        with contextlib.ExitStack() as stack:
            ingest_base = stack.enter_context(daphne(env, log))
            viewer_base = ingest_base
            if args.viewer_process:
                viewer_base = stack.enter_context(daphne({**env, "BENCH_PROCESS": "B"}, log))
            result = asyncio.run(
                run(ingest_base, viewer_base, stream, args.rate, args.limit, args.batch_ms / 1000)
            )
        log_tail = log.read_text(errors="replace")[-2000:]

    sent, received = result["sent"], result["received"]
    pushed = [n for n, t in enumerate(sent) if t is not None]
    latencies = [(received[n] - sent[n]) * 1000 for n in pushed if n in received]
    lost = [n for n in pushed if n not in received]
    by_latency = sorted(
        ((round((received[n] - sent[n]) * 1000, 1), n) for n in pushed if n in received),
        reverse=True,
    )
    figures = {
        "frames": len(pushed),
        "rate_asked": args.rate,
        "rate_achieved": round(len(pushed) / result["send_seconds"], 1),
        "batch_ms": args.batch_ms,
        "viewer_messages": result["messages"],
        # How long the server took to answer `close` after the last frame was sent: its backlog.
        "ingest_backlog_ms": round(result["close_wait"] * 1000, 1),
        "frames_lost": len(lost),
        "frames_twice": result["repeats"],
        "outcome": result["outcome"],
        "p50_ms": round(percentile(latencies, 50), 2),
        "p95_ms": round(percentile(latencies, 95), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "max_ms": round(max(latencies), 2) if latencies else None,
        "mean_ms": round(statistics.fmean(latencies), 2) if latencies else None,
        "slowest": [{"frame": n, "ms": ms} for ms, n in by_latency[:5]],
        "database": "sqlite (temporary file)" if not args.database_url else "DATABASE_URL",
        "channel_layer": "redis" if os.environ.get("REDIS_URL") else "in-memory",
        "viewer_process": "second daphne" if args.viewer_process else "same daphne",
    }
    met = figures["p99_ms"] <= TARGET_P99_MS and not lost and not result["repeats"]
    print(f"live viewer latency, {figures['frames']} frames at {args.rate:g}/s asked", end="")
    print(f" ({figures['rate_achieved']}/s achieved), {figures['channel_layer']} channel layer,")
    how = f"{args.batch_ms:g} ms reads per message" if args.batch_ms else "one frame per message"
    print(f"  {how}, {figures['viewer_process']}, {figures['database']}")
    print(
        f"  viewer messages {figures['viewer_messages']}  outcome {figures['outcome']}  "
        f"ingest backlog at close {figures['ingest_backlog_ms']} ms"
    )
    print(
        f"  latency ms: p50 {figures['p50_ms']}  p95 {figures['p95_ms']}  "
        f"p99 {figures['p99_ms']}  max {figures['max_ms']}  mean {figures['mean_ms']}"
    )
    print(f"  frames lost {figures['frames_lost']}  frames seen twice {figures['frames_twice']}")
    slowest = ", ".join(f"#{s['frame']} {s['ms']} ms" for s in figures["slowest"])
    print(f"  slowest frames: {slowest}")
    print(f"  target p99 <= {TARGET_P99_MS:g} ms and 0 lost: {'met' if met else 'MISSED'}")
    if lost:
        print(f"  first lost frames: {lost[:10]}", file=sys.stderr)
        print(log_tail, file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    environment = {"python": platform.python_version(), "nproc": os.cpu_count()}
    out.write_text(json.dumps({**figures, "met": met, "environment": environment}, indent=2))
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
