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
- An entry without a `function` object is skipped, unless it is a custom
  (free-text) tool call: `type: "custom"` with a `custom` object, whose
  `custom.name` and `custom.input` fragments are combined the same way
  (its test `test_get_combined_tool_content_custom_tool_call`).  The input
  is handed on as it is: never JSON, never `"{}"`.
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
from collections.abc import Iterable, Iterator
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
    try:
        calls = _combined_tool_content(frames, result.notes)
    except LensError as error:
        result.error = error.text
        return result
    try:
        result.calls.extend(_emitted_calls(calls, result.notes))
    except TypeError as error:  # a fragment that is neither text nor an object
        result.error = f"TypeError: {error}"
        result.calls = []
    return result


def _combined_tool_content(frames: Iterable[Frame], notes: list[str]) -> dict[int, dict[str, Any]]:
    """`get_combined_tool_content`: one entry per index over every chunk; the
    last truthy id, type and name win, arguments fragments are kept in order."""
    calls: dict[int, dict[str, Any]] = {}
    for item in sdk_transport(wire(frames, notes)):
        for entry in _tool_call_entries(item.payload):
            held = calls.setdefault(
                _index(entry), {"id": None, "name": None, "type": None, "arguments": []}
            )
            function = _function_of(entry)
            if entry.get("id"):
                held["id"] = entry["id"]
            if entry.get("type"):
                held["type"] = entry["type"]
            if function.get("name"):
                held["name"] = function["name"]
            fragment = function.get("input" if _is_custom(entry) else "arguments")
            if fragment:
                held["arguments"].append(_fragment(fragment))
    return calls


def _is_custom(entry: dict[str, Any]) -> bool:
    return not isinstance(entry.get("function"), dict) and isinstance(entry.get("custom"), dict)


def _function_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's `function`, or a custom call's `custom` (name and input)."""
    return entry["custom"] if _is_custom(entry) else entry["function"]


def _tool_call_entries(payload: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every tool-call entry with a `function` object (or a custom call's
    `custom` object), over every choice."""
    choices = payload.get("choices")
    if not isinstance(choices, list):
        return
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        tool_calls = delta.get("tool_calls") if isinstance(delta, dict) else None
        if not isinstance(tool_calls, list):
            continue
        for entry in tool_calls:
            if entry and isinstance(entry, dict):
                if isinstance(entry.get("function"), dict) or _is_custom(entry):
                    yield entry


def _emitted_calls(calls: dict[int, dict[str, Any]], notes: list[str]) -> list[LensCall]:
    """The calls by index that hold both an id and a name (a note for each
    dropped one); TypeError when a fragment is neither text nor an object."""
    emitted = []
    for index in sorted(calls):
        held = calls[index]
        if not (held["id"] and held["name"]):
            missing = "id" if not held["id"] else "name"
            notes.append(f"index {index} dropped: it has no {missing} (LiteLLM drops it silently)")
            continue
        emitted.append(_lens_call(held))
    return emitted


def _lens_call(held: dict[str, Any]) -> LensCall:
    """One combined call as LiteLLM hands it on: a function call's empty
    arguments become `"{}"`; a custom call's input is free text, not parsed."""
    if held["type"] == "custom":
        text = "".join(held["arguments"])
        return LensCall(
            id=text_of(held["id"]),
            name=text_of(held["name"]),
            arguments_text=text,
            parse_error="a custom tool call's input is free text, not JSON arguments",
            kind="custom",
        )
    text = "".join(held["arguments"]) or "{}"
    arguments, parse_error = json_object(text)
    return LensCall(
        id=text_of(held["id"]),
        name=text_of(held["name"]),
        arguments_text=text,
        arguments=arguments,
        parse_error=parse_error,
    )


class LiteLLMLens(Lens):
    name = "litellm"
    title = "LiteLLM"
    library = "BerriAI/litellm (stream_chunk_builder)"
    version = "streaming_chunk_builder_utils.py @47fdbd55"

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        return run(frames)  # the library hands arguments on as text: `tools` don't matter


LENS = LiteLLMLens()
