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

    .venv/bin/python bench/live_viewer.py --captures 20 --rate 500   # 20 at once
    .venv/bin/python bench/live_viewer.py --warm-up 2000   # a server that has recorded before
    .venv/bin/python bench/live_viewer.py --timeline 100   # the latency over the run, by 100 ms

Prints the rate asked and achieved, p50/p95/p99/max latency, frames lost and
seen twice, and how long after the last frame was sent the viewer had it;
targets (issue 13): p99 <= 20 ms, the last frame <= 100 ms, 0 lost.
Figures also go to bench-results/live_viewer.json.
Only 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
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
from server import cpu_seconds, has_recording_process
from server import daphne as daphne_server
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
TARGET_P99_MS = 20.0  # issue 13
TARGET_DONE_MS = 100.0  # the viewer has the last frame this soon after it was sent


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
    """(websocket base URL, process) of a daphne serving the inspector with `env`."""
    with daphne_server(env, log_path) as (url, process):
        yield url.replace("http://", "ws://"), process


# --- the run ------------------------------------------------------------------------------


async def one_capture(
    ingest_base: str,
    viewer_base: str,
    stream: list[bytes],
    rate: float,
    limit: float,
    batch: float,
    start_at: float,
) -> dict:
    """One capture: opened, watched, sent at `rate` from `start_at` (so that
    several start together), closed."""
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
            await asyncio.sleep(max(0.0, start_at - time.perf_counter()))
            start = time.perf_counter()
            await send_paced(ingest, stream, sent, rate, limit, batch, start)
            send_seconds = time.perf_counter() - start
            last_sent = max(t for t in sent if t is not None)
            await ingest.send(orjson.dumps({"close": True}).decode())
            closed = orjson.loads(await asyncio.wait_for(ingest.recv(), limit + 60))
            close_wait = time.perf_counter() - last_sent
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


async def send_paced(
    ingest, stream: list[bytes], sent: list, rate: float, limit: float, batch: float, start: float
) -> None:
    """Send the stream at `rate`: frame n is due at start + n / rate, and all
    frames due by now go out at once, one message each (or, with `batch`,
    one message per `batch` seconds of frames), so the achieved rate is the
    one asked for even when a sleep or a send takes longer than a frame's
    share.  A frame's send time is when it was handed to the socket (with
    `batch`, when it was due: waiting for the batch is part of its latency)."""
    number = 0
    while number < len(stream):
        delay = start + number / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        now = time.perf_counter()
        due = min(len(stream), int((now - start) * rate) + 1)  # frames due by now
        if batch:
            due = min(len(stream), max(due, int((now + batch - start) * rate) + 1))
            remaining = start + (due - 1) / rate - time.perf_counter()
            if remaining > 0:
                await asyncio.sleep(remaining)
            await ingest.send(b"".join(stream[number:due]))
            for n in range(number, due):
                sent[n] = start + n / rate
        else:
            for n in range(number, max(due, number + 1)):
                await ingest.send(stream[n])
                sent[n] = time.perf_counter()
            due = max(due, number + 1)
        number = due
        if time.perf_counter() - start > limit:
            print(f"stopped sending after {limit} s at frame {number}", file=sys.stderr)
            return


