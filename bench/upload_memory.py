"""Peak memory of storing one big upload, against the upload's size.

    .venv/bin/python bench/upload_memory.py                       # 1,000,000 frames
    .venv/bin/python bench/upload_memory.py --frames 200000 --frame tool

Each contender runs in a subprocess of its own on a scratch SQLite file (or
DATABASE_URL), which builds the upload in memory, reads its VmRSS, stores it,
then reads its VmHWM (peak resident set).  Printed per contender: the upload's
size, the growth (peak minus the RSS before the upload was built) and their
ratio, and the seconds the storing took:

    streamed   intake.store_upload: the upload fed to the assembler in slices
               and written in batches (INSPECTOR_UPLOAD_BATCH_FRAMES frames per
               transaction) through captures/writer.CaptureWriter
    in-memory  store.store_stream: every frame read and assembled first, then
               written in one transaction (the upload path before issue 12)

Target (issue 12 item 6, issue 13): streamed growth <= 4x the upload's size.
Frames: `empty` (`data: {}`, the issue's 1.4M-frame upload), `text` (a chat
chunk with a word of content), `tool` (one tool call's argument fragments).
Figures also go to bench-results/upload_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "upload_memory.json"


def build(frames: int, kind: str) -> bytes:
    import orjson

    if kind == "empty":
        return b"data: {}\n\n" * frames
    if kind == "text":
        body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "w "}}]}
        return (b"data: " + orjson.dumps(body) + b"\n\n") * frames + b"data: [DONE]\n\n"
    header = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": "'}}
    piece = {"index": 0, "function": {"arguments": "xy"}}
    first = {"choices": [{"index": 0, "delta": {"tool_calls": [header]}}]}
    more = {"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}
    return (
        b"data: " + orjson.dumps(first) + b"\n\n"
        + (b"data: " + orjson.dumps(more) + b"\n\n") * (frames - 1)
    )  # fmt: skip


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child(mode: str, frames: int, kind: str) -> None:
    """Store one upload; print one JSON line of figures."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from inspector.captures.intake import store_upload
    from inspector.captures.store import store_stream

    before = status_kb("VmRSS")
    data = build(frames, kind)
    start = time.perf_counter()
    if mode == "streamed":
        store_upload(data, name="bench.sse")
    else:
        store_stream(data, stream_format="sse")
    seconds = time.perf_counter() - start
    growth = (status_kb("VmHWM") - before) * 1024
    print(json.dumps({"mode": mode, "bytes": len(data), "growth": growth, "seconds": seconds}))


def run(mode: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, INSPECTOR_MAX_UPLOAD_BYTES=str(2**40))
    if not env.get("DATABASE_URL"):
        env["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
    command = [sys.executable, __file__, "--child", mode, "--frames", str(args.frames)]
    out = subprocess.run(
        [*command, "--frame", args.frame], env=env, capture_output=True, text=True, check=True
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    figures["ratio"] = round(figures["growth"] / figures["bytes"], 2)
    mb = 1024 * 1024
    print(
        f"{mode:>9}: upload {figures['bytes'] / mb:.1f} MB, peak growth"
        f" {figures['growth'] / mb:.1f} MB = {figures['ratio']}x the upload,"
        f" stored in {figures['seconds']:.1f} s",
        flush=True,
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--frame", choices=("empty", "text", "tool"), default="empty")
    parser.add_argument("--modes", default="streamed,in-memory")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.frames, args.frame)
        return 0
    results = [run(mode, args) for mode in args.modes.split(",")]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"args": vars(args), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
