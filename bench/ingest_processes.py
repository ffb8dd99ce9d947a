"""HTTP ingest and uploads across server processes: one daphne against two,
side by side, on PostgreSQL + Redis (no sticky routing: each client's appends
alternate between the processes), and the database size per million frames.

Run from the repository root (the database must be a scratch one: it is
migrated and filled):

    .venv/bin/python bench/ingest_processes.py \\
        --database-url postgres://postgres@127.0.0.1:5432/hscale \\
        --redis-url redis://127.0.0.1:6379/7

Each round, `--clients` threads each open a capture, append `--appends`
pieces of `--frames-per-append` tool-call frames with `Upload-Offset`, and
close it; then `--uploads` generated streams are POSTed to /api/captures at
once.  Three modes, one after another in each round (`MODES`): one process;
two processes with each client's appends alternating between them (a
round-robin balancer: almost every append lands on the process that did not
take the previous one and rebuilds the capture's assembler from the stored
bytes); two processes with each client on one of them (what a balancer that
keeps affinity gives).  Every capture is checked against `assemble` of the
same bytes (frame count, outcome ok) before a figure counts.  Last, the
database size per million frames: `--size-frames` frames are uploaded and
the growth of the captures tables (VACUUM FULL before and after) is scaled
linearly.

Figures go to stdout and to bench-results/ingest_processes.json (git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "ingest_processes.json"
sys.path[:0] = [str(ROOT)]

from server import daphne as daphne_server  # noqa: E402
from server import scratch_site  # noqa: E402

# one: a single process; two: two processes, each client's appends alternating
# between them (round-robin, a rebuild at almost every append); two-affine: two
# processes, each client on its own (what an affinity-keeping balancer gives).
MODES = {"one": 1, "two": 2, "two-affine": 2}


def tool_frames(count: int, tag: str) -> list[bytes]:
    """`count` chat frames: one tool call whose arguments arrive ~6 bytes a frame."""
    base = {"id": f"chatcmpl-{tag}", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}

    def frame(delta: dict, finish: str | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    start = {"index": 0, "id": f"call_{tag}", "type": "function", "function": {"name": "f"}}
    frames = [frame({"tool_calls": [{**start, "function": {"name": "f", "arguments": '{"t": "'}}]})]
    piece = {"index": 0, "function": {"arguments": "abcdef"}}
    frames += [frame({"tool_calls": [piece]}) for _ in range(count - 3)]
    frames.append(
        frame({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}, "tool_calls")
    )
    return [*frames, b"data: [DONE]\n\n"]


def post(url: str, data: bytes = b"", headers: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method="POST", headers=headers or {})
    request.add_header("Content-Type", "application/octet-stream")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, orjson.loads(error.read() or b"{}")


def ingest_client(servers: list[str], number: int, args: Any, out: dict) -> None:
    """Open, append (alternating processes), close; the slug and bytes in `out`."""
    frames = tool_frames(args.appends * args.frames_per_append, f"{number}")
    status, opened = post(servers[number % len(servers)] + "/api/ingest")
    assert status == 201, opened
    slug, offset, problems = opened["slug"], 0, []
    for step in range(args.appends):
        chunk = b"".join(
            frames[step * args.frames_per_append : (step + 1) * args.frames_per_append]
        )
        # Alternating: the next process each time (a round-robin balancer);
        # else the client's own process every time (affinity, no rebuilds).
        base = servers[(number + step * args.alternate) % len(servers)]
        status, body = post(
            f"{base}/api/ingest/{slug}/append", chunk, {"Upload-Offset": str(offset)}
        )
        if status != 200:
            problems.append(f"append {step}: {status} {body}")
            break
        offset = body["offset"]
    status, closed = post(f"{servers[(number + 1) % len(servers)]}/api/ingest/{slug}/close")
    if status != 200:
        problems.append(f"close: {status} {closed}")
    out[number] = {"slug": slug, "data": b"".join(frames), "problems": problems}


def upload_client(servers: list[str], number: int, args: Any, out: dict) -> None:
    """One upload of a generated stream (the processes take turns by client)."""
    data = b"".join(tool_frames(args.upload_frames, f"u{number}"))
    status, body = post(servers[number % len(servers)] + "/api/captures?format=sse", data)
    problems = [] if status == 201 else [f"upload: {status} {body}"]
    out[number] = {"slug": body.get("slug"), "data": data, "problems": problems}


def timed(client: Any, servers: list[str], count: int, args: Any) -> tuple[float, dict]:
    """Run `count` clients at once; the seconds until the last is done, and their results."""
    out: dict[int, dict] = {}
    threads = [
        threading.Thread(target=client, args=(servers, n, args, out), daemon=True)
        for n in range(count)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(args.timeout)
    return time.perf_counter() - started, out


def check(out: dict, count: int) -> tuple[int, list[str]]:
    """Frames stored (each capture checked against `assemble`), and the problems."""
    from inspector.assembly import assemble
    from inspector.captures import models

    problems = [p for result in out.values() for p in result["problems"]]
    problems += [f"client {n} did not finish" for n in range(count) if n not in out]
    frames = 0
    for result in out.values():
        if not result["slug"]:
            continue
        capture = models.Capture.objects.get(slug=result["slug"])
        expected = assemble(result["data"], fmt="sse")
        stored = capture.frames.count()
        if (stored, capture.frame_count, capture.outcome) != (expected.frames,) * 2 + ("ok",):
            problems.append(f"{capture.slug}: {stored} frames, {capture.outcome}")
        frames += stored
    return frames, problems


def one_round(servers: list[str], args: Any, mode: str) -> dict[str, Any]:
    args = argparse.Namespace(**{**vars(args), "alternate": int(mode == "two")})
    seconds, out = timed(ingest_client, servers, args.clients, args)
    frames, problems = check(out, args.clients)
    up_seconds, up_out = timed(upload_client, servers, args.uploads, args)
    up_frames, up_problems = check(up_out, args.uploads)
    return {
        "mode": mode,
        "ingest_frames_per_s": round(frames / seconds),
        "appends_per_s": round(args.clients * args.appends / seconds, 1),
        "uploads_per_s": round(args.uploads / up_seconds, 2),
        "upload_frames_per_s": round(up_frames / up_seconds),
        "problems": problems + up_problems,
    }


def database_bytes() -> int:
    """The captures app's tables and indexes (TOAST included), PostgreSQL."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relkind = 'r' AND c.relname LIKE 'captures\\_%%'"
        )
        return int(cursor.fetchone()[0])


