"""One lens run on one stream, bounded in time and memory.

    answer = bounded_run("litellm", body, "sse", seconds=60, memory_mb=1024)
    answer["status"]   # "done", "timeout" or "failed"
    bounded_run(..., wanted=still_wanted)   # also "abandoned" once it says False

`run_one` reads the stream and runs the lens in this process; `bounded_run`
runs it in a child process with `resource.setrlimit(RLIMIT_AS)` for memory
and kills the child past its time: a lens is ported library code (or the
library itself) run on untrusted bytes, and a 50,000-call stream once kept a
worker busy for minutes after its client had left.

The child comes from a fork server (`multiprocessing`'s "forkserver"
context) that imported the lenses and the OpenAI SDK once: a fresh
`python -c` that imports them takes about 2 s, a fork of the warm server a
few milliseconds (bench/lens_runner.py measures both).  The server is a
clean interpreter of its own, so nothing of the caller (threads, database
connections) is forked.

While it waits for the child, `bounded_run` asks `wanted()` every
`check_every` seconds (the caller's "is anyone still waiting for this?");
at the first False it kills the child and answers "abandoned".  The limits
bound a run; `wanted` ends it early when its result would only be stored
for nobody.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import platform
import resource
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import orjson

from . import read_frames_and_result, run_lens
from .compare import divergences

DONE, TIMEOUT, FAILED, ABANDONED = "done", "timeout", "failed", "abandoned"
# What the fork server imports once, for every child it forks.
PRELOAD = ["inspector.lenses.warm"]

_context_lock = threading.Lock()
_context: Any = None


def run_one(name: str, body: bytes, fmt: str, tools: list[dict[str, Any]] | None) -> dict:
    """The lens's result and its divergences from strict, here and now."""
    started = time.perf_counter()
    frames, strict = read_frames_and_result(body, fmt)
    result = run_lens(name, frames, tools=tools, dialect=strict.dialect)
    return {
        "status": DONE,
        "result": result.to_dict(),
        "divergences": divergences(result, strict),
        "frames": len(frames),
        "seconds": round(time.perf_counter() - started, 4),
    }


def fork_context() -> Any:
    """The fork server's context, started once per process (it starts at the
    first child).  Other bounded work on untrusted bytes (the minimizer
    keeping a lens's divergence) forks its children from it too."""
    global _context
    with _context_lock:
        if _context is None:
            _context = multiprocessing.get_context("forkserver")
            _context.set_forkserver_preload(PRELOAD)
        return _context


def cap_memory(memory_mb: int) -> None:
    """In a child: cap its address space at `memory_mb` (a MemoryError past it),
    with one malloc arena (`one_malloc_arena`), so that the cap measures what
    the child allocates."""
    one_malloc_arena()
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# glibc's mallopt() parameter: the most malloc arenas a process makes.
M_ARENA_MAX = -8


def one_malloc_arena() -> None:
    """Make glibc's malloc serve every thread from one arena.  By default each
    new thread that allocates gets an arena of its own, which reserves 64 MB
    of address space however little it holds: a lens whose library starts
    threads (LiteLLM's logging workers) ran out of a 1 GB address-space cap
    with a fraction of it in use (3 runs of 5 of the bounded-minimizer tests
    failed so; none of 6 since).  A no-op where the C library is not glibc."""
    if platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.mallopt(M_ARENA_MAX, 1)


def _child(conn: Connection, job: dict[str, Any], memory_mb: int) -> None:
    """In the child: cap the address space, run, send the answer as JSON."""
    cap_memory(memory_mb)
    try:
        answer = run_one(job["lens"], job["body"], job["format"], job["tools"])
    except MemoryError:
        answer = {"status": FAILED, "detail": f"over the memory limit of {memory_mb} MB"}
    except Exception as error:  # the answer is the failure, told to the parent
        answer = {"status": FAILED, "detail": f"{type(error).__name__}: {error}"}
    answer["peak_memory_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        conn.send_bytes(orjson.dumps(answer))
    except MemoryError:
        conn.send_bytes(b'{"status":"failed","detail":"over the memory limit"}')
    conn.close()


def bounded_run(
    name: str,
    body: bytes,
    fmt: str,
    tools: list[dict[str, Any]] | None = None,
    *,
    seconds: float,
    memory_mb: int,
    wanted: Callable[[], bool] | None = None,
    check_every: float = 1.0,
) -> dict[str, Any]:
    """`run_one` in a child process limited to `memory_mb` of address space
    and killed after `seconds`, or as soon as `wanted()` (asked every
    `check_every` seconds) says False: its answer, or `{"status": "timeout"}`,
    `{"status": "abandoned"}` or `{"status": "failed", "detail": why}`; each
    with the child's `pid` (gone once this returns)."""
    context = fork_context()
    receive, send = context.Pipe(duplex=False)
    job = {"lens": name, "body": body, "format": fmt, "tools": tools}
    child = context.Process(target=_child, args=(send, job, memory_mb), daemon=True)
    started = time.perf_counter()
    child.start()
    send.close()
    try:
        answer = _answer(receive, child, _Watch(started, seconds, wanted, check_every))
        answer["pid"] = child.pid
        return answer
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join(1)


class _Watch:
    """When a wait for the child ends: its deadline, and whom to ask."""

    def __init__(
        self, started: float, seconds: float, wanted: Callable[[], bool] | None, every: float
    ) -> None:
        self.started, self.seconds, self.wanted, self.every = started, seconds, wanted, every
        self.deadline = started + seconds

    def next_wait(self) -> float:
        left = max(0.0, self.deadline - time.perf_counter())
        return left if self.wanted is None else min(left, self.every)

    def stop(self) -> dict[str, Any] | None:
        """Why to stop waiting now (a timeout or nobody waiting), or None."""
        if time.perf_counter() >= self.deadline:
            return {"status": TIMEOUT, "detail": f"stopped after {self.seconds:g} s"}
        if self.wanted is not None and not self.wanted():
            return {"status": ABANDONED, "detail": "stopped: nobody was waiting for it"}
        return None


def _answer(receive: Connection, child: Any, watch: _Watch) -> dict[str, Any]:
    while not receive.poll(watch.next_wait()):
        stopped = watch.stop()
        if stopped is not None:
            return stopped
    try:
        answer = orjson.loads(receive.recv_bytes())
    except (EOFError, OSError):
        child.join(1)
        return {"status": FAILED, "detail": f"the lens process died (exit {child.exitcode})"}
    answer["wall_seconds"] = round(time.perf_counter() - watch.started, 4)
    return answer
