"""The Anthropic Python SDK, run for real on Messages streams.

The lens calls `client.messages.stream(...)` and `get_final_message()`, as
the SDK's users do, with an HTTP client that serves the stored frames
(`replay.py`).  So the SDK's own SSE decoder (`anthropic._streaming.Stream`:
events named `ping` and events with no name are skipped, an `error` event
raises `APIStatusError`), its event types and `accumulate_event` decide the
answer.  What that means on odd streams, as this version behaves (pinned by
tests):

- tool input is parsed with `jiter.from_json(partial_mode=True)` after every
  `input_json_delta`, so input cut off mid-object still comes out as an
  object, and the call would run with what arrived;
- content blocks are addressed by position in the message (`content[index]`),
  not by their `index` field: a delta for an index never started raises
  IndexError, and blocks started out of order get each other's deltas;
- events before `message_start` are passed over unaccumulated, and with no
  `message_start` at all `get_final_message()` fails its assertion
  (AssertionError, no message).

Calls are the final message's `tool_use` and `server_tool_use` blocks (the
latter run by Anthropic, reported with kind `server`).  Arguments are the
SDK's `input` object; its text is that object as compact JSON, since the SDK
keeps no text.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame

from . import replay
from .base import (
    DELIVERED,
    EXTRA_HINT,
    SNAPSHOT,
    InstalledLens,
    LensCall,
    LensResult,
    describe_exception,
    text_of,
)

# Content blocks that are tool calls, and the call kind each is reported as.
CALL_BLOCKS = {"tool_use": "function", "server_tool_use": "server"}


def _load() -> Any:
    import anthropic
    import httpx2

    return anthropic, httpx2


def _calls(message: Any) -> list[LensCall]:
    calls = []
    for block in getattr(message, "content", None) or []:
        kind = CALL_BLOCKS.get(getattr(block, "type", None))
        if kind is None:
            continue
        value = getattr(block, "input", None)
        calls.append(
            LensCall(
                id=text_of(getattr(block, "id", None)),
                name=text_of(getattr(block, "name", None)),
                arguments_text=json.dumps(value, separators=(",", ":"), ensure_ascii=False),
                arguments=value if isinstance(value, dict) else None,
                parse_error=None if isinstance(value, dict) else "the SDK's input is no object",
                kind=kind,
            )
        )
    return calls


def _snapshot(stream: Any) -> Any:
    """The message as accumulated when the SDK raised (None before any)."""
    try:
        return stream.current_message_snapshot if stream is not None else None
    except AssertionError:  # no message_start yet
        return None


class AnthropicSdkLens(InstalledLens):
    """The SDK itself, when installed (the `lenses` extra)."""

    name = "anthropic"
    title = "the Anthropic SDK"
    library = "anthropic-sdk-python"
    version = "the installed anthropic"
    dialects = ("messages",)

    def installed_version(self) -> str:
        return _load()[0].__version__

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "messages",
    ) -> LensResult:
        try:
            anthropic, httpx2 = _load()
        except ImportError as error:
            return self.unavailable(f"the Anthropic SDK is not installed ({error}); {EXTRA_HINT}")
        result = self.new_result(version=anthropic.__version__)
        body = replay.sse_body(frames, result.notes, event_from_type=True)
        client = anthropic.Anthropic(
            api_key="lens",
            base_url=replay.BASE_URL,
            max_retries=0,
            http_client=replay.serving_client(httpx2, body),
        )
        stream = None
        try:
            with client.messages.stream(
                model="lens", max_tokens=1, messages=[{"role": "user", "content": "lens"}]
            ) as stream:
                message = stream.get_final_message()
            result.calls, result.calls_from = _calls(message), DELIVERED
        except Exception as error:  # whatever the SDK raises is the answer
            result.error = describe_exception(error)
            result.calls, result.calls_from = _calls(_snapshot(stream)), SNAPSHOT
        return result


LENS = AnthropicSdkLens()
