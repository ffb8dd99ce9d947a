"""Latency the recording proxy adds per frame, and frames lost (target: 0).

Run from the repository root:

    .venv/bin/python bench/proxy.py                 # about 30 s
    .venv/bin/python bench/proxy.py --frames 400 --pace-ms 5 --rounds 8

Everything runs on loopback, in bounded time:

* a fake upstream (`inspector.live.fake_upstream`) in a thread of this process replays a
  generated tool-call stream (`--frames` frames, one every `--pace-ms`), noting when it
  wrote each frame (`time.monotonic()`);
* a daphne subprocess serves the inspector on a scratch SQLite database (or
  `--database-url`), with INSPECTOR_UPSTREAMS pointing at the fake;
* a client in this process reads the stream, directly from the fake and through
  `/proxy/fake/v1/chat/completions`, alternating, `--rounds` times each, and notes when
  each frame's last byte arrived.

Per frame, latency = arrival at the client - write by the fake (one clock: both are in
this process).  The added latency is the proxy's latency minus the direct one (p50 from
p50, p99 from p99).  Frames lost: frames sent by the fake but not relayed to the client
byte for byte, plus frames sent but not stored in the capture (rows and `raw`).

A viewer round (`--viewer-frames` frames, one every `--viewer-pace-ms`; 1,000 frames/s by
default) reads a stream through the proxy while a websocket viewer watches its capture
page's channel (`/ws/captures/<slug>/`): per frame, viewer latency = the viewer's receipt
- the fake's write (target p99 <= 20 ms, 0 lost; frames already in the viewer's snapshot
when it joined are not counted: the pages of its snapshot, which a viewer joining a
stream already flowing gets first).  `--viewer-rounds N` runs it N times, each reported
(its p99 moved from 20 to 130 ms between rounds of the same code on a busy 2-core machine):
the target holds when it holds in every round.

A burst round (`--burst-frames`, no pace) shows the relay's speed when the recorder
can't keep up (it waits while reads keep coming) and how long the response's end then
waits for the recorder to store the backlog (the capture itself closes after the
response has ended).

Figures go to stdout and to bench-results/proxy.json (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "proxy.json"
VIEWER_P99_MS = 20.0  # issue 13's live target
sys.path.insert(0, str(ROOT))

from server import cpu_seconds, scratch_site  # noqa: E402
from server import daphne as daphne_server  # noqa: E402

from inspector.live.fake_upstream import FakeUpstream  # noqa: E402


def tool_stream(frames: int) -> bytes:
    """A chat-completion stream with one tool call whose arguments arrive in
    `frames - 5` pieces (5 frames: role, call header, finish, usage, [DONE])."""
    base = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-4o-mini",
        "system_fingerprint": "fp_bench",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

    pieces = max(1, frames - 5)
    text = json.dumps({"notes": [f"item {i} with some text" for i in range(pieces)]})
    size = -(-len(text) // pieces)
    parts = [text[i * size : (i + 1) * size] for i in range(pieces)]
    out = [chunk({"role": "assistant", "content": None})]
    header = {"index": 0, "id": "call_1", "type": "function"}
    out.append(chunk({"tool_calls": [{**header, "function": {"name": "save", "arguments": ""}}]}))
    out += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts]
    out.append(chunk({}, "tool_calls"))
    usage = {"prompt_tokens": 10, "completion_tokens": pieces, "total_tokens": 10 + pieces}
    out.append(b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def read_stream(client: httpx.Client, url: str, model: str, n: int) -> dict[str, Any]:
    """POST a streamed request; each frame's arrival time, the body, the headers."""
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": f"#{n}"}]}
    arrivals: list[float] = []
    chunks: list[bytes] = []
    tail = b""
    with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        headers = dict(response.headers)
        for data in response.iter_raw():
            now = time.monotonic()
            chunks.append(data)
            tail += data
            complete = tail.count(b"\n\n")
            arrivals.extend([now] * complete)
            tail = tail[tail.rfind(b"\n\n") + 2 :] if complete else tail
    ended = time.monotonic()
    return {"arrivals": arrivals, "body": b"".join(chunks), "headers": headers, "ended": ended}


