"""Lenses: what widely used client libraries would have assembled from the
very frames our reader produced.

    from inspector.lenses import read_frames_and_result, run_all, compare
    frames, strict = read_frames_and_result(data, "sse")
    results = run_all(frames)                 # {"openai": LensResult, ...}
    compare.divergences(results["litellm"], strict)

- `openai`: the OpenAI Python SDK itself (`ChatCompletionStreamState` on chat
  streams, `responses.stream` on Responses streams), `anthropic` (the
  Anthropic SDK's `messages.stream`), `google-genai` (the Google Gen AI
  SDK's `generate_content_stream`), `litellm` (`completion(stream=True)` and
  `stream_chunk_builder`) and `langchain` (a chat model's `.stream()` chunks
  added up), when installed (the optional extra `lenses`); else unavailable.
- `vercel`: the Vercel AI SDK (`ai` and the dialect's provider) run in Node
  on every dialect (`vercel.py`, `node/`), when Node and the pinned npm
  packages are installed (`make`); else unavailable.

Each lens reads the dialects its library reads (`Lens.dialects`);
`lenses_for(dialect)` names a dialect's matrix columns.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from inspector import assembly
from inspector.assembly import STRICT, Frame, Result

from . import anthropic_sdk, google_genai, langchain, litellm, openai_sdk, vercel
from .base import Lens, LensCall, LensResult

# LiteLLM fetches its model cost map from GitHub when first imported, unless told
# not to; `litellm._load` tells it, but another library may import it first.  Every
# process that imports the lenses (the server, the lens fork server, the tests) tells
# it here, before any lens runs.
for _key, _value in litellm.OFFLINE.items():
    os.environ.setdefault(_key, _value)

# Every lens by name, in the order the matrix shows them.
LENSES: dict[str, Lens] = {
    lens.name: lens
    for lens in (
        openai_sdk.LENS,
        anthropic_sdk.LENS,
        google_genai.LENS,
        vercel.LENS,
        litellm.LENS,
        langchain.LENS,
    )
}


def lenses_for(dialect: str) -> list[str]:
    """The names of the lenses that read `dialect`, in the matrix's order."""
    return [name for name, lens in LENSES.items() if dialect in lens.dialects]


def title(name: str) -> str:
    """How a sentence names the lens's library; the name itself when unknown."""
    lens = LENSES.get(name)
    return lens.title if lens is not None else name


def run_lens(
    name: str,
    frames: Iterable[Frame],
    *,
    tools: list[dict[str, Any]] | None = None,
    dialect: str = "chat",
) -> LensResult:
    """One lens's result on a stream of `dialect`; KeyError for an unknown
    name.  `tools` (the request's tool definitions, when known) only matter
    to the OpenAI SDK, which parses the arguments of `strict` tools itself."""
    lens = LENSES[name]
    if dialect not in lens.dialects:
        return lens.new_result(
            available=False,
            calls_from=None,
            notes=[f"{lens.title} does not read {dialect} streams"],
        )
    return lens.run(list(frames), tools=tools, dialect=dialect)


def run_all(
    frames: Iterable[Frame],
    *,
    tools: list[dict[str, Any]] | None = None,
    dialect: str = "chat",
) -> dict[str, LensResult]:
    """Every lens of `dialect` on the frames, by name."""
    frames = list(frames)
    return {
        name: run_lens(name, frames, tools=tools, dialect=dialect) for name in lenses_for(dialect)
    }


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
    "lenses_for",
    "read_frames_and_result",
    "run_all",
    "run_lens",
    "title",
]
