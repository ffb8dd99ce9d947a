"""The OpenAI Python SDK on Responses streams, run for real.

The `openai` lens's Responses side: `client.responses.stream(...)` and
`get_final_response()`, as the SDK's users (the Agents SDK among them) call
it, with an HTTP client that serves the stored frames (`replay.py`).  The
SDK's SSE decoder, `ResponseStreamState` and `parse_response` decide the
answer.  As this version behaves (pinned by tests):

- the calls a caller gets come from the `response.completed` event's own
  `response.output`, the final copy, not from the deltas: where the two
  disagree, the caller runs the final copy;
- a stream with no `response.completed` raises RuntimeError ("Didn't receive
  a `response.completed` event."); the calls are then the state's snapshot,
  which the caller never gets;
- the state checks item identity as it goes and raises RuntimeError on a
  duplicate output index or an item whose id changed.

Calls are the output's `function_call` items (id = `call_id`, arguments
parsed by the caller's `json.loads`, or by the SDK for `strict` input
tools) and `custom_tool_call` items (free-text input).  Built-in and server
items (`web_search_call`, ...) are results the platform ran, not calls the
caller runs: they are left out, and the comparison leaves them out too.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame

from . import replay
from .base import (
    DELIVERED,
    SNAPSHOT,
    LensCall,
    LensResult,
    describe_exception,
    json_object,
    text_of,
)


def _get(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, key, None)


def _call(item: Any, *, parsed_by_sdk: bool) -> LensCall | None:
    kind = _get(item, "type")
    if kind == "custom_tool_call":
        text = text_of(_get(item, "input"))
        return LensCall(
            id=text_of(_get(item, "call_id")),
            name=text_of(_get(item, "name")),
            arguments_text=text,
            kind="custom",
        )
    if kind != "function_call":
        return None
    text = _get(item, "arguments")
    arguments, parse_error = json_object(text)
    sdk_parsed = _get(item, "parsed_arguments") if parsed_by_sdk else None
    if isinstance(sdk_parsed, dict):
        arguments, parse_error = sdk_parsed, None
    return LensCall(
        id=text_of(_get(item, "call_id")),
        name=text_of(_get(item, "name")),
        arguments_text=text_of(text),
        arguments=arguments,
        parse_error=parse_error,
    )


def _calls(response: Any, *, parsed_by_sdk: bool) -> list[LensCall]:
    calls = (_call(item, parsed_by_sdk=parsed_by_sdk) for item in _get(response, "output") or [])
    return [call for call in calls if call is not None]


def _snapshot(stream: Any) -> Any:
    """The response as the state had accumulated it when the SDK raised."""
    state = getattr(stream, "_state", None)
    # ResponseStreamState keeps it name-mangled and offers no accessor.
    return getattr(state, "_ResponseStreamState__current_snapshot", None)


def run(
    openai: Any,
    httpx2: Any,
    frames: Iterable[Frame],
    result: LensResult,
    tools: list[dict[str, Any]] | None,
) -> LensResult:
    """Fill `result` with what `responses.stream` hands its caller."""
    body = replay.sse_body(frames, result.notes)
    client = openai.OpenAI(
        api_key="lens",
        base_url=replay.BASE_URL,
        max_retries=0,
        http_client=replay.serving_client(httpx2, body),
    )
    extra: dict[str, Any] = {"tools": tools} if tools else {}
    stream = None
    try:
        with client.responses.stream(model="lens", input="lens", **extra) as stream:
            response = stream.get_final_response()
        result.calls = _calls(response, parsed_by_sdk=bool(tools))
        result.calls_from = DELIVERED
    except Exception as error:  # whatever the SDK raises is the answer
        result.error = describe_exception(error)
        result.calls = _calls(_snapshot(stream), parsed_by_sdk=False)
        result.calls_from = SNAPSHOT
    return result
