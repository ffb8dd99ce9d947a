"""LangChain's streamed tool-call merge, re-implemented.

Follows langchain-ai/langchain:

- `libs/partners/openai/langchain_openai/chat_models/base.py`
  (`_convert_chunk_to_generation_chunk`, `_convert_delta_to_message_chunk`)
  at 00539b50;
- `libs/core/langchain_core/utils/_merge.py` (`merge_lists`, `merge_dicts`)
  at 0448fad2, with the id-consistency check of #35281;
- `libs/core/langchain_core/messages/ai.py` (`AIMessageChunk.__add__`,
  `init_tool_calls`) and `libs/core/langchain_core/utils/json.py`
  (`parse_partial_json`), as the project's peer notes cite them.

The rules:

- langchain-openai streams through the OpenAI SDK and reads each chunk's
  `model_dump()`: every field the SDK's types know is present, `None` when
  the wire left it out.  So a missing `index` arrives as `None`, not as a
  missing key: the `KeyError` guard that would drop every tool-call chunk of
  the delta never fires on the SDK path, and an index-less chunk becomes a
  chunk of its own.  A tool-call entry without `function` (`None`) raises
  AttributeError from `rtc["function"].get(...)`.
- Only `choices[0]` is read; a choice whose `delta` is null is skipped.
- Each delta's entries become tool-call chunks `{name, args, id, index}`
  (`name`, `args`, `id` must be strings or null: pydantic rejects others).
- Adding message chunks merges their tool-call chunks with `merge_lists`:
  the first chunk's list is taken as it is; every later entry with an int
  index is merged into the first earlier entry with the same index whose id
  is consistent (either side null or `""`, or both equal), else appended;
  an entry without an int index is appended.
- `merge_dicts` concatenates strings (so a name repeated on every chunk is
  doubled), except an `id` equal to the one held, which is skipped; the
  index takes the last value.
- Finally each chunk's `args` go through `parse_partial_json` (blank args
  are `{}`): a dict makes a tool call (name `""` when null), anything else an
  invalid tool call, which is not run.  Truncated arguments can therefore
  come out "repaired" as a valid call.

Transport: the OpenAI SDK raises `APIError` for a chunk with a truthy
`error` and `JSONDecodeError` for data that is not JSON.
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
    WireItem,
    describe_exception,
    sdk_transport,
    text_of,
    wire,
)

_TOOL_CALL_FIELDS = ("index", "id", "function", "type")
_FUNCTION_FIELDS = ("arguments", "name")


# -- the OpenAI SDK's model_dump() of a constructed chunk --------------------


def _dump_tool_call(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry
    dumped = {key: entry.get(key) for key in _TOOL_CALL_FIELDS}
    dumped.update((key, value) for key, value in entry.items() if key not in dumped)
    function = dumped["function"]
    if isinstance(function, dict):
        named = {key: function.get(key) for key in _FUNCTION_FIELDS}
        named.update((key, value) for key, value in function.items() if key not in named)
        dumped["function"] = named
    return dumped


def _dump_delta(delta: Any) -> Any:
    if not isinstance(delta, dict):
        return delta
    dumped = dict(delta)
    tool_calls = delta.get("tool_calls")
    dumped["tool_calls"] = (
        [_dump_tool_call(entry) for entry in tool_calls]
        if isinstance(tool_calls, list)
        else tool_calls
    )
    return dumped


# -- langchain_core.utils._merge ---------------------------------------------


def merge_dicts(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    merged = left.copy()
    for key, value in right.items():
        if key not in merged or (value is not None and merged[key] is None):
            merged[key] = value
        elif value is None:
            continue
        elif type(merged[key]) is not type(value):
            raise TypeError(
                f'additional_kwargs["{key}"] already exists in this message,'
                " but with a different type."
            )
        elif isinstance(merged[key], str):
            if (key == "index" and merged[key].startswith("lc_")) or (
                key == "id" and merged[key] == value
            ):
                continue
            merged[key] += value
        elif isinstance(merged[key], dict):
            merged[key] = merge_dicts(merged[key], value)
        elif merged[key] == value:
            continue
        elif isinstance(merged[key], int):
            merged[key] = value if key == "index" else merged[key] + value
        else:
            raise TypeError(
                f"Additional kwargs key {key} already exists in left dict and "
                f"value has unsupported type {type(merged[key])}."
            )
    return merged


def _mergeable_index(index: Any) -> bool:
    return isinstance(index, int) or (isinstance(index, str) and index.startswith("lc_"))


def merge_lists(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged = left.copy()
    for entry in right:
        if "index" in entry and _mergeable_index(entry["index"]):
            targets = [
                position
                for position, held in enumerate(merged)
                if "index" in held
                and held["index"] == entry["index"]
                and (
                    held.get("id") in (None, "")
                    or entry.get("id") in (None, "")
                    or held.get("id") == entry.get("id")
                )
            ]
            if targets:
                new = {key: value for key, value in entry.items() if key != "type"}
                merged[targets[0]] = merge_dicts(merged[targets[0]], new)
            else:
                merged.append(entry)
        else:
            merged.append(entry)
    return merged


# -- langchain_core.utils.json -----------------------------------------------


class RepairBudgetExceeded(Exception):
    """The lens's own guard: `parse_partial_json` can take quadratic time on
    long broken text; past this much work the lens stops (LangChain would
    go on)."""


REPAIR_BUDGET = 50_000_000  # characters handed to json.loads while repairing
_JSON_SPACE = " \t\n\r"


_UNREPAIRED = object()  # no cut of the text parsed


def parse_partial_json(s: str, *, strict: bool = False) -> Any:
    """`parse_partial_json`: json.loads, else close open strings and
    brackets, dropping trailing characters until it parses.

    Same result as upstream's one-character-at-a-time loop, with two skips
    that cannot change it: when json.loads fails at position p inside the
    candidate's text, every longer candidate fails there too, so the text is
    cut to p at once; when it fails in the closing brackets and the text ends
    in white space (outside any string, or the failure would be an
    unterminated string inside the text), that white space goes at once.
    """
    try:
        return json.loads(s, strict=strict)
    except json.JSONDecodeError:
        pass
    scanned = _escaped_and_closing(s)
    if scanned is None:
        return None
    pieces, closing = scanned
    repaired = _parse_dropping_the_tail(pieces, closing, strict)
    if repaired is _UNREPAIRED:
        return json.loads(s, strict=strict)  # raises, as upstream's last attempt does
    return repaired


def _escaped_and_closing(s: str) -> tuple[list[str], str] | None:
    """The text as upstream rewrites it, one piece per character (a newline
    inside a string becomes "\\n", an open string is closed), and the
    brackets still open, as the text that closes them; None when a closing
    bracket closes nothing (upstream then gives None)."""
    new_chars: list[str] = []
    stack: list[str] = []
    is_inside_string = False
    escaped = False
    for char in s:
        new_char = char
        if is_inside_string:
            if char == '"' and not escaped:
                is_inside_string = False
            elif char == "\n" and not escaped:
                new_char = "\\n"
            elif char == "\\":
                escaped = not escaped
            else:
                escaped = False
        elif char == '"':
            is_inside_string = True
            escaped = False
        elif char == "{":
            stack.append("}")
        elif char == "[":
            stack.append("]")
        elif char in {"}", "]"}:
            if stack and stack[-1] == char:
                stack.pop()
            else:
                return None
        new_chars.append(new_char)
    if is_inside_string:
        if escaped:
            new_chars.pop()
        new_chars.append('"')
    return new_chars, "".join(reversed(stack))


def _parse_dropping_the_tail(new_chars: list[str], closing: str, strict: bool) -> Any:
    """The first candidate that parses, dropping pieces from the end (with the
    two skips `parse_partial_json` describes); _UNREPAIRED when none does."""
    # new_chars may hold "\\n" pairs: positions count the joined text.
    text = "".join(new_chars)
    cuts = [0]
    for piece in new_chars:
        cuts.append(cuts[-1] + len(piece))
    length = len(new_chars)
    spent = 0
    while length:
        candidate = text[: cuts[length]] + closing
        spent += len(candidate)
        if spent > REPAIR_BUDGET:
            raise RepairBudgetExceeded(f"no repair within {REPAIR_BUDGET} characters of parsing")
        try:
            return json.loads(candidate, strict=strict)
        except json.JSONDecodeError as error:
            if error.pos < cuts[length]:
                # The first piece reaching past the failure: cut before it.
                length = _piece_at(cuts, error.pos, length)
            else:
                length -= 1
                while length and new_chars[length - 1] in _JSON_SPACE:
                    length -= 1
    return _UNREPAIRED


def _piece_at(cuts: list[int], pos: int, length: int) -> int:
    """The number of pieces that end at or before `pos` (so the candidate
    keeps every character before the failing one)."""
    low, high = 0, length
    while low < high:
        middle = (low + high + 1) // 2
        if cuts[middle] <= pos:
            low = middle
        else:
            high = middle - 1
    return low


# -- langchain_openai + AIMessageChunk ---------------------------------------


def _validated(chunk: dict[str, Any], where: str) -> dict[str, Any]:
    """AIMessageChunk's pydantic validation of one ToolCallChunk."""
    for key in ("name", "args", "id"):
        if chunk[key] is not None and not isinstance(chunk[key], str):
            raise LensError("ValidationError", f"{where}.{key}: Input should be a valid string")
    index = chunk["index"]
    if isinstance(index, float) and index.is_integer():
        chunk["index"] = int(index)
    elif isinstance(index, str) and index.strip().lstrip("-").isdigit():
        chunk["index"] = int(index)
    elif index is not None and not isinstance(index, int):
        raise LensError("ValidationError", f"{where}.index: Input should be a valid integer")
    return chunk


