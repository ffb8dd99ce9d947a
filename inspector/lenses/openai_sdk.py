"""The OpenAI Python SDK, run for real.

On chat streams, below.  On Responses streams the lens calls
`responses.stream(...)` instead (`openai_responses.py`).

Follows openai-python's `src/openai/lib/streaming/chat/_completions.py`
(`ChatCompletionStreamState`, `ChatCompletionStream.__stream__`) and
`src/openai/_streaming.py` (`Stream.__stream__`) of whatever version is
installed (the project pins openai==3.57.0 in the `lenses` extra; the notes
read HEAD e43b4224).  Nothing is re-implemented: the chunks are built the way
the SDK builds them off the wire, with the non-validating
`construct_type(type_=ChatCompletionChunk, value=data)`
(`_base_client._process_response_data` with strict response validation off,
the default), and fed to a real `ChatCompletionStreamState`.

What the SDK's stream does around the state is mirrored, in its order:

- `[DONE]` ends the stream (our reader's `done` frame);
- data that is not JSON raises `json.JSONDecodeError` (`sse.json()`);
- JSON with a truthy `"error"` raises `APIError` (`Stream.__stream__`);
- a chunk whose `object` is not `"chat.completion.chunk"` is skipped
  (`_is_valid_chat_completion_chunk_weak`, Azure's filter annotations);
- an unterminated last block is never dispatched (`SSEDecoder`).

Then `get_final_completion()` (which raises `LengthFinishReasonError` /
`ContentFilterFinishReasonError` for those finish reasons).  Anything raised
is caught and reported; the calls then come from the state's snapshot when
there is one (`calls_from == "snapshot"`: the caller would get none of them).

Arguments: the SDK parses them itself only for `strict` (or pydantic) input
tools; pass the request's `tools` for that.  Otherwise the caller's usual
`json.loads` decides whether a call would run.

Classic quirks, as this SDK version behaves (pinned by tests):
an id or name repeated on every chunk is concatenated (`call_xcall_x`,
`readread`); an index reused by a new id merges into one call; a first call at
index 1 raises IndexError; `index: null` raises TypeError; a missing index
raises TypeError; `finish_reason: "length"` raises LengthFinishReasonError.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame

from . import openai_responses
from .base import (
    DELIVERED,
    EXTRA_HINT,
    SNAPSHOT,
    InstalledLens,
    LensCall,
    LensResult,
    describe_exception,
    json_object,
    sdk_error_message,
    text_of,
    wire,
)


def _load() -> dict[str, Any]:
    """The SDK pieces the lens drives; ImportError when it isn't installed."""
    import openai
    from openai._exceptions import APIError
    from openai._models import construct_type
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    return {
        "version": openai.__version__,
        "APIError": APIError,
        "construct_type": construct_type,
        "ChatCompletionStreamState": ChatCompletionStreamState,
        "ChatCompletionChunk": ChatCompletionChunk,
    }


def run(frames: Iterable[Frame], *, tools: list[dict[str, Any]] | None = None) -> LensResult:
    # The SDK's model_dump() warns about off-type values (an arguments object,
    # an integer id): that is the wire's quirk, reported by comparison.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _run(frames, tools)


def _run(frames: Iterable[Frame], tools: list[dict[str, Any]] | None) -> LensResult:
    try:
        sdk = _load()
    except ImportError as error:
        return LENS.new_result(
            version="not installed",
            available=False,
            calls_from=None,
            notes=[f"the OpenAI SDK is not installed ({error}); {EXTRA_HINT}"],
        )
    result = LENS.new_result(version=sdk["version"])
    state_kwargs: dict[str, Any] = {}
    if tools:
        state_kwargs["input_tools"] = [tool for tool in tools if isinstance(tool, dict)]
    state = sdk["ChatCompletionStreamState"](**state_kwargs)
    construct_type = sdk["construct_type"]
    chunk_type = sdk["ChatCompletionChunk"]
    api_error = sdk["APIError"]
    fed = 0
    try:
        for item in wire(frames, result.notes):
            # Stream.__stream__: data = sse.json(); a truthy "error" raises.
            data = item.payload if item.payload is not None else json.loads(item.data)
            if isinstance(data, dict) and data.get("error"):
                raise api_error(
                    message=sdk_error_message(data["error"]),
                    request=None,  # no HTTP request here; the SDK only stores it
                    body=data["error"],
                )
            chunk = construct_type(type_=chunk_type, value=data)
            # ChatCompletionStream.__stream__: skip what isn't a chunk.
            if chunk.object != "chat.completion.chunk":
                result.notes.append(
                    f"frame {item.number} skipped: object is {chunk.object!r}, "
                    "not 'chat.completion.chunk'"
                )
                continue
            fed += 1
            state.handle_chunk(chunk)
    except Exception as error:  # whatever the SDK raises is the answer
        result.error = describe_exception(error)
    completion = None
    if result.error is None and fed:
        try:
            completion = state.get_final_completion()
        except Exception as error:
            result.error = describe_exception(error)
    if completion is not None:
        result.calls_from = DELIVERED
    else:
        completion = _snapshot(state)
        result.calls_from = SNAPSHOT if result.error else DELIVERED
    if completion is not None:
        result.calls = _calls(completion, parsed_by_sdk=bool(tools) and result.error is None)
    if not fed and result.error is None:
        result.notes.append("no chunk reached the SDK: it would give no completion")
    return result


def _snapshot(state: Any) -> Any:
    try:
        return state.current_completion_snapshot
    except AssertionError:  # no chunk was accumulated
        return None


def _get(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, key, None)


def _calls(completion: Any, *, parsed_by_sdk: bool) -> list[LensCall]:
    calls = []
    for position, choice in enumerate(_get(completion, "choices") or []):
        number = _get(choice, "index")
        message = _get(choice, "message")
        for tool_call in _get(message, "tool_calls") or []:
            function = _get(tool_call, "function")
            text = _get(function, "arguments")
            arguments, parse_error = json_object(text)
            if parsed_by_sdk:
                sdk_parsed = _get(function, "parsed_arguments")
                if isinstance(sdk_parsed, dict):
                    arguments, parse_error = sdk_parsed, None
            calls.append(
                LensCall(
                    id=text_of(_get(tool_call, "id")),
                    name=text_of(_get(function, "name")),
                    arguments_text=text_of(text),
                    arguments=arguments,
                    parse_error=parse_error,
                    choice=number if isinstance(number, int) else position,
                )
            )
    return calls


class OpenAISdkLens(InstalledLens):
    """The SDK itself, when installed (the `lenses` extra); its version is the
    installed one."""

    name = "openai"
    title = "the OpenAI SDK"
    library = "openai-python"
    version = "the installed openai"
    dialects = ("chat", "responses")

    def installed_version(self) -> str:
        return _load()["version"]

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        if dialect == "responses":
            return _run_responses(frames, tools)
        return run(frames, tools=tools)


def _run_responses(frames: Iterable[Frame], tools: list[dict[str, Any]] | None) -> LensResult:
    try:
        import httpx2
        import openai
    except ImportError as error:
        return LENS.unavailable(f"the OpenAI SDK is not installed ({error}); {EXTRA_HINT}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = LENS.new_result(version=openai.__version__)
        return openai_responses.run(openai, httpx2, frames, result, tools)


LENS = OpenAISdkLens()
