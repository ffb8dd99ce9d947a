"""Concurrent uploads and proxied streams against one daphne process, and the checks that
nothing was lost.  Shared by tests/hardening/test_hardening_load.py (bounded) and
bench/load.py (bigger numbers); imported by module name.

The workload: `uploads` distinct generated streams (50-500 frames each) POSTed to
`/api/captures` while `streams` streamed chat completions are read to the end through
`/proxy/fake/v1/chat/completions` from a fake upstream replaying a paced scenario, all at
once (every request waits at a barrier, then goes).  The checks (`verify`): every upload
answered 201 and stored with the frame count `inspector.assembly.assemble` gives for its
bytes; every proxied stream relayed byte for byte and stored with the scenario's frame count
and outcome; no capture left live; no capture without its 2 assemblies or with a frame row
count other than its `frame_count`.
"""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

SCENARIO = "load"
BASE = {"object": "chat.completion.chunk", "created": 1718000000, "model": "gpt-load"}


def _frame(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def _chunk(stream_id: str, delta: dict[str, Any], finish: str | None = None, index: int = 0):
    choice = {"index": index, "delta": delta, "finish_reason": finish}
    return _frame({**BASE, "id": stream_id, "choices": [choice]})


def _pieces(text: str, count: int) -> list[str]:
    """`text` cut into `count` pieces (some may be empty when it is short)."""
    count = max(1, count)
    step = max(1, -(-len(text) // count))
    out = [text[i : i + step] for i in range(0, len(text), step)]
    return out + [""] * (count - len(out))


def tool_stream(frames: int, stream_id: str = "chatcmpl-load") -> bytes:
    """Exactly `frames` frames (at least 5): the role, a call header, its arguments in
    `frames - 4` pieces, the finish and [DONE]; assembles ok."""
    header = {"index": 0, "id": "call_load", "type": "function"}
    header["function"] = {"name": "get_weather", "arguments": ""}
    arguments = json.dumps({"city": "Paris", "notes": "x" * (frames * 3), "days": 3})
    out = [_chunk(stream_id, {"role": "assistant", "content": None})]
    out.append(_chunk(stream_id, {"tool_calls": [header]}))
    for piece in _pieces(arguments, frames - 4):
        out.append(
            _chunk(stream_id, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        )
    out.append(_chunk(stream_id, {}, "tool_calls"))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def generated_stream(seed: int, frames: int) -> bytes:
    """A distinct stream of about `frames` frames: text, up to three tool calls (parallel
    ones interleaved), comments, sometimes usage; most end well, some are cut short."""
    rng = random.Random(seed)
    sid = f"chatcmpl-{seed}"
    calls = rng.randint(0, 3)
    texts = rng.randint(1, max(1, frames // 3)) if calls else max(1, frames - 4)
    out = [_chunk(sid, {"role": "assistant", "content": ""})]
    out += [_chunk(sid, {"content": f"word{seed}-{i} "}) for i in range(texts)]
    budget = max(calls, frames - len(out) - 3)
    per_call = []
    for call in range(calls):
        arguments = json.dumps({"call": call, "seed": seed, "text": "y" * rng.randint(5, 400)})
        per_call.append(_pieces(arguments, budget // max(1, calls)))
    plan: list[tuple[int, str]] = []
    if calls > 1 and rng.random() < 0.5:  # parallel calls, interleaved round robin
        while any(per_call):
            plan += [(call, pieces.pop(0)) for call, pieces in enumerate(per_call) if pieces]
    else:
        plan = [(call, piece) for call, pieces in enumerate(per_call) for piece in pieces]
    started: set[int] = set()
    for call, piece in plan:
        entry: dict[str, Any] = {"index": call, "function": {"arguments": piece}}
        if call not in started:
            started.add(call)
            entry.update(id=f"call_{seed}_{call}", type="function")
            entry["function"]["name"] = f"tool_{call}"
        out.append(_chunk(sid, {"tool_calls": [entry]}))
        if rng.random() < 0.02:
            out.append(b": keep-alive\n\n")
    out.append(_chunk(sid, {}, "tool_calls" if calls else "stop"))
    if rng.random() < 0.3:
        usage = {"prompt_tokens": 10, "completion_tokens": frames, "total_tokens": frames + 10}
        out.append(_frame({**BASE, "id": sid, "choices": [], "usage": usage}))
    ending = rng.random()
    if ending < 0.8:
        out.append(b"data: [DONE]\n\n")
    elif ending < 0.9:  # cut inside the last frame
        out[-1] = out[-1][: len(out[-1]) // 2]
    return b"".join(out)


def upload_set(count: int, low: int = 50, high: int = 500, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [generated_stream(seed * 100_000 + n, rng.randint(low, high)) for n in range(count)]


def write_scenario(directory: Path, frames: int, pace_ms: float) -> bytes:
    directory.mkdir(parents=True, exist_ok=True)
    raw = tool_stream(frames)
    (directory / f"{SCENARIO}.sse").write_bytes(raw)
    (directory / f"{SCENARIO}.json").write_text(json.dumps({"pace_ms": pace_ms}))
    return raw


def rss_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in kB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


@dataclass
class Load:
    uploads: list[dict[str, Any]] = field(default_factory=list)
    streams: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def run(base_url: str, uploads: list[bytes], streams: int, *, timeout: float = 60) -> Load:
    """Every upload and stream at once, each in a thread of its own."""
    total = len(uploads) + streams
    barrier = threading.Barrier(total)
    limits = httpx.Limits(max_connections=total + 10, max_keepalive_connections=total + 10)
    load = Load()

    def upload(n: int, data: bytes) -> dict[str, Any]:
        barrier.wait(timeout)
        started = time.monotonic()
        response = client.post(
            f"{base_url}/api/captures",
            params={"format": "sse", "title": f"load upload {n}"},
            content=data,
            headers={"Content-Type": "text/event-stream"},
        )
        body = response.json()
        return {
            "n": n,
            "status": response.status_code,
            "slug": body.get("slug"),
            "error": body.get("error"),
            "seconds": time.monotonic() - started,
        }

    def stream(n: int) -> dict[str, Any]:
        request = {
            "model": SCENARIO,
            "stream": True,
            "messages": [{"role": "user", "content": f"load stream {n}"}],
        }
        barrier.wait(timeout)
        started = time.monotonic()
        url = f"{base_url}/proxy/fake/v1/chat/completions"
        with client.stream("POST", url, json=request) as response:
            body = b"".join(response.iter_raw())
        return {
            "n": n,
            "status": response.status_code,
            "slug": response.headers.get("X-Inspector-Capture"),
            "body": body,
            "seconds": time.monotonic() - started,
        }

    def guarded(work, n: int, *args) -> dict[str, Any]:
        try:
            return work(n, *args)
        except httpx.HTTPError as error:  # reported by `verify`, with the others
            return {"n": n, "status": f"{type(error).__name__}: {error}", "slug": None}

    started = time.monotonic()
    with httpx.Client(timeout=timeout, limits=limits) as client:
        with ThreadPoolExecutor(max_workers=total) as pool:
            up = [pool.submit(guarded, upload, n, data) for n, data in enumerate(uploads)]
            down = [pool.submit(guarded, stream, n) for n in range(streams)]
            load.uploads = [future.result(timeout) for future in up]
            load.streams = [future.result(timeout) for future in down]
    load.seconds = time.monotonic() - started
    return load


def wait_closed(slugs: list[str], timeout: float = 30) -> None:
    """Proxied captures close after their response has ended: wait for them."""
    from inspector.captures.models import Capture

    deadline = time.monotonic() + timeout
    while Capture.objects.filter(slug__in=slugs, finished__isnull=True).exists():
        if time.monotonic() > deadline:
            open_ = list(
                Capture.objects.filter(slug__in=slugs, finished__isnull=True).values_list(
                    "slug", flat=True
                )
            )
            raise AssertionError(f"proxied captures not closed after {timeout} s: {open_}")
        time.sleep(0.1)


def verify(load: Load, uploads: list[bytes], scenario: bytes) -> dict[str, Any]:
    """Check everything answered was stored whole: the figures compared, with `problems`
    (empty when all is well).  An upload the server refused is counted, not lost: its
    frames are not expected (and none of them may be stored)."""
    from collections import Counter

    from django.db.models import Count

    from inspector.assembly import assemble
    from inspector.captures.models import Capture, Frame

    problems: list[str] = []
    statuses = Counter(str(u["status"]) for u in load.uploads)
    refused = [u for u in load.uploads if u["status"] != 201]
    if refused:
        problems.append(f"{len(refused)} uploads not stored, e.g. {refused[:2]}")
    bad = [(s["n"], s["status"]) for s in load.streams if s["status"] != 200]
    bad += [(s["n"], "body differs") for s in load.streams if s.get("body") not in (None, scenario)]
    if bad:
        problems.append(f"streams not relayed byte for byte: {bad[:5]}")
    slugs = [s["slug"] for s in load.streams if s["slug"] and s["slug"] != "unrecorded"]
    if len(slugs) != len(load.streams):
        problems.append(f"{len(load.streams) - len(slugs)} streams not recorded")
    try:
        wait_closed(slugs)
    except AssertionError as error:
        problems.append(str(error))

    expected_frames = stored_frames = 0
    for result, data in zip(load.uploads, uploads, strict=True):
        if result["status"] != 201:
            continue
        expected = assemble(data, fmt="sse")
        capture = Capture.objects.filter(slug=result["slug"]).first()
        if capture is None:
            problems.append(f"upload {result['n']}: answered 201, capture missing")
            continue
        rows = Frame.objects.filter(capture=capture).count()
        if (capture.frame_count, rows) != (expected.frames, expected.frames):
            problems.append(f"upload {result['n']}: {rows} rows, {expected.frames} frames")
        if capture.outcome != expected.outcome or bytes(capture.raw) != data:
            problems.append(f"upload {result['n']}: stored {capture.outcome}, not as sent")
        expected_frames += expected.frames
        stored_frames += rows
    scenario_result = assemble(scenario, fmt="sse")
    # A relayed stream's frames are expected in its capture, recorded or not.
    expected_frames += scenario_result.frames * (len(load.streams) - len(slugs))
    for slug in slugs:
        capture = Capture.objects.filter(slug=slug).first()
        if capture is None:
            problems.append(f"stream {slug}: relayed, capture missing (recording failed)")
            expected_frames += scenario_result.frames
            continue
        rows = Frame.objects.filter(capture=capture).count()
        if not capture.frame_count == rows == scenario_result.frames:
            problems.append(f"stream {slug}: {rows} rows, frame_count {capture.frame_count}")
        if capture.outcome != scenario_result.outcome or bytes(capture.raw) != scenario:
            problems.append(f"stream {slug}: {capture.outcome} {capture.refusal_code}")
        expected_frames += scenario_result.frames
        stored_frames += rows

    live = Capture.objects.filter(outcome=Capture.Outcome.LIVE).count()
    counted = Capture.objects.annotate(
        rows=Count("frames", distinct=True), policies=Count("assemblies", distinct=True)
    ).values_list("slug", "frame_count", "rows", "policies")
    half = [row for row in counted if row[2] != row[1] or row[3] != 2]
    if live:
        problems.append(f"{live} captures left live")
    if half:
        problems.append(f"half-stored (slug, frame_count, rows, assemblies): {half[:5]}")
    answered = [u["seconds"] for u in load.uploads if "seconds" in u]
    streamed = [s["seconds"] for s in load.streams if "seconds" in s]
    return {
        "uploads": len(load.uploads),
        "upload_statuses": dict(statuses),
        "streams": len(load.streams),
        "frames_expected": expected_frames,
        "frames_stored": stored_frames,
        "frames_lost": expected_frames - stored_frames,
        "captures_live": live,
        "captures_half_stored": len(half),
        "upload_seconds_max": round(max(answered, default=0), 2),
        "stream_seconds_max": round(max(streamed, default=0), 2),
        "seconds": round(load.seconds, 2),
        "problems": problems,
    }