def _tool_call_chunks(delta: dict[str, Any]) -> list[dict[str, Any]]:
    """`_convert_delta_to_message_chunk`'s tool-call chunks."""
    raw_tool_calls = delta.get("tool_calls")
    if not raw_tool_calls:
        return []
    try:
        chunks = [
            {
                "name": rtc["function"].get("name"),
                "args": rtc["function"].get("arguments"),
                "id": rtc.get("id"),
                "index": rtc["index"],
                "type": "tool_call_chunk",
            }
            for rtc in raw_tool_calls
        ]
    except KeyError:
        return []
    return [_validated(chunk, f"tool_call_chunks.{n}") for n, chunk in enumerate(chunks)]


def run(frames: Iterable[Frame]) -> LensResult:
    result = LENS.new_result(calls_from=DELIVERED, gates_on_parse=True)
    try:
        merged = _merged_tool_call_chunks(frames, result.notes)
    except LensError as error:
        result.error = error.text
        return result
    except TypeError as error:  # merge_dicts on clashing types
        result.error = describe_exception(error)
        return result
    result.calls.extend(_tool_call(chunk) for chunk in merged)
    return result


def _merged_tool_call_chunks(frames: Iterable[Frame], notes: list[str]) -> list[dict[str, Any]]:
    """The tool-call chunks of every message chunk added up (`merge_lists`)."""
    merged: list[dict[str, Any]] | None = None
    for item in sdk_transport(wire(frames, notes)):
        chunks = _message_tool_call_chunks(item)
        merged = chunks if merged is None else merge_lists(merged, chunks)
    return merged or []


