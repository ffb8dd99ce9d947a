"""Lenses: what widely used client libraries would have assembled from the
very frames our reader produced.

    from inspector.lenses import read_stream, run_all, compare
    frames, strict = read_stream(data, "sse")
    results = run_all(frames)                 # {"openai": LensResult, ...}
    compare.divergences(results["litellm"], strict)

- `openai`: the OpenAI Python SDK itself (`ChatCompletionStreamState`), when
  it is installed (the optional extra `lenses`); else unavailable.
- `vercel`, `litellm`, `langchain`: small re-implementations of the
  documented rules of those libraries, each naming the upstream file and
  version it follows.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from inspector.assembly import STRICT, Frame, Result, StreamAssembler

from . import langchain, litellm, openai_sdk, vercel
from .base import TITLES, LensCall, LensResult

LensRunner = Callable[..., LensResult]

LENSES: dict[str, LensRunner] = {
    "openai": openai_sdk.run,
    "vercel": vercel.run,
    "litellm": litellm.run,
    "langchain": langchain.run,
}


def run_lens(
    name: str, frames: Iterable[Frame], *, tools: list[dict[str, Any]] | None = None
) -> LensResult:
    """One lens's result; KeyError for an unknown name.  `tools` (the
    request's tool definitions, when known) only matter to the OpenAI SDK,
    which parses the arguments of `strict` tools itself."""
    runner = LENSES[name]
    frames = list(frames)
    if name == "openai":
        return runner(frames, tools=tools)
    return runner(frames)


def run_all(
    frames: Iterable[Frame], *, tools: list[dict[str, Any]] | None = None
) -> dict[str, LensResult]:
    frames = list(frames)
    return {name: run_lens(name, frames, tools=tools) for name in LENSES}


def read_stream(
    body: bytes, fmt: str, *, policy: str = STRICT, chunk_bytes: int | None = None
) -> tuple[list[Frame], Result]:
    """Read a stream (`sse` or `jsonl`, as `stream_bytes` gives it) once:
    its frames and the assembler's result under `policy`."""
    stream = StreamAssembler(fmt, (policy,))
    frames: list[Frame] = []
    if chunk_bytes is None or chunk_bytes >= len(body):
        frames.extend(stream.feed(body))
    else:
        view = memoryview(body)
        for start in range(0, len(body), chunk_bytes):
            frames.extend(stream.feed(bytes(view[start : start + chunk_bytes])))
    frames.extend(stream.close())
    return frames, stream.results[policy]


__all__ = [
    "LENSES",
    "TITLES",
    "LensCall",
    "LensResult",
    "read_stream",
    "run_all",
    "run_lens",
]
