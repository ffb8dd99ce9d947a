"""LiteLLM, run for real: `litellm.completion(..., stream=True)`, its
`CustomStreamWrapper` iterated to the end, then
`litellm.stream_chunk_builder(chunks)`, the message its users rebuild from a
stream, and that message's `tool_calls`.

LiteLLM is handed the stored frames the way it lets a caller bring a client:

- chat: model `openai/...` with `client=` an OpenAI SDK client whose HTTP
  client is ours (`replay.serving_client`, httpx2): the OpenAI SDK reads the
  frames, LiteLLM wraps its chunks;
- responses: model `openai/responses/...`, LiteLLM's bridge from a chat call
  to the Responses API, with `client=` LiteLLM's own `HTTPHandler` around an
  httpx client of ours; the bridge turns Responses events into chat chunks;
- messages: model `anthropic/...` with such an `HTTPHandler`: LiteLLM's
  Anthropic handler parses the SSE itself.

LiteLLM reads Gemini too, but the lens matrix shows no LiteLLM column there.

So LiteLLM decides everything: its chunk transformation, its stream
wrapper's rules (finish reasons, errors) and the builder's index map (the
last truthy id and name win, calls missing either are dropped, custom tool
calls kept with their free-text input).  It never parses arguments: whether a
call would run is its caller's `json.loads`.

No network: the cost map is read from the package (`LITELLM_LOCAL_MODEL_COST_MAP`,
`LITELLM_OFFLINE_MODE`, set before the first import), debug prints and its error log are off,
and the model name `lens-responses` is registered as a Responses model that streams
(an unknown model would be "fake streamed" from one JSON body).  When LiteLLM
raises, the error is the answer and the calls are what `stream_chunk_builder`
makes of the chunks so far (a snapshot: the caller gets none of them).

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import warnings
from collections.abc import Iterable
from typing import Any

from inspector.assembly import Frame

from . import replay
from .base import (
    DELIVERED,
    EXTRA_HINT,
    SNAPSHOT,
    Lens,
    LensCall,
    LensResult,
    describe_exception,
    json_object,
    text_of,
)

# LiteLLM reads these when it is first imported: no cost map from the network.
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
MODEL = "lens"
# Registered as a Responses model that streams; the chat model stays unknown
# (registered, `openai/lens` would be routed to the Responses API).
RESPONSES_MODEL = "lens-responses"
MODELS = {
    "chat": f"openai/{MODEL}",
    "responses": f"openai/responses/{RESPONSES_MODEL}",
    "messages": f"anthropic/{MODEL}",
}


def _load() -> Any:
    """The litellm module, offline and quiet; ImportError when it isn't installed."""
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    import litellm

    if not getattr(litellm, "_inspector_ready", False):
        litellm.suppress_debug_info = True
        # Its logger reports every error it then raises: the lens reports those.
        logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)
        litellm.register_model(
            {
                RESPONSES_MODEL: {
                    "litellm_provider": "openai",
                    "mode": "responses",
                    "supports_native_streaming": True,
                }
            }
        )
        litellm._inspector_ready = True
    return litellm


def _version() -> str:
    from importlib.metadata import version

    return version("litellm")


def _client(dialect: str, body: bytes) -> Any:
    """What `completion(client=...)` takes for `dialect`, serving `body`."""
    if dialect == "chat":
        import httpx2
        import openai

        return openai.OpenAI(
            api_key=MODEL,
            base_url=replay.BASE_URL,
            max_retries=0,
            http_client=replay.serving_client(httpx2, body),
        )
    import httpx
    from litellm.llms.custom_httpx.http_handler import HTTPHandler

    return HTTPHandler(client=replay.serving_client(httpx, body))


def _chunks(litellm: Any, dialect: str, body: bytes, result: LensResult) -> list[Any]:
    """Every chunk the stream wrapper hands over; on an error, those so far
    (and the error in `result`)."""
    chunks: list[Any] = []
    try:
        stream = litellm.completion(
            model=MODELS[dialect],
            messages=[{"role": "user", "content": MODEL}],
            stream=True,
            api_key=MODEL,
            api_base=replay.BASE_URL,
            max_retries=0,
            client=_client(dialect, body),
        )
        for chunk in stream:
            chunks.append(chunk)
    except Exception as error:  # whatever LiteLLM raises is the answer
        result.error = describe_exception(error)
    return chunks


