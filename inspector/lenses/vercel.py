"""The Vercel AI SDK's streaming tool-call tracker, re-implemented.

Follows vercel/ai `packages/provider-utils/src/streaming-tool-call-tracker.ts`
(`StreamingToolCallTracker`) as the project's peer notes document it at
snapshot HEAD ed857f50 (2026-08-22): after #18382 ("handle streamed tool
calls with irregular or missing indexes") and #19169 (a stream without a
finish reason is an error).  Around it, the OpenAI-compatible provider
`packages/openai-compatible/src/chat/openai-compatible-chat-language-model.ts`
(read at 03955ee6): its chunk schema, its error chunks, its per-index pending
buffer, its `flush()`.  Parsing follows
`packages/ai/src/generate-text/parse-tool-call.ts`.

The rules:

- Each chunk is validated against the provider's chunk schema
  (`index` number nullish, `id`/`name`/`arguments` string nullish, `function`
  an object, `role` "assistant" or "", `choices` an array).  A chunk that
  fails, or that is an error chunk (it has an `error` key), becomes an
  `error` stream part and is otherwise skipped; the stream goes on.
- Only `choices[0]` is read.
- Pending buffer: deltas are held per `index` until one carries a
  `function.name` that is not null (`""` counts); then one combined delta
  (first id, all arguments so far, that name) goes to the tracker and that
  index passes straight through afterwards.  A delta without an index skips
  the buffer.  At the end, a pending index that never got a name is
  forwarded without one (the tracker then throws).
- Tracker, per delta: a non-empty `id` finds its call by id; else an
  `index` finds the call that last held it; else the latest call.  No call
  found: a new call, which needs an id (`"Expected 'id' to be a string."`)
  and a name (`"Expected 'function.name' to be a string."`), else it throws.
  A call's id and name are fixed when it is made: later names are ignored,
  later ids only look calls up.  Arguments are appended.
- Calls are finished only at the end of the stream, in the order they were
  made; the arguments text is handed over raw.  A throw errors the stream
  before that, so no call is handed over.
- A stream that never had a finish reason ends with
  `InvalidResponseDataError: Response stream ended without a finish reason.`
  (after the calls were handed over: placement by code reading).
- Parsing: blank arguments are `{}`; otherwise JSON.parse, and text that
  doesn't parse to an object is `InvalidToolInputError` (the call would be
  marked invalid, not run).

A later stored version of the tracker (09ab65e3) resolves calls with more
evidence (names, "ambiguous" deltas dropped, generated ids); this lens keeps
the documented id -> index -> latest rules the notes cite.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame

from .base import DELIVERED, Lens, LensCall, LensError, LensResult, text_of, wire

INVALID_RESPONSE = "InvalidResponseDataError"


# -- the provider's chunk schema (a zod union: chunk, else error) ------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _object_fields(value: Any, fields: dict[str, Any], where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is not an object"
    for key, check in fields.items():
        problem = check(value.get(key), f"{where}.{key}")
        if problem:
            return problem
    return None


def _nullish_of(check):
    def validate(value: Any, where: str) -> str | None:
        if value is None:
            return None
        return check(value, where)

    return validate


def _scalar(kind: str, test):
    def validate(value: Any, where: str) -> str | None:
        return None if test(value) else f"{where} is not a {kind}"

    return validate


def _obj(fields: dict[str, Any]):
    def validate(value: Any, where: str) -> str | None:
        return _object_fields(value, fields, where)

    return validate


def _array(item):
    def validate(value: Any, where: str) -> str | None:
        if not isinstance(value, list):
            return f"{where} is not an array"
        for position, entry in enumerate(value):
            problem = item(entry, f"{where}[{position}]")
            if problem:
                return problem
        return None

    return validate


_STRING = _nullish_of(_scalar("string", _is_str))
_NUMBER = _nullish_of(_scalar("number", _is_number))


def _role(value: Any, where: str) -> str | None:
    if value is None or value in ("assistant", ""):
        return None
    return f"{where} is not 'assistant' or ''"


_TOOL_CALL = _obj(
    {
        "index": _NUMBER,
        "id": _STRING,
        "function": _obj({"name": _STRING, "arguments": _STRING}),
        "extra_content": _nullish_of(
            _obj({"google": _nullish_of(_obj({"thought_signature": _STRING}))})
        ),
    }
)
_CHUNK = _obj(
    {
        "id": _STRING,
        "created": _NUMBER,
        "model": _STRING,
        "choices": _array(
            _obj(
                {
                    "delta": _nullish_of(
                        _obj(
                            {
                                "role": _role,
                                "content": _STRING,
                                "reasoning_content": _STRING,
                                "reasoning": _STRING,
                                "tool_calls": _nullish_of(_array(_TOOL_CALL)),
                            }
                        )
                    ),
                    "finish_reason": _STRING,
                }
            )
        ),
        "usage": _nullish_of(
            _obj(
                {
                    "prompt_tokens": _NUMBER,
                    "completion_tokens": _NUMBER,
                    "total_tokens": _NUMBER,
                    "prompt_tokens_details": _nullish_of(_obj({"cached_tokens": _NUMBER})),
                    "completion_tokens_details": _nullish_of(
                        _obj(
                            {
                                "reasoning_tokens": _NUMBER,
                                "accepted_prediction_tokens": _NUMBER,
                                "rejected_prediction_tokens": _NUMBER,
                            }
                        )
                    ),
                }
            )
        ),
    }
)
_ERROR_CHUNK = _obj(
    {
        "error": _obj(
            {
                "message": _scalar("string", _is_str),
                "type": _STRING,
                "code": _nullish_of(
                    _scalar("string or number", lambda v: _is_str(v) or _is_number(v))
                ),
            }
        )
    }
)


def _error_text(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return text_of(error) or "null"


def _js_json(text: str) -> Any:
    """JSON.parse: like json.loads without NaN or Infinity."""

    def reject(constant: str) -> Any:
        raise json.JSONDecodeError(f"Unexpected token {constant[0]}", text, 0)

    return json.loads(text, parse_constant=reject)


# -- the tracker -------------------------------------------------------------


class _Call:
    __slots__ = ("id", "name", "arguments")

    def __init__(self, id: Any, name: Any, arguments: str) -> None:
        self.id = id
        self.name = name
        self.arguments = arguments


class _Tracker:
    """StreamingToolCallTracker: id, then index, then the latest call."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_id: dict[str, _Call] = {}
        self.by_index: dict[Any, _Call] = {}
        self.latest: _Call | None = None

    def process(self, delta: dict[str, Any]) -> None:
        id = delta.get("id")
        index = delta.get("index")
        function = delta.get("function") or {}
        if id is not None and len(id) > 0:
            call = self.by_id.get(id)
        elif index is not None:
            call = self.by_index.get(index)
        else:
            call = self.latest
        if call is None:
            call = self._new(id, function)
        else:
            fragment = function.get("arguments")
            if fragment is not None:
                call.arguments += fragment
        if index is not None:
            self.by_index[index] = call
        self.latest = call

    def _new(self, id: Any, function: dict[str, Any]) -> _Call:
        if id is None:
            raise LensError(INVALID_RESPONSE, "Expected 'id' to be a string.")
        name = function.get("name")
        if name is None:
            raise LensError(INVALID_RESPONSE, "Expected 'function.name' to be a string.")
        call = _Call(id, name, function.get("arguments") or "")
        self.calls.append(call)
        self.by_id[id] = call
        return call


