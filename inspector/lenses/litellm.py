"""LiteLLM's stream chunk builder, re-implemented.

Follows BerriAI/litellm
`litellm/litellm_core_utils/streaming_chunk_builder_utils.py`,
`ChunkProcessor.get_combined_tool_content`, at 47fdbd55 (the "current
design" of the project's peer notes): what `litellm.stream_chunk_builder`
assembles after the stream from every chunk it saw.

The rules:

- One map keyed by the tool-call `index` alone, over every choice of every
  chunk.  A missing or non-integer index is 0 (LiteLLM's `Delta` fills in a
  missing index; later variants treat any non-int index as 0).
- An entry without a `function` object is skipped.
- A truthy `id`, `type` or `function.name` replaces the one held: the last
  wins, so repeats are harmless and an index reused by another call merges
  the two, keeping the last id and name.
- Truthy `function.arguments` fragments are joined; an arguments object is
  first serialised with `json.dumps` (LiteLLM's `Function`).
- Then, by index in ascending order, a call is emitted only when it holds
  both an id and a name: the others are dropped without a word.  Empty
  arguments become `"{}"`.
- Arguments are never parsed by LiteLLM; whether a call would run is its
  caller's `json.loads`.

Transport: LiteLLM streams OpenAI-compatible providers through the OpenAI
SDK, so a chunk with a truthy `error` raises `APIError` and data that is not
JSON raises `JSONDecodeError`.  The builder runs after the stream and checks
neither `[DONE]` nor finish reasons.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame

from .base import (
    DELIVERED,
    Lens,
    LensCall,
    LensError,
    LensResult,
    json_object,
    sdk_transport,
    text_of,
    wire,
)


def _index(entry: dict[str, Any]) -> int:
    index = entry.get("index")
    if isinstance(index, int) and not isinstance(index, bool):
        return index
    return 0


def _fragment(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return json.dumps(arguments)  # LiteLLM's Function(arguments=dict)
    return arguments


def run(frames: Iterable[Frame]) -> LensResult:
    result = LENS.new_result(calls_from=DELIVERED)
    calls: dict[int, dict[str, Any]] = {}
    try:
        for item in sdk_transport(wire(frames, result.notes)):
            choices = item.payload.get("choices")
            if not isinstance(choices, list):
                continue
            for choice in choices:
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                tool_calls = delta.get("tool_calls") if isinstance(delta, dict) else None
                if not isinstance(tool_calls, list):
                    continue
                for entry in tool_calls:
                    if not entry or not isinstance(entry, dict):
                        continue
                    function = entry.get("function")
                    if not isinstance(function, dict):
                        continue
                    held = calls.setdefault(
                        _index(entry), {"id": None, "name": None, "type": None, "arguments": []}
                    )
                    if entry.get("id"):
                        held["id"] = entry["id"]
                    if entry.get("type"):
                        held["type"] = entry["type"]
                    if function.get("name"):
                        held["name"] = function["name"]
                    if function.get("arguments"):
                        held["arguments"].append(_fragment(function["arguments"]))
    except LensError as error:
        result.error = error.text
        return result
    for index in sorted(calls):
        held = calls[index]
        if not (held["id"] and held["name"]):
            result.notes.append(
                f"index {index} dropped: it has no "
                + ("id" if not held["id"] else "name")
                + " (LiteLLM drops it silently)"
            )
            continue
        try:
            text = "".join(held["arguments"]) or "{}"
        except TypeError as error:  # a fragment that is neither text nor an object
            result.error = f"TypeError: {error}"
            result.calls = []
            return result
        arguments, parse_error = json_object(text)
        result.calls.append(
            LensCall(
                id=text_of(held["id"]),
                name=text_of(held["name"]),
                arguments_text=text,
                arguments=arguments,
                parse_error=parse_error,
            )
        )
    return result


class LiteLLMLens(Lens):
    name = "litellm"
    title = "LiteLLM"
    library = "BerriAI/litellm (stream_chunk_builder)"
    version = "streaming_chunk_builder_utils.py @47fdbd55"

    def run(
        self, frames: Iterable[Frame], *, tools: list[dict[str, Any]] | None = None
    ) -> LensResult:
        return run(frames)  # the library hands arguments on as text: `tools` don't matter


LENS = LiteLLMLens()
