"""The Google Gen AI Python SDK (`google-genai`), run for real on Gemini streams.

The lens calls `client.models.generate_content_stream(...)` as its users do,
with an httpx client that serves the stored frames (`replay.py`), and
collects each chunk's `function_calls` accessor, the way the SDK's
documentation shows a caller gathering calls from a stream.  The SDK parses
each chunk into its `GenerateContentResponse` type and raises on an error
chunk; nothing of that is re-implemented.  As this version behaves (pinned by
tests):

- the SDK does not join anything: each chunk's `function_call` parts are
  handed over as they are, so a call streamed as `partialArgs` pieces comes
  out as one call per piece, each with no `args` (its caller runs
  `fc.args or {}`), and the pieces themselves are only in `partial_args`;
- `function_calls` reads the first candidate only;
- a call with no `args` is reported with `{}`, as `fc.args or {}` runs it;
- the SDK always asks for `alt=sse`: a capture read as a JSON array is
  served to it as SSE (the lens notes it).

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

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

PIECES = "a call streamed as partialArgs pieces: the SDK hands each chunk's piece over as a call"


def _load() -> Any:
    import httpx
    from google import genai
    from google.genai import types

    return genai, types, httpx


def _call(function_call: Any, notes: list[str]) -> LensCall:
    args = getattr(function_call, "args", None)
    if getattr(function_call, "partial_args", None) and PIECES not in notes:
        notes.append(PIECES)
    arguments = args if isinstance(args, dict) else {}
    return LensCall(
        id=text_of(getattr(function_call, "id", None)),
        name=text_of(getattr(function_call, "name", None)),
        arguments_text=text_of(arguments),
        arguments=arguments,
    )


class GoogleGenAiLens(InstalledLens):
    """The SDK itself, when installed (the `lenses` extra)."""

    name = "google-genai"
    title = "the Google Gen AI SDK"
    library = "python-genai"
    version = "the installed google-genai"
    dialects = ("gemini",)

    def installed_version(self) -> str:
        return _load()[0].__version__

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "gemini",
    ) -> LensResult:
        try:
            genai, types, httpx = _load()
        except ImportError as error:
            return self.unavailable(f"google-genai is not installed ({error}); {EXTRA_HINT}")
        result = self.new_result(version=genai.__version__)
        body = replay.sse_body(frames, result.notes)
        options = types.HttpOptions(
            base_url=replay.BASE_URL, httpx_client=replay.serving_client(httpx, body)
        )
        client = genai.Client(api_key="lens", http_options=options)
        calls: list[LensCall] = []
        try:
            for chunk in client.models.generate_content_stream(model="lens", contents="lens"):
                calls.extend(_call(call, result.notes) for call in chunk.function_calls or [])
            result.calls_from = DELIVERED
        except Exception as error:  # whatever the SDK raises is the answer
            result.error = describe_exception(error)
            result.calls_from = SNAPSHOT
        result.calls = calls
        return result


LENS = GoogleGenAiLens()