async def watch_through_proxy(proxy: str, model: str) -> dict[str, Any]:
    """Stream `model` through the proxy while a viewer watches its capture:
    when the viewer received each frame (by number), and which frames its
    snapshot already held."""
    body = {"model": model, "stream": True, "messages": [{"role": "user", "content": "view"}]}
    received: dict[int, float] = {}
    seen_twice = 0
    caught_up = float("nan")  # when the viewer had its first live message
    async with httpx.AsyncClient(timeout=60) as client:
        url = f"{proxy}/proxy/fake/v1/chat/completions"
        async with client.stream("POST", url, json=body) as response:
            slug = response.headers["x-inspector-capture"]
            socket_url = proxy.replace("http://", "ws://") + f"/ws/captures/{slug}/?after=-1"
            async with connect(socket_url, max_size=None) as viewer:
                snapshot = orjson.loads(await viewer.recv())
                in_snapshot = {frame["number"] for frame in snapshot.get("frames", [])}

                async def watch() -> None:
                    nonlocal seen_twice, caught_up
                    while True:
                        message = orjson.loads(await viewer.recv())
                        now = time.monotonic()
                        if message["type"] == "snapshot":  # a page after the first
                            in_snapshot.update(frame["number"] for frame in message["frames"])
                            continue
                        if math.isnan(caught_up):  # the first live message
                            caught_up = now
                        for frame in message.get("frames", []):
                            number = frame["number"]
                            if number in in_snapshot:
                                continue  # snapshot and live batches may overlap: by number
                            if number in received:
                                seen_twice += 1
                            received[number] = now
                        if message["type"] == "finished":
                            return

                watcher = asyncio.ensure_future(watch())
                async for _ in response.aiter_raw():
                    pass
                await asyncio.wait_for(watcher, 60)
    return {
        "received": received,
        "in_snapshot": in_snapshot,
        "seen_twice": seen_twice,
        "caught_up": caught_up,
    }


def viewer_latency(fake: FakeUpstream, proxy: str, model: str) -> dict[str, Any]:
    """Frame-to-viewer latency of one stream through the proxy (ms)."""
    fake.reset()
    # This process's cyclic GC off while it measures (as in live_viewer.py): a full
    # collection would stamp the viewer's frames late.
    gc.collect()
    gc.disable()
    try:
        got = asyncio.run(watch_through_proxy(proxy, model))
    finally:
        gc.enable()
    sent = fake.requests[-1].sent_at
    live = [n for n in range(len(sent)) if n not in got["in_snapshot"]]
    latencies = [(got["received"][n] - sent[n]) * 1000 for n in live if n in got["received"]]
    # The frames the fake wrote once the viewer had caught up (its snapshot sent, the live
    # messages held meanwhile forwarded): a viewer who joins a flowing stream first waits
    # for that catch-up, which the figures above include.
    steady = [
        (got["received"][n] - sent[n]) * 1000
        for n in live
        if n in got["received"] and sent[n] > got["caught_up"]
    ]
    span = sent[-1] - sent[0] if len(sent) > 1 else float("nan")
    last = max(got["received"].values(), default=float("nan"))
    return {
        "frames": len(sent),
        "rate_achieved": (len(sent) - 1) / span if span else float("nan"),
        # When the viewer had the last frame, after the fake wrote it: the server's lag.
        "done_after_last_frame_ms": (last - sent[-1]) * 1000,
        "in_snapshot": len(got["in_snapshot"]),
        "measured": len(latencies),
        "lost": len([n for n in live if n not in got["received"]]),
        "seen_twice": got["seen_twice"],
        "p50": quantile(latencies, 0.5),
        "p99": quantile(latencies, 0.99),
        "max": max(latencies, default=float("nan")),
        "steady_measured": len(steady),
        "steady_p99": quantile(steady, 0.99),
        "slow_stretches": slow_stretches(
            [(sent[n], (got["received"][n] - sent[n]) * 1000) for n in live if n in got["received"]]
        ),
    }