class _Pending:
    __slots__ = ("id", "arguments")

    def __init__(self, id: Any) -> None:
        self.id = id
        self.arguments = ""


class _Model:
    """The openai-compatible chat model's stream transform."""

    def __init__(self, result: LensResult) -> None:
        self.result = result
        self.tracker = _Tracker()
        self.pending: dict[Any, _Pending] = {}
        self.forwarded: set[Any] = set()
        self.finish_seen = False
        self.errors: list[str] = []
        self.other_choices_noted = False

    def error_part(self, text: str) -> None:
        self.errors.append(text)

    def chunk(self, number: int, value: Any) -> None:
        problem = _CHUNK(value, "chunk")
        if problem is not None:
            if _ERROR_CHUNK(value, "chunk") is None:
                self.error_part(f"error part: {_error_text(value['error'])}")
            else:
                self.error_part(f"error part: TypeValidationError: frame {number}: {problem}")
            return
        if "error" in value:
            self.error_part(f"error part: {_error_text(value['error'])}")
            return
        choices = value["choices"]
        if len(choices) > 1 and not self.other_choices_noted:
            self.other_choices_noted = True
            self.result.notes.append(f"frame {number}: only choices[0] is read")
        choice = choices[0] if choices else None
        if choice is None:
            return
        if choice.get("finish_reason") is not None:
            self.finish_seen = True
        delta = choice.get("delta")
        if delta is None:
            return
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            for entry in tool_calls:
                self.tool_call_delta(entry)

    def tool_call_delta(self, delta: dict[str, Any]) -> None:
        index = delta.get("index")
        if index is None or index in self.forwarded:
            self.tracker.process(delta)
            return
        pending = self.pending.get(index)
        if pending is None:
            pending = self.pending[index] = _Pending(delta.get("id"))
        elif pending.id is None and delta.get("id") is not None:
            pending.id = delta["id"]
        function = delta["function"]
        if function.get("arguments") is not None:
            pending.arguments += function["arguments"]
        name = function.get("name")
        if name is not None:
            forward = {
                "index": index,
                "id": pending.id,
                "function": {"name": name, "arguments": pending.arguments},
            }
            self.tracker.process(forward)
            del self.pending[index]
            self.forwarded.add(index)

    def flush(self) -> list[_Call]:
        for index, pending in list(self.pending.items()):
            self.tracker.process(
                {"index": index, "id": pending.id, "function": {"arguments": pending.arguments}}
            )
        self.pending.clear()
        return list(self.tracker.calls)