def size_per_million(args: Any, servers: list[str]) -> dict[str, Any]:
    """Store `--size-frames` frames by upload (VACUUM'd before and after) and
    scale the growth linearly to a million frames."""
    from django.db import connection

    from inspector.captures import models

    with connection.cursor() as cursor:
        cursor.execute("VACUUM FULL")
    before, frames_before = database_bytes(), models.Frame.objects.count()
    per = max(3, args.size_frames // 10)
    out: dict[int, dict] = {}
    for n in range(10):
        upload_client(servers, 10_000 + n, argparse.Namespace(upload_frames=per), out)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM FULL")
    grown = database_bytes() - before
    stored = models.Frame.objects.count() - frames_before
    return {
        "frames_stored": stored,
        "bytes_grown": grown,
        "mb_per_million_frames_scaled": round(grown / stored * 1_000_000 / 2**20),
        "stream_bytes_per_frame": round(sum(len(r["data"]) for r in out.values()) / stored),
    }


def rebuild_cost(megabytes: int = 2) -> dict[str, Any]:
    """What a process pays to take an append of a capture it does not hold:
    reading the stored bytes back and assembling them (`LiveCapture.resume`),
    per MB of capture, best of 3, in this process."""
    from inspector.captures.ingest_chunks import received_bytes
    from inspector.live import recorder
    from inspector.live.session import LiveCapture

    frames = tool_frames(megabytes * 2**20 // 115, "rebuild")
    live = recorder.open_ingest(stream_format="sse", title="rebuild cost")
    offset = 0
    for start in range(0, len(frames), 2000):
        offset = recorder.append_sync(live, b"".join(frames[start : start + 2000]), offset)
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        LiveCapture.resume(live.capture, received_bytes(live.capture), dialect="auto")
        best = min(best, time.perf_counter() - started)
    recorder.close_sync(live)
    return {
        "capture_mb": round(offset / 2**20, 2),
        "frames": len(frames),
        "rebuild_ms_per_mb": round(best * 1000 / (offset / 2**20), 1),
    }


def rounds(args: Any, env: dict, scratch: Path) -> list[dict[str, Any]]:
    """Alternating one-process and two-process rounds (shared warm-up first)."""
    figures = []
    with contextlib.ExitStack() as stack:
        servers = [
            stack.enter_context(daphne_server(env, scratch / f"daphne-{name}.log"))[0]
            for name in ("a", "b")
        ]
        warm = argparse.Namespace(**{**vars(args), "appends": 4, "uploads": 2, "alternate": 1})
        timed(ingest_client, servers, 2, warm)
        for number in range(args.rounds):
            for mode, count in MODES.items():
                result = one_round(servers[:count], args, mode) | {"round": number + 1}
                print(json.dumps(result), flush=True)
                figures.append(result)
        figures.append({"rebuild": rebuild_cost()})
        print(json.dumps(figures[-1]), flush=True)
        if args.size_frames:
            figures.append({"size": size_per_million(args, servers)})
            print(json.dumps(figures[-1]), flush=True)
    return figures


def summary(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """Best and median of the rounds per mode, and their ratios to one process."""
    out: dict[str, Any] = {}
    for key in ("ingest_frames_per_s", "appends_per_s", "uploads_per_s", "upload_frames_per_s"):
        out[key] = {}
        for mode in MODES:
            values = [f[key] for f in figures if f.get("mode") == mode]
            out[key][mode] = {"best": max(values), "median": statistics.median(values)}
        one = out[key]["one"]
        for mode in MODES:
            mine = out[key][mode]
            mine["ratio_best"] = round(mine["best"] / one["best"], 2)
            mine["ratio_median"] = round(mine["median"] / one["median"], 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="a scratch PostgreSQL database")
    parser.add_argument("--redis-url", required=True, help="the channel layer")
    parser.add_argument("--clients", type=int, default=8, help="concurrent ingest clients (8)")
    parser.add_argument("--appends", type=int, default=40, help="appends per capture (40)")
    parser.add_argument("--frames-per-append", type=int, default=25, help="(25)")
    parser.add_argument("--uploads", type=int, default=8, help="concurrent uploads (8)")
    parser.add_argument("--upload-frames", type=int, default=5000, help="frames per upload (5000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each (3)")
    parser.add_argument("--size-frames", type=int, default=100_000, help="for the size (100000)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per client (600)")
    args = parser.parse_args()

    scratch, env = scratch_site("bench-ingest-", args.database_url, args.redis_url)
    figures = rounds(args, env, scratch)
    problems = [p for f in figures for p in f.get("problems", [])]
    report = {
        "rounds": figures,
        "summary": summary(figures) if args.rounds else {},
        "settings": vars(args) | {"database_url": args.database_url.split("@")[-1]},
        "environment": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "problems": problems,
    }
    print(json.dumps(report["summary"], indent=2))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    for problem in problems[:20]:
        print("problem:", problem[:300])
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