async def run(
    ingest_bases: list[str],
    viewer_bases: list[str],
    stream: list[bytes],
    rate: float,
    limit: float,
    batch: float,
    captures: int = 1,
) -> list[dict]:
    """`captures` captures at once, each sent at `rate`; capture i's ingest
    socket on `ingest_bases[i % n]`, its viewer on `viewer_bases[i % n]`."""
    start_at = time.perf_counter() + 0.5 + 0.05 * captures  # all open and watched by then
    n = len(ingest_bases)
    runs = [
        one_capture(ingest_bases[i % n], viewer_bases[i % n], stream, rate, limit, batch, start_at)
        for i in range(captures)
    ]
    return await asyncio.gather(*runs)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def summary(results: list[dict], args: argparse.Namespace) -> dict:
    """The figures of all captures together (latencies pooled)."""
    latencies: list[float] = []
    by_latency: list[tuple[float, int]] = []
    lost: list[int] = []
    rates, done_after, close_after = [], [], []
    for result in results:
        sent, received = result["sent"], result["received"]
        pushed = [n for n, t in enumerate(sent) if t is not None]
        latencies += [(received[n] - sent[n]) * 1000 for n in pushed if n in received]
        by_latency += [
            (round((received[n] - sent[n]) * 1000, 1), n) for n in pushed if n in received
        ]
        lost += [n for n in pushed if n not in received]
        first, last = sent[pushed[0]], sent[pushed[-1]]
        rates.append((len(pushed) - 1) / (last - first) if last > first else float("nan"))
        # The server is done with the stream when the viewer has its last frame.
        done_after.append((max(received.values(), default=float("nan")) - last) * 1000)
        close_after.append(result["close_wait"] * 1000)
    by_latency.sort(reverse=True)
    return {
        "captures": len(results),
        "frames": sum(len([t for t in r["sent"] if t is not None]) for r in results),
        "rate_asked": args.rate,
        "rate_achieved": round(statistics.fmean(rates), 1),  # per capture, mean
        "rate_achieved_min": round(min(rates), 1),
        "batch_ms": args.batch_ms,
        "viewer_messages": sum(r["messages"] for r in results),
        # When the viewer had the last frame, after it was sent (the worst capture).
        "done_after_last_frame_ms": round(max(done_after), 1),
        # How long the server took to answer `close` after the last frame was sent: its
        # backlog plus closing the capture (writing the assemblies).
        "ingest_backlog_ms": round(max(close_after), 1),
        "frames_lost": len(lost),
        "frames_twice": sum(r["repeats"] for r in results),
        "outcome": sorted({str(r["outcome"]) for r in results}),
        "p50_ms": round(percentile(latencies, 50), 2),
        "p95_ms": round(percentile(latencies, 95), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "max_ms": round(max(latencies), 2) if latencies else None,
        "mean_ms": round(statistics.fmean(latencies), 2) if latencies else None,
        "slowest": [{"frame": n, "ms": ms} for ms, n in by_latency[:5]],
        "database": "sqlite (temporary file)" if not args.database_url else "DATABASE_URL",
        "channel_layer": "redis" if os.environ.get("REDIS_URL") else "in-memory",
        "viewer_process": "second daphne" if args.viewer_process else "same daphne",
        "processes": max(1, args.processes),
        "warm_up_frames": args.warm_up,
    }


def timeline(results: list[dict], window: float) -> list[tuple[float, int, float, float]]:
    """(window start in s from the first frame sent, frames, p50 ms, worst ms) for
    each window of `window` seconds of send time that has frames received."""
    pairs = [
        (sent, result["received"][n] - sent)
        for result in results
        for n, sent in enumerate(result["sent"])
        if sent is not None and n in result["received"]
    ]
    if not pairs:
        return []
    first = min(sent for sent, _ in pairs)
    windows: dict[int, list[float]] = {}
    for sent, latency in pairs:
        windows.setdefault(int((sent - first) / window), []).append(latency * 1000)
    return [
        (index * window, len(ms), percentile(ms, 50), max(ms))
        for index, ms in sorted(windows.items())
    ]


def print_timeline(rows: list[tuple[float, int, float, float]], window_ms: float) -> None:
    print(f"  latency over the run, windows of {window_ms:g} ms of send time:")
    for start, count, p50, worst in rows:
        bar = "#" * min(60, round(worst / 2))
        print(f"    {start:7.2f} s  {count:5d} frames  p50 {p50:6.1f}  worst {worst:6.1f}  {bar}")


def report(figures: dict, args: argparse.Namespace) -> bool:
    """Print the figures; whether the targets are met."""
    met = (
        figures["p99_ms"] <= TARGET_P99_MS
        and figures["done_after_last_frame_ms"] <= TARGET_DONE_MS
        and not figures["frames_lost"]
        and not figures["frames_twice"]
    )
    print(
        f"live viewer latency, {figures['captures']} capture(s)"
        f" x {figures['frames'] // figures['captures']}"
        f" frames at {args.rate:g}/s asked ({figures['rate_achieved']}/s achieved, slowest"
        f" {figures['rate_achieved_min']}/s), {figures['channel_layer']} channel layer,"
    )
    how = f"{args.batch_ms:g} ms reads per message" if args.batch_ms else "one frame per message"
    where = f"{figures['processes']} daphne processes" if figures["processes"] > 1 else ""
    warm = f", after a capture of {args.warm_up} frames" if args.warm_up else ""
    recorded = ", a recording process" if figures["recording_process"] else ""
    print(f"  {how}, {where or figures['viewer_process']}, {figures['database']}{recorded}{warm}")
    print(
        f"  viewer messages {figures['viewer_messages']}  outcome {figures['outcome']}  "
        f"viewer had the last frame {figures['done_after_last_frame_ms']} ms after it was sent; "
        f"close answered {figures['ingest_backlog_ms']} ms after it"
    )
    print(
        f"  latency ms: p50 {figures['p50_ms']}  p95 {figures['p95_ms']}  "
        f"p99 {figures['p99_ms']}  max {figures['max_ms']}  mean {figures['mean_ms']}"
    )
    print(
        f"  frames lost {figures['frames_lost']}  frames seen twice {figures['frames_twice']}"
        f"  ingest server CPU {figures['server_cpu_us_per_frame']} us a frame"
    )
    slowest = ", ".join(f"#{s['frame']} {s['ms']} ms" for s in figures["slowest"])
    print(f"  slowest frames: {slowest}")
    print(
        f"  target p99 <= {TARGET_P99_MS:g} ms, last frame <= {TARGET_DONE_MS:g} ms after it was"
        f" sent, 0 lost: {'met' if met else 'MISSED'}"
    )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=5000, help="frames in the stream (5000)")
    parser.add_argument("--rate", type=float, default=1000.0, help="frames per second (1000)")
    parser.add_argument("--captures", type=int, default=1, help="captures at once, each at --rate")
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
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="daphne processes, the captures spread over them (each capture's ingest and"
        " viewer on one process, so any channel layer does); CPU is summed over them",
    )
    parser.add_argument(
        "--warm-up",
        type=int,
        default=0,
        metavar="FRAMES",
        help="first record one capture of this many frames on each process, not measured:"
        " a server that has recorded before (default 0: the process's first capture)",
    )
    parser.add_argument(
        "--timeline",
        type=float,
        default=0.0,
        metavar="MS",
        help="also print the latency over the run: p50 and worst of the frames sent in"
        " each window of MS milliseconds (all captures pooled): stalls show as a few"
        " windows, a server that cannot keep up as a level that climbs",
    )
    parser.add_argument("--out", default=str(ROOT / "bench-results" / "live_viewer.json"))
    parser.add_argument("--log", default="", help="keep daphne's log in this file")
    args = parser.parse_args()
    if args.viewer_process and not os.environ.get("REDIS_URL"):
        raise SystemExit("--viewer-process needs REDIS_URL")
    if args.viewer_process and args.processes > 1:
        raise SystemExit("--viewer-process takes one ingest process")

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
            started = [
                stack.enter_context(daphne({**env, "BENCH_PROCESS": f"I{n}"}, log))
                for n in range(max(1, args.processes))
            ]
            ingest_bases = [base for base, _ in started]
            servers = [server for _, server in started]
            viewer_bases = ingest_bases
            if args.viewer_process:
                viewer_base, _ = stack.enter_context(daphne({**env, "BENCH_PROCESS": "B"}, log))
                viewer_bases = [viewer_base]
            for i, base in enumerate(ingest_bases if args.warm_up else ()):
                viewer = viewer_bases[i % len(viewer_bases)]
                warm = frames(args.warm_up)
                asyncio.run(run([base], [viewer], warm, args.rate, args.limit, 0))
            # The client's own cyclic GC would stamp frames late (it holds every
            # message it got: full collections of 37-55 ms mid-run, measured with
            # `gc.callbacks`): off while it measures, as `timeit` does.
            gc.collect()
            gc.disable()
            cpu_before = sum(cpu_seconds(server) for server in servers)
            try:
                results = asyncio.run(
                    run(
                        ingest_bases,
                        viewer_bases,
                        stream,
                        args.rate,
                        args.limit,
                        args.batch_ms / 1000,
                        args.captures,
                    )
                )
            finally:
                gc.enable()
            server_cpu = sum(cpu_seconds(server) for server in servers) - cpu_before
            # (the child, not the setting: daphne records in process when it cannot start one)
            recording_process = all(has_recording_process(server) for server in servers)
        log_tail = log.read_text(errors="replace")[-2000:]

    figures = summary(results, args)
    figures["recording_process"] = recording_process
    if args.timeline:
        figures["timeline"] = timeline(results, args.timeline / 1000)
    # The ingest servers' CPU a frame, from opening to closing: steadier than the
    # latencies on a shared machine (a second viewer process's is not counted).
    frames_sent = figures["frames"] or float("nan")
    figures["server_cpu_us_per_frame"] = round(server_cpu / frames_sent * 1e6, 1)
    met = report(figures, args)
    if args.timeline:
        print_timeline(figures["timeline"], args.timeline)
    if figures["frames_lost"] or "1011" in log_tail or "Traceback" in log_tail:
        print(log_tail, file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    environment = {"python": platform.python_version(), "nproc": os.cpu_count()}
    out.write_text(json.dumps({**figures, "met": met, "environment": environment}, indent=2))
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
