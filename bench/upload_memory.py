"""Peak memory of storing one big upload, against the upload's size.

    .venv/bin/python bench/upload_memory.py                       # 1,000,000 `empty` frames
    .venv/bin/python bench/upload_memory.py --frames 100000 --frame tool --dialect responses

Each contender stores the same upload in a process of its own, on a scratch
SQLite file (or DATABASE_URL), with DEBUG off as in production (DEBUG keeps
every query's SQL, the upload's bytes and its results included, in memory):

    streamed   intake.store_upload called in a child process: the upload fed
               to the assembler in slices and written in batches
               (INSPECTOR_UPLOAD_BATCH_FRAMES frames per transaction) through
               captures/writer.CaptureWriter
    in-memory  store.store_stream: every frame read and assembled first, then
               written in one transaction (the upload path before issue 12)
    api        POST /api/captures, the upload as the raw body, to a daphne
               serving the inspector (the body streamed from a file here)
    form       POST /upload/ (the upload page's form), the upload as the
               multipart field `file`, to a daphne

Each process's peak resident set (VmHWM, reset through /proc/PID/clear_refs
just before the upload) minus its RSS before the upload is the growth; the
child contenders build the upload in memory after that RSS is read, so the
upload's own bytes count, as the server's copy of the body counts.  Printed
per contender: the upload's size, the growth and their ratio, the seconds.

Target (issue 12 item 6, issue 13): growth <= 4x the upload's size.
Frames (`--frame`): `empty` (`data: {}`, the issue's 1.4M-frame upload),
`text` (a chunk with a word of text), `tool` (one tool call's argument
fragments); `--dialect chat` or `responses` (`empty` is chat only: it names
no dialect).  Figures also go to bench-results/upload_memory.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "upload_memory.json"
MODES = ("streamed", "in-memory", "api", "form")
BOUNDARY = "benchboundary7d1f"


def _sse(payload: dict, event: str | None = None) -> bytes:
    import orjson

    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def build(frames: int, kind: str, dialect: str = "chat") -> bytes:
    if kind == "empty":
        return b"data: {}\n\n" * frames
    if dialect == "responses":
        return _responses(frames, kind)
    if kind == "text":
        body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "w "}}]}
        return _sse(body) * frames + b"data: [DONE]\n\n"
    header = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": "'}}
    piece = {"index": 0, "function": {"arguments": "xy"}}
    first = {"choices": [{"index": 0, "delta": {"tool_calls": [header]}}]}
    more = {"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}
    return _sse(first) + _sse(more) * (frames - 1)


def _responses(frames: int, kind: str) -> bytes:
    """A Responses stream: `text` deltas of one message, or `tool` argument
    deltas of one function call; created, added, the deltas, done, completed."""
    response = {"id": "resp_1", "object": "response", "model": "m", "status": "in_progress"}
    if kind == "text":
        item = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
        delta_type, field, piece = "response.output_text.delta", "delta", "w "
        whole = "w " * (frames - 4)
        done_item = {
            **item,
            "status": "completed",
            "content": [{"type": "output_text", "text": whole}],
        }
    else:
        item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "f"}
        item = {**item, "arguments": "", "status": "in_progress"}
        delta_type, field, piece = "response.function_call_arguments.delta", "delta", "xy"
        whole = '{"a": "' + "xy" * (frames - 6) + '"}'
        done_item = {**item, "arguments": whole, "status": "completed"}
    seq = iter(range(10**9))

    def block(kind_: str, **fields: object) -> bytes:
        return _sse({"type": kind_, "sequence_number": next(seq), **fields}, kind_)

    out = [block("response.created", response=response)]
    out.append(block("response.output_item.added", output_index=0, item=item))
    deltas = frames - 4
    if kind == "tool":
        out.append(block(delta_type, item_id="fc_1", output_index=0, delta='{"a": "'))
        deltas = frames - 6
    for _ in range(deltas):
        extra = {"content_index": 0} if kind == "text" else {}
        out.append(block(delta_type, item_id=item["id"], output_index=0, **extra, **{field: piece}))
    if kind == "tool":
        out.append(block(delta_type, item_id="fc_1", output_index=0, delta='"}'))
    out.append(block("response.output_item.done", output_index=0, item=done_item))
    completed = {**response, "status": "completed", "output": [done_item]}
    out.append(block("response.completed", response=completed))
    return b"".join(out)


def status_kb(field: str, pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int | str = "self") -> None:
    """VmHWM := the current RSS (Linux: 5 > /proc/PID/clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def child(mode: str, args: argparse.Namespace) -> None:
    """Store one upload in this process; print one JSON line of figures."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from inspector.captures.intake import store_upload
    from inspector.captures.store import store_stream

    reset_peak()
    before = status_kb("VmRSS")
    data = build(args.frames, args.frame, args.dialect)
    start = time.perf_counter()
    if mode == "streamed":
        store_upload(data, name="bench.sse")
    else:
        store_stream(data, stream_format="sse")
    seconds = time.perf_counter() - start
    growth = (status_kb("VmHWM") - before) * 1024
    print(json.dumps({"mode": mode, "bytes": len(data), "growth": growth, "seconds": seconds}))


def _env() -> dict[str, str]:
    env = dict(os.environ, INSPECTOR_MAX_UPLOAD_BYTES=str(2**40), INSPECTOR_DEBUG="0")
    if not env.get("DATABASE_URL"):
        env["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
    return env


def run_child(mode: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--frames", str(args.frames)]
    command += ["--frame", args.frame, "--dialect", args.dialect]
    out = subprocess.run(command, env=_env(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _multipart(path: Path, size: int, csrf: str) -> tuple[Iterator[bytes], int]:
    fields = {"csrfmiddlewaretoken": csrf, "format": "auto", "dialect": "", "title": "bench"}
    head = b"".join(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    )
    head += (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="bench.sse"\r\n'
        "Content-Type: text/event-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()

    def parts() -> Iterator[bytes]:
        yield head
        yield from _file_blocks(path)
        yield tail

    return parts(), len(head) + size + len(tail)


def _file_blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        while block := file.read(64 * 1024):
            yield block


def _csrf(host: str, port: int) -> str:
    connection = http.client.HTTPConnection(host, port, timeout=60)
    connection.request("GET", "/upload/")
    response = connection.getresponse()
    response.read()
    cookie = response.getheader("Set-Cookie") or ""
    match = re.search(r"csrftoken=([^;]+)", cookie)
    if not match:
        raise SystemExit(f"no csrftoken cookie from /upload/ ({response.status})")
    return match.group(1)


def _post(url: str, mode: str, path: Path, size: int) -> int:
    host, port = url.removeprefix("http://").split(":")
    headers: dict[str, str] = {}
    if mode == "api":
        body: object = _file_blocks(path)
        target, length = "/api/captures?format=sse", size
        headers["Content-Type"] = "text/event-stream"
    else:
        csrf = _csrf(host, int(port))
        body, length = _multipart(path, size, csrf)
        target = "/upload/"
        headers["Content-Type"] = f"multipart/form-data; boundary={BOUNDARY}"
        headers["Cookie"] = f"csrftoken={csrf}"
    headers["Content-Length"] = str(length)
    connection = http.client.HTTPConnection(host, int(port), timeout=3600)
    connection.request("POST", target, body=body, headers=headers)  # type: ignore[arg-type]
    response = connection.getresponse()
    answer = response.read()
    if response.status not in (201, 302):
        raise SystemExit(f"{mode}: {response.status} {answer[:300]!r}")
    return response.status


def run_server(mode: str, args: argparse.Namespace) -> dict:
    """One upload to a fresh daphne; its growth read from /proc."""
    sys.path.insert(0, str(ROOT / "bench"))
    from server import daphne, scratch_site

    env = _env()
    scratch, site = scratch_site("upload-memory-", env["DATABASE_URL"])
    site.update(INSPECTOR_MAX_UPLOAD_BYTES=env["INSPECTOR_MAX_UPLOAD_BYTES"], INSPECTOR_DEBUG="0")
    data = build(args.frames, args.frame, args.dialect)
    path = scratch / "upload.sse"
    path.write_bytes(data)
    size = len(data)
    del data
    small = scratch / "small.sse"
    small.write_bytes(build(50, args.frame, args.dialect))
    with daphne(site, scratch / "daphne.log") as (url, proc):
        _post(url, mode, small, small.stat().st_size)  # warm up: imports, first queries
        reset_peak(proc.pid)
        before = status_kb("VmRSS", proc.pid)
        start = time.perf_counter()
        _post(url, mode, path, size)
        seconds = time.perf_counter() - start
        growth = (status_kb("VmHWM", proc.pid) - before) * 1024
    return {"mode": mode, "bytes": size, "growth": growth, "seconds": seconds}


def run(mode: str, args: argparse.Namespace) -> dict:
    figures = run_child(mode, args) if mode in ("streamed", "in-memory") else run_server(mode, args)
    figures["ratio"] = round(figures["growth"] / figures["bytes"], 2)
    figures.update(frame=args.frame, dialect=args.dialect, frames=args.frames)
    mb = 1024 * 1024
    print(
        f"{mode:>9} {args.dialect}/{args.frame}: upload {figures['bytes'] / mb:.1f} MB, peak"
        f" growth {figures['growth'] / mb:.1f} MB = {figures['ratio']}x the upload,"
        f" stored in {figures['seconds']:.1f} s",
        flush=True,
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--frame", choices=("empty", "text", "tool"), default="empty")
    parser.add_argument("--dialect", choices=("chat", "responses"), default="chat")
    parser.add_argument("--modes", default="streamed,api,form", help=",".join(MODES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.frame == "empty" and args.dialect != "chat":
        parser.error("--frame empty names no dialect: use --dialect chat")
    if args.child:
        child(args.child, args)
        return 0
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}: use {','.join(MODES)}")
    results = [run(mode, args) for mode in modes]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"args": vars(args), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