def _built(litellm: Any, chunks: list[Any], result: LensResult) -> Any:
    if not chunks:
        return None
    try:
        return litellm.stream_chunk_builder(chunks)
    except Exception as error:
        result.error = result.error or describe_exception(error)
        return None


def _get(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, key, None)


def _call(tool_call: Any, choice: int) -> LensCall:
    if _get(tool_call, "type") == "custom":
        custom = _get(tool_call, "custom")
        return LensCall(
            id=text_of(_get(tool_call, "id")),
            name=text_of(_get(custom, "name")),
            arguments_text=text_of(_get(custom, "input")),
            parse_error="a custom tool call's input is free text, not JSON arguments",
            choice=choice,
            kind="custom",
        )
    function = _get(tool_call, "function")
    text = _get(function, "arguments")
    arguments, parse_error = json_object(text)
    return LensCall(
        id=text_of(_get(tool_call, "id")),
        name=text_of(_get(function, "name")),
        arguments_text=text_of(text),
        arguments=arguments,
        parse_error=parse_error,
        choice=choice,
    )


def calls_of(response: Any) -> list[LensCall]:
    """The built message's tool calls, choice by choice."""
    calls = []
    for position, choice in enumerate(_get(response, "choices") or []):
        number = _get(choice, "index")
        message = _get(choice, "message")
        for tool_call in _get(message, "tool_calls") or []:
            calls.append(_call(tool_call, number if isinstance(number, int) else position))
    return calls


class LiteLLMLens(Lens):
    """LiteLLM itself, when installed (the `lenses` extra)."""

    name = "litellm"
    title = "LiteLLM"
    library = "litellm (CustomStreamWrapper + stream_chunk_builder)"
    version = "the installed litellm"
    dialects = ("chat", "responses", "messages")
    runs_library = True

    def available(self) -> bool:
        """Whether litellm is installed, without importing it (seconds of CPU
        and 200 MB: only the lens processes pay that)."""
        return importlib.util.find_spec("litellm") is not None

    def current_version(self) -> str:
        try:
            return _version()
        except Exception:  # PackageNotFoundError
            return "not installed"

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        """The built message's calls (`tools` don't matter: LiteLLM hands
        arguments on as text)."""
        try:
            litellm = _load()
        except ImportError as error:
            return self.unavailable(f"litellm is not installed ({error}); {EXTRA_HINT}")
        result = self.new_result(version=_version())
        body = replay.sse_body(frames, result.notes, event_from_type=dialect == "messages")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chunks = _chunks(litellm, dialect, body, result)
            built = _built(litellm, chunks, result)
        result.calls = calls_of(built)
        result.calls_from = SNAPSHOT if result.error else DELIVERED
        return result

    tested_entry = "stream_chunk_builder on the frames' chunks, no stream wrapper"

    def run_as_tested(self, frames: Iterable[Frame], *, dialect: str = "chat") -> LensResult:
        """LiteLLM's tests of its builder (`test_stream_chunk_builder.py`,
        `test_streaming_chunk_builder_utils.py`) build `ModelResponseStream`
        chunks from JSON and call `stream_chunk_builder` on them: no
        `completion()`, no stream wrapper, so none of the wrapper's rules (a
        stream that ends without a finish reason raises there).  The same
        entry here, for chat streams; `run` is what LiteLLM's users get."""
        if dialect != "chat":
            return self.run(frames, dialect=dialect)
        try:
            litellm = _load()
        except ImportError as error:
            return self.unavailable(f"litellm is not installed ({error}); {EXTRA_HINT}")
        from litellm.types.utils import ModelResponseStream

        result = self.new_result(version=_version())
        payloads = [frame.payload for frame in frames if isinstance(frame.payload, dict)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                chunks = [ModelResponseStream(**payload) for payload in payloads]
            except Exception as error:  # a chunk its types refuse: the answer
                result.error, chunks = describe_exception(error), []
            built = _built(litellm, chunks, result)
        result.calls = calls_of(built)
        result.calls_from = SNAPSHOT if result.error else DELIVERED
        return result


LENS = LiteLLMLens()
