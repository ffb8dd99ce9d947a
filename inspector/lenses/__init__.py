"""Lenses: what widely used client libraries would have assembled from the
very frames our reader produced.

    from inspector.lenses import read_frames_and_result, run_all, compare
    frames, strict = read_frames_and_result(data, "sse")
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

from collections.abc import Iterable
from typing import Any

from inspector import assembly
from inspector.assembly import STRICT, Frame, Result

from . import langchain, litellm, openai_sdk, vercel
from .base import Lens, LensCall, LensResult

# Every lens by name, in the order the matrix shows them.
LENSES: dict[str, Lens] = {
    lens.name: lens for lens in (openai_sdk.LENS, vercel.LENS, litellm.LENS, langchain.LENS)
}


def title(name: str) -> str:
    """How a sentence names the lens's library; the name itself when unknown."""
    lens = LENSES.get(name)
    return lens.title if lens is not None else name


def run_lens(
    name: str, frames: Iterable[Frame], *, tools: list[dict[str, Any]] | None = None
) -> LensResult:
    """One lens's result; KeyError for an unknown name.  `tools` (the
    request's tool definitions, when known) only matter to the OpenAI SDK,
    which parses the arguments of `strict` tools itself."""
    return LENSES[name].run(list(frames), tools=tools)


def run_all(
    frames: Iterable[Frame], *, tools: list[dict[str, Any]] | None = None
) -> dict[str, LensResult]:
    frames = list(frames)
    return {name: run_lens(name, frames, tools=tools) for name in LENSES}


def read_frames_and_result(
    body: bytes, fmt: str, *, policy: str = STRICT, chunk_bytes: int | None = None
) -> tuple[list[Frame], Result]:
    """Read a stream (`sse` or `jsonl`, as `stream_bytes` gives it) once:
    its frames and the assembler's one result under `policy` (where
    `inspector.assembly.read_stream` gives a result per policy)."""
    frames, results = assembly.read_stream(body, fmt, (policy,), chunk_bytes=chunk_bytes)
    return frames, results[policy]


__all__ = [
    "LENSES",
    "Lens",
    "LensCall",
    "LensResult",
    "read_frames_and_result",
    "run_all",
    "run_lens",
    "title",
]