def parse_input(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """parse-tool-call.ts: blank is {}, else JSON.parse to an object."""
    if text.strip().strip("\ufeff") == "":
        return {}, None
    try:
        value = _js_json(text)
    except (json.JSONDecodeError, RecursionError) as error:
        return None, f"InvalidToolInputError: {error}"
    if not isinstance(value, dict):
        return None, f"InvalidToolInputError: the input is a JSON {type(value).__name__}"
    return value, None


def run(frames: Iterable[Frame]) -> LensResult:
    result = LENS.new_result(calls_from=DELIVERED, gates_on_parse=True)
    model = _Model(result)
    try:
        for item in wire(frames, result.notes):
            value = item.payload
            if value is None:
                try:
                    value = _js_json(item.data)
                except (json.JSONDecodeError, RecursionError) as error:
                    model.error_part(f"error part: JSONParseError: frame {item.number}: {error}")
                    continue
            model.chunk(item.number, value)
        calls = model.flush()
    except LensError as error:
        result.error = error.text
        if model.errors:
            result.notes.extend(model.errors)
        return result
    for call in calls:
        arguments, parse_error = parse_input(call.arguments)
        result.calls.append(
            LensCall(
                id=text_of(call.id),
                name=text_of(call.name),
                arguments_text=call.arguments,
                arguments=arguments,
                parse_error=parse_error,
            )
        )
    if model.errors:
        result.error = model.errors[0]
        result.notes.extend(model.errors[1:])
    elif not model.finish_seen:
        result.error = f"{INVALID_RESPONSE}: Response stream ended without a finish reason."
    return result


class VercelLens(Lens):
    name = "vercel"
    title = "Vercel"
    library = "vercel/ai (@ai-sdk/openai-compatible)"
    version = "streaming-tool-call-tracker.ts @ed857f50 (2026-08-22); openai-compatible @03955ee6"

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        return run(frames)  # the library hands arguments on as text: `tools` don't matter


LENS = VercelLens()