def _message_tool_call_chunks(item: WireItem) -> list[dict[str, Any]]:
    """The tool-call chunks of one message chunk: of `choices[0]` only, none
    for a usage-only chunk or a null delta."""
    choices = item.payload.get("choices")
    if not choices:  # a usage-only message chunk: no tool-call chunks
        return []
    if not isinstance(choices, list):
        raise LensError("TypeError", f"frame {item.number}: choices is not a list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise LensError(
            "TypeError", f"frame {item.number}: choices[0] is a {type(choice).__name__}"
        )
    # model_dump() gives every choice a delta, None when it is absent.
    delta = choice.get("delta")
    if delta is None:
        return []
    try:
        return _tool_call_chunks(_dump_delta(delta))
    except LensError:
        raise
    except Exception as error:  # e.g. rtc["function"].get on None
        raise LensError(type(error).__name__, str(error)) from None


def _tool_call(chunk: dict[str, Any]) -> LensCall:
    """`init_tool_calls`: a merged chunk whose arguments parse (partially) to
    an object is a tool call; anything else an invalid one, with why."""
    args = chunk["args"]
    arguments, parse_error, name = None, None, chunk["name"]
    try:
        parsed = parse_partial_json(args) if args else {}
    except Exception as error:
        parse_error = "invalid tool call: " + describe_exception(error)
    else:
        if isinstance(parsed, dict):
            arguments, name = parsed, chunk["name"] or ""
        else:
            parse_error = "invalid tool call: parse_partial_json gives " + (
                "None" if parsed is None else type(parsed).__name__
            )
    return LensCall(
        id=text_of(chunk["id"]),
        name=text_of(name),
        arguments_text=text_of(args) if args is not None else "",
        arguments=arguments,
        parse_error=parse_error,
    )


class LangChainLens(Lens):
    name = "langchain"
    title = "LangChain"
    library = "langchain-core + langchain-openai"
    version = "_merge.py @0448fad2 (#35281); langchain_openai base.py @00539b50; ai.py @0026dff2"

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        return run(frames)  # the library hands arguments on as text: `tools` don't matter


LENS = LangChainLens()
