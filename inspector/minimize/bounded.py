"""Minimize keeping a lens's divergence, in a child process bounded in time
and memory.

    found = minimize_keeping_lens("litellm", data, "sse", deadline_s=30, memory_mb=1024,
                                  progress=lambda p: print(p.line()))

A lens runs a client library (LiteLLM, LangChain, the official SDKs) on
untrusted bytes, and the search runs it on hundreds of candidate streams.
Run in the server's process, that library code shares it: LiteLLM alone
imports 200 MB, starts threads and event loops of its own, and a run that
hangs or crashes takes the server with it.  So the whole search (the
target's signature on the original, then every candidate) runs in one child
forked from the lens fork server (`inspector.lenses.runner`), with its
address space capped; it reports its progress and its result through a
pipe as JSON, and is killed when it outlives its budget by `grace_s`.

The errors the search raises in the child (`NothingToMinimize` and its
subclasses, `UnreadableInput`) are raised again here with their message, so
a caller handles them as if the search had run in its own process.

Pure: no Django.
"""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import Any

import orjson

from inspector.assembly import AUTO_DIALECT, UnreadableInput
from inspector.lenses.runner import cap_memory, fork_context

from .lens import LensAgrees, LensChoiceError, LensUnavailable, UnknownLens, lens_target
from .progress import Progress, ProgressCallback
from .signature import failure_signature
from .stream import Minimized, NothingToMinimize, NotRefused, TargetNotMet, minimize

# The errors a child may report, by name: raised again in the parent.
_ERRORS: dict[str, type[Exception]] = {
    error.__name__: error
    for error in (
        NothingToMinimize,
        NotRefused,
        TargetNotMet,
        LensChoiceError,
        UnknownLens,
        LensUnavailable,
        LensAgrees,
        UnreadableInput,
    )
}


class LensSearchFailed(NothingToMinimize):
    """The child ended without a result: out of time or memory, or dead."""


def _search(send: Connection, job: dict[str, Any]) -> None:
    """In the child: the target, then the search, each report sent as it comes."""

    def report(progress: Progress) -> None:
        send.send_bytes(orjson.dumps({"progress": progress.to_dict()}))

    target = lens_target(job["lens"], job["data"], job["fmt"], tools=job["tools"])
    found = minimize(
        target.data,
        target.fmt,
        target=target,
        keeps=target.description,
        deadline_s=job["deadline_s"],
        progress=report,
        dialect=job["dialect"],
    )
    fields = {
        "fmt": found.fmt,
        "steps": found.steps,
        "tests_run": found.tests_run,
        "timed_out": found.timed_out,
        "original_bytes": found.original_bytes,
        "original_frames": found.original_frames,
        "frames": found.frames,
        "target": found.target,
    }
    send.send_bytes(orjson.dumps({"done": fields}))
    send.send_bytes(found.data)


def _child(send: Connection, job: dict[str, Any], memory_mb: int) -> None:
    cap_memory(memory_mb)
    try:
        _search(send, job)
    except MemoryError:
        detail = f"over the memory limit of {memory_mb} MB"
        send.send_bytes(orjson.dumps({"error": "LensSearchFailed", "detail": detail}))
    except Exception as error:  # told to the parent, raised there again
        send.send_bytes(orjson.dumps(_error_message(error, memory_mb)))
    send.close()


def _error_message(error: Exception, memory_mb: int) -> dict[str, str]:
    """What the parent is told of the search's error.  A C extension whose
    allocation failed under the cap may raise SystemError ("error return
    without exception set") instead of MemoryError: that is the cap too."""
    if isinstance(error, SystemError) and "without exception set" in str(error):
        detail = f"over the memory limit of {memory_mb} MB (SystemError: {error})"
        return {"error": "LensSearchFailed", "detail": detail}
    return {"error": type(error).__name__, "detail": str(error)}


def _raise(message: dict[str, Any]) -> None:
    kind = _ERRORS.get(message["error"])
    if kind is None:
        raise LensSearchFailed(f"the search failed: {message['error']}: {message['detail']}")
    raise kind(message["detail"])


def _minimized(fields: dict[str, Any], data: bytes, dialect: str) -> Minimized:
    """The child's result; the strict signature is read here (pure assembly)."""
    signature = failure_signature(data, fields["fmt"], dialect)
    return Minimized(
        data=data,
        code=signature.code if signature else None,
        signature=signature,
        **fields,
    )


def _follow(
    receive: Connection, deadline: float, progress: ProgressCallback | None, dialect: str
) -> Minimized:
    """Read the child's reports until its result, an error, or the deadline."""
    while True:
        if not receive.poll(max(0.0, deadline - time.monotonic())):
            raise LensSearchFailed("the search did not end in time: its process was stopped")
        try:
            message = orjson.loads(receive.recv_bytes())
            if "done" in message:
                return _minimized(message["done"], receive.recv_bytes(), dialect)
        except (EOFError, OSError):
            raise LensSearchFailed("the search's process died before its result") from None
        if "error" in message:
            _raise(message)
        if progress is not None:
            fields = {k: v for k, v in message["progress"].items() if k != "fraction"}
            progress(Progress(**fields))


def minimize_keeping_lens(
    lens: str,
    data: bytes,
    fmt: str,
    *,
    tools: list[dict[str, Any]] | None = None,
    dialect: str = AUTO_DIALECT,
    deadline_s: float,
    memory_mb: int,
    progress: ProgressCallback | None = None,
    grace_s: float = 10.0,
) -> Minimized:
    """`minimize` keeping lens `lens`'s divergence from strict on `data`,
    run in a bounded child process (see the module docstring).  Raises what
    `lens_target` and `minimize` raise, and `LensSearchFailed` when the child
    ends without a result."""
    context = fork_context()
    receive, send = context.Pipe(duplex=False)
    job = {
        "lens": lens,
        "data": data,
        "fmt": fmt,
        "tools": tools,
        "deadline_s": deadline_s,
        "dialect": dialect,
    }
    child = context.Process(target=_child, args=(send, job, memory_mb), daemon=True)
    child.start()
    send.close()
    try:
        return _follow(receive, time.monotonic() + deadline_s + grace_s, progress, dialect)
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join(1)