def slow_stretches(
    timed: list[tuple[float, float]], over_ms: float = VIEWER_P99_MS, gap_s: float = 0.005
) -> list[dict[str, float]]:
    """The frames later than `over_ms`, in stretches (frames written within `gap_s`
    of each other): whether the tail is a few stalls or spread thin.  The five
    stretches with the most frames, each with when it began (s into the stream),
    its frames and its worst latency."""
    if not timed:
        return []
    start = timed[0][0]
    stretches: list[dict[str, float]] = []
    last = None
    for at, ms in timed:
        if ms <= over_ms:
            continue
        if last is None or at - last > gap_s:
            stretches.append({"at_s": round(at - start, 3), "frames": 0, "worst_ms": 0.0})
        stretches[-1]["frames"] += 1
        stretches[-1]["worst_ms"] = round(max(stretches[-1]["worst_ms"], ms), 1)
        last = at
    return sorted(stretches, key=lambda x: -x["frames"])[:5] + [{"stretches": len(stretches)}]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=200, help="frames per stream (200)")
    parser.add_argument("--pace-ms", type=float, default=10, help="pause between frames (10)")
    parser.add_argument("--rounds", type=int, default=5, help="streams each way (5)")
    parser.add_argument("--viewer-frames", type=int, default=3000, help="viewer round (3000)")
    parser.add_argument(
        "--viewer-pace-ms", type=float, default=1, help="viewer round's pace (1 = 1,000 frames/s)"
    )
    parser.add_argument(
        "--viewer-rounds",
        type=int,
        default=1,
        help="viewer rounds (1), each reported; the target holds if it holds in every one",
    )
    parser.add_argument(
        "--viewer-warm-up",
        action="store_true",
        help="one viewer round first, not measured (a new server's first viewer opens its"
        " process's connections: with INSPECTOR_RECORDING_PROCESS, the relay's process has"
        " touched neither the database nor Redis before it)",
    )
    parser.add_argument("--burst-frames", type=int, default=5000, help="burst stream (5000)")
    parser.add_argument(
        "--gap-ms", type=float, default=0, help="pause between streams (0: back to back)"
    )
    parser.add_argument("--database-url", default="", help="default: a scratch SQLite file")
    parser.add_argument("--redis-url", default="", help="channel layer (default: in-memory)")
    args = parser.parse_args()

    scratch, env = scratch_site("bench-proxy-", args.database_url, args.redis_url)
    database_url = env["DATABASE_URL"]

    scenarios = scratch / "scenarios"
    scenarios.mkdir()
    paced = tool_stream(args.frames)
    (scenarios / "paced.sse").write_bytes(paced)
    (scenarios / "paced.json").write_text(json.dumps({"pace_ms": args.pace_ms}))
    steady = tool_stream(args.viewer_frames)
    (scenarios / "steady.sse").write_bytes(steady)
    (scenarios / "steady.json").write_text(json.dumps({"pace_ms": args.viewer_pace_ms}))
    burst = tool_stream(args.burst_frames)
    (scenarios / "burst.sse").write_bytes(burst)

    from inspector.captures.models import Capture

    fake = FakeUpstream(scenarios).start()
    env["INSPECTOR_UPSTREAMS"] = f"fake={fake.url}"
    log = scratch / "daphne.log"
    report: dict[str, Any] = {}
    stack = contextlib.ExitStack()
    try:
        proxy, server = stack.enter_context(daphne_server(env, log))
        direct_url = f"{fake.url}/chat/completions"
        proxy_url = f"{proxy}/proxy/fake/v1/chat/completions"
        expected = paced.count(b"\n\n")
        lat: dict[str, list[float]] = {"direct": [], "proxy": []}
        worst: dict[str, list[tuple[float, int, int]]] = {"direct": [], "proxy": []}
        tails: list[float] = []  # ms from a proxied stream's last frame to its end
        lost_client = lost_stored = 0
        slugs: list[str] = []
        with httpx.Client(timeout=60) as client:
            read_stream(client, direct_url, "paced", -1)  # warm both paths up
            read_stream(client, proxy_url, "paced", -2)
            n = 0
            for round_ in range(args.rounds):
                for way in ("direct", "proxy") if round_ % 2 == 0 else ("proxy", "direct"):
                    fake.reset()
                    time.sleep(args.gap_ms / 1000)
                    n += 1
                    got = read_stream(
                        client, direct_url if way == "direct" else proxy_url, "paced", n
                    )
                    sent = fake.requests[-1].sent_at
                    if len(got["arrivals"]) != len(sent) or got["body"] != paced:
                        lost_client += max(len(sent) - len(got["arrivals"]), 1)
                    ms = [(a - s) * 1000 for a, s in zip(got["arrivals"], sent, strict=False)]
                    lat[way] += ms
                    worst[way] += [(v, round_ + 1, i) for i, v in enumerate(ms)]
                    if way == "proxy":
                        slugs.append(got["headers"]["x-inspector-capture"])
                        tails.append((got["ended"] - got["arrivals"][-1]) * 1000)
                    print(
                        f"  round {round_ + 1} {way}: {len(got['arrivals'])} frames",
                        file=sys.stderr,
                    )

            if args.viewer_warm_up:
                viewer_latency(fake, proxy, "steady")
            viewers = []
            for _ in range(max(1, args.viewer_rounds)):
                cpu_before = cpu_seconds(server)
                viewer = viewer_latency(fake, proxy, "steady")
                # The proxy's CPU a frame over the viewer's stream (relay, recording, the
                # viewer's messages): user + system from /proc, as in live_viewer.py.
                cpu = cpu_seconds(server) - cpu_before
                viewer["server_cpu_us_per_frame"] = round(cpu / viewer["frames"] * 1e6, 1)
                viewers.append(viewer)

            # burst: no pace; how long after the client's last byte is the capture closed?
            fake.reset()
            started = time.monotonic()
            got = read_stream(client, proxy_url, "burst", 0)
            relayed = got["arrivals"][-1]
            ended = got["ended"]
            slug = got["headers"]["x-inspector-capture"]
            burst_ok = got["body"] == burst
            fake.reset()
            started_direct = time.monotonic()
            direct_burst = read_stream(client, direct_url, "burst", 0)
            direct_s = time.monotonic() - started_direct

        def closed(slug: str, seconds: float = 60) -> Capture:
            deadline = time.monotonic() + seconds
            while True:
                capture = Capture.objects.filter(slug=slug, finished__isnull=False).first()
                if capture is not None:
                    return capture
                if time.monotonic() > deadline:
                    raise SystemExit(f"capture {slug} not closed after {seconds} s")
                time.sleep(0.02)

        for slug_ in slugs:
            capture = closed(slug_)
            rows = capture.frames.count()
            if capture.frame_count != expected or rows != expected or bytes(capture.raw) != paced:
                lost_stored += max(expected - min(rows, capture.frame_count), 1)
        burst_capture = closed(slug)
        burst_expected = burst.count(b"\n\n")
        burst_rows = burst_capture.frames.count()
        burst_lost = (
            0
            if burst_ok
            and burst_rows == burst_expected
            and burst_capture.frame_count == burst_expected
            and bytes(burst_capture.raw) == burst
            else max(burst_expected - burst_rows, 1)
        )
        direct_p50, direct_p99 = quantile(lat["direct"], 0.5), quantile(lat["direct"], 0.99)
        proxy_p50, proxy_p99 = quantile(lat["proxy"], 0.5), quantile(lat["proxy"], 0.99)
        report = {
            "frames_per_stream": expected,
            "pace_ms": args.pace_ms,
            "gap_ms": args.gap_ms,
            "rounds": args.rounds,
            "frames_measured": {k: len(v) for k, v in lat.items()},
            "latency_ms": {
                "direct": {"p50": direct_p50, "p99": direct_p99, "max": max(lat["direct"])},
                "proxy": {"p50": proxy_p50, "p99": proxy_p99, "max": max(lat["proxy"])},
                "added": {"p50": proxy_p50 - direct_p50, "p99": proxy_p99 - direct_p99},
                "proxy_mean": statistics.fmean(lat["proxy"]),
                "worst": {  # (ms, round, frame)
                    way: sorted(values, reverse=True)[:10] for way, values in worst.items()
                },
            },
            "viewer_pace_ms": args.viewer_pace_ms,
            "viewers": viewers,
            "end_after_last_frame_ms": {
                "p50": quantile(tails, 0.5),
                "max": max(tails),
            },
            "frames_lost": {"relayed": lost_client, "stored": lost_stored, "burst": burst_lost},
            "burst": {
                "frames": burst_expected,
                "bytes": len(burst),
                "direct_s": direct_s,
                "proxy_s": relayed - started,
                "response_end_after_last_frame_ms": (ended - relayed) * 1000,
                "direct_body_ok": direct_burst["body"] == burst,
            },
            "environment": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "database": database_url.split(":")[0],
                "channel_layer": "redis" if args.redis_url else "in-memory",
                "recording_process": env.get("INSPECTOR_RECORDING_PROCESS", "0"),
                "viewer_warm_up": args.viewer_warm_up,
            },
        }
    finally:
        stack.close()
        fake.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    lines = [
        f"per-frame latency, {report['frames_per_stream']} frames x {args.rounds} streams each way,"
        f" pace {args.pace_ms} ms, gap {args.gap_ms} ms ({report['environment']['database']},"
        f" {report['environment']['channel_layer']} channel layer"
        f"{', a recording process' if env.get('INSPECTOR_RECORDING_PROCESS') == '1' else ''})",
        "            p50 ms   p99 ms",
    ]
    for way in ("direct", "proxy", "added"):
        figures = report["latency_ms"][way]
        lines.append(f"  {way:<8} {figures['p50']:8.3f} {figures['p99']:8.3f}")
    tail = report["end_after_last_frame_ms"]
    lines.append(
        f"a proxied response ends {tail['p50']:.1f} ms (p50; max {tail['max']:.1f}) after its last"
        " frame: the capture is closed first"
    )
    rate = 1000 / report["viewer_pace_ms"]
    for number, v in enumerate(report["viewers"], 1):
        lines.append(
            f"viewer through the proxy (round {number}), {v['frames']} frames at {rate:g}/s asked"
            f" ({v['rate_achieved']:.0f}/s achieved):"
            f" p50 {v['p50']:.1f} ms, p99 {v['p99']:.1f} ms, max {v['max']:.1f} ms"
            f" ({v['measured']} measured, {v['in_snapshot']} in the snapshot);"
            f" lost {v['lost']}, live twice {v['seen_twice']};"
            f" the viewer had the last frame {v['done_after_last_frame_ms']:.1f} ms after it"
            " was sent"
        )
        lines.append(
            f"  once the viewer had caught up (its snapshot sent, after"
            f" {v['measured'] - v['steady_measured']} live frames): p99 {v['steady_p99']:.1f} ms"
            f" ({v['steady_measured']} frames); the proxy's CPU {v['server_cpu_us_per_frame']} us"
            f" a frame"
        )
        *stretches, count = v["slow_stretches"] or [{"stretches": 0}]
        lines.append(
            f"  frames later than {VIEWER_P99_MS:g} ms came in {count['stretches']} stretches;"
            " the longest: "
            + (
                ", ".join(
                    f"{x['frames']} frames from {x['at_s']:.2f} s (worst {x['worst_ms']:.0f} ms)"
                    for x in stretches[:3]
                )
                or "none"
            )
        )
    p99s = [v["p99"] for v in report["viewers"]]
    met = all(p99 <= VIEWER_P99_MS for p99 in p99s)
    lines.append(
        f"viewer p99 per round {', '.join(f'{p99:.1f}' for p99 in p99s)} ms (median"
        f" {statistics.median(p99s):.1f}); target p99 <= {VIEWER_P99_MS:g} ms in every round:"
        f" {'met' if met else 'MISSED'}"
    )
    lost = report["frames_lost"]
    viewers_lost = sum(v["lost"] for v in report["viewers"])
    total_lost = lost["relayed"] + lost["stored"] + lost["burst"] + viewers_lost
    lines.append(
        f"frames lost: {total_lost} (relayed {lost['relayed']}, stored {lost['stored']},"
        f" burst {lost['burst']})  target 0: {'met' if total_lost == 0 else 'MISSED'}"
    )
    b = report["burst"]
    lines.append(
        f"burst of {b['frames']} frames ({b['bytes']} bytes), no pace:"
        f" direct {b['direct_s']:.3f} s,"
        f" through the proxy {b['proxy_s']:.3f} s (last frame); the response ended"
        f" {b['response_end_after_last_frame_ms']:.0f} ms later (recorder backlog + close)"
    )
    print("\n".join(lines))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({**report, "summary": lines}, indent=2) + "\n")
    return 0 if total_lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
