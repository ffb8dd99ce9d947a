"""LangChain, run for real: the chat model's `.stream()` chunks added up with
`+`, as an agent does (`first + rest`, as `generate_from_stream` does), then
the merged chunk's `tool_calls` and `invalid_tool_calls`.

Each dialect goes through the chat model LangChain's users pick for it, with
the stored frames served by a transport of ours (`replay.py`):

- chat: `ChatOpenAI` (langchain-openai), `http_client=` an httpx2 client;
- responses: `ChatOpenAI(use_responses_api=True)`, the same way;
- messages: `ChatAnthropic` (langchain-anthropic), whose own Anthropic client
  is swapped for one with our HTTP client (it builds its client itself and
  takes none);
- gemini: `ChatGoogleGenerativeAI` (langchain-google-genai), given a
  `google.genai.Client` whose httpx client is ours.

So langchain-core's `AIMessageChunk.__add__` (`merge_lists` by index unless
ids conflict, strings concatenated) and `init_tool_calls`
(`parse_partial_json`: truncated arguments come out "repaired", text that
does not parse to an object becomes an invalid tool call) decide the answer,
at whatever versions are installed (the `lenses` extra pins them).  LangChain
gates on parsing: an invalid tool call is never run (`gates_on_parse`).

When the library raises, the error is the answer and the calls are the sum
of the chunks so far (a snapshot: the agent gets none of them).  LangSmith
tracing is switched off around each run, so nothing leaves the process.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import importlib
import importlib.util
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
    text_of,
)

# The partner package that serves each dialect, and its import name.
PARTNERS = {
    "chat": ("langchain-openai", "langchain_openai"),
    "responses": ("langchain-openai", "langchain_openai"),
    "messages": ("langchain-anthropic", "langchain_anthropic"),
    "gemini": ("langchain-google-genai", "langchain_google_genai"),
}
PROMPT = "lens"


def _version(distribution: str) -> str:
    from importlib.metadata import version

    return version(distribution)


def _load(dialect: str) -> Any:
    """The partner module of `dialect`; ImportError when it (or
    langchain-core) isn't installed."""
    importlib.import_module("langchain_core")
    return importlib.import_module(PARTNERS[dialect][1])


def _chat_openai(partner: Any, body: bytes, **options: Any) -> Any:
    import httpx2

    return partner.ChatOpenAI(
        model=PROMPT,
        api_key=PROMPT,
        base_url=replay.BASE_URL,
        max_retries=0,
        http_client=replay.serving_client(httpx2, body),
        **options,
    )


def _chat_anthropic(partner: Any, body: bytes) -> Any:
    import anthropic
    import httpx2

    model = partner.ChatAnthropic(
        model=PROMPT, api_key=PROMPT, base_url=replay.BASE_URL, max_retries=0
    )
    # `_client` is a cached_property building its own HTTP client: set it first.
    model.__dict__["_client"] = anthropic.Anthropic(
        api_key=PROMPT,
        base_url=replay.BASE_URL,
        max_retries=0,
        http_client=replay.serving_client(httpx2, body),
    )
    return model


def _chat_google(partner: Any, body: bytes) -> Any:
    import httpx
    from google import genai
    from google.genai import types

    options = types.HttpOptions(
        base_url=replay.BASE_URL, httpx_client=replay.serving_client(httpx, body)
    )
    model = partner.ChatGoogleGenerativeAI(model=PROMPT, google_api_key=PROMPT, max_retries=0)
    # Its validator builds a client of its own even when one is passed.
    model.client = genai.Client(api_key=PROMPT, http_options=options)
    return model


def chat_model(dialect: str, partner: Any, body: bytes) -> Any:
    """The LangChain chat model of `dialect`, served `body`."""
    if dialect == "responses":
        return _chat_openai(partner, body, use_responses_api=True)
    if dialect == "messages":
        return _chat_anthropic(partner, body)
    if dialect == "gemini":
        return _chat_google(partner, body)
    return _chat_openai(partner, body)


def _body(frames: Iterable[Frame], dialect: str, notes: list[str]) -> bytes:
    return replay.sse_body(frames, notes, event_from_type=dialect == "messages")


def _summed(model: Any, result: LensResult) -> Any:
    """The stream's chunks added up; on an error, the sum so far (and the
    error in `result`).  `first + rest` merges them in order in one go, as
    `generate_from_stream` does for an agent's `invoke` of a streaming model:
    the same merge as adding them one by one, without re-parsing the growing
    arguments after every chunk (quadratic: 40 s on 5,000 fragments)."""
    from langsmith import tracing_context

    chunks: list[Any] = []
    try:
        with tracing_context(enabled=False):
            for chunk in model.stream(PROMPT):
                chunks.append(chunk)
    except Exception as error:  # whatever the library raises is the answer
        result.error = describe_exception(error)
    if not chunks:
        return None
    return chunks[0] + chunks[1:] if len(chunks) > 1 else chunks[0]


def _invalid_call(entry: dict[str, Any]) -> LensCall:
    why = entry.get("error") or "its arguments do not parse to an object"
    return LensCall(
        id=text_of(entry.get("id")),
        name=text_of(entry.get("name")),
        arguments_text=text_of(entry.get("args")) or "",
        parse_error=f"invalid tool call: {why}",
    )


def _valid_call(entry: dict[str, Any], text: Any) -> LensCall:
    return LensCall(
        id=text_of(entry.get("id")),
        name=text_of(entry.get("name")),
        arguments_text=text_of(text) if text is not None else "",
        arguments=entry.get("args"),
    )


def _same(chunk: dict[str, Any], invalid: dict[str, Any]) -> bool:
    return all(chunk.get(key) == invalid.get(key) for key in ("id", "name", "args"))


def calls_of(message: Any) -> list[LensCall]:
    """The merged message's calls in the order of its tool-call chunks: each
    chunk became a tool call (its `args` parsed) or an invalid tool call
    (`init_tool_calls` keeps both lists in that order); the arguments text
    is the chunk's."""
    valid = list(getattr(message, "tool_calls", None) or [])
    invalid = list(getattr(message, "invalid_tool_calls", None) or [])
    chunks = list(getattr(message, "tool_call_chunks", None) or [])
    if len(chunks) != len(valid) + len(invalid):  # no chunk per call: args as given
        return [_valid_call(entry, None) for entry in valid] + [_invalid_call(e) for e in invalid]
    calls = []
    for chunk in chunks:
        if invalid and _same(chunk, invalid[0]):
            calls.append(_invalid_call(invalid.pop(0)))
        elif valid:
            calls.append(_valid_call(valid.pop(0), chunk.get("args")))
    return calls


class LangChainLens(Lens):
    """langchain-core with its partner package of each dialect, when installed."""

    name = "langchain"
    title = "LangChain"
    library = "langchain-core + langchain-openai / -anthropic / -google-genai"
    version = "the installed langchain-core and partner packages"
    dialects = ("chat", "responses", "messages", "gemini")
    runs_library = True

    def available(self) -> bool:
        """Whether langchain-core and langchain-openai are installed, without
        importing them (only the lens processes pay that)."""
        return all(
            importlib.util.find_spec(module) is not None
            for module in ("langchain_core", PARTNERS["chat"][1])
        )

    def current_version(self) -> str:
        names = ["langchain-core", *dict.fromkeys(name for name, _ in PARTNERS.values())]
        found = []
        for name in names:
            try:
                found.append(f"{name} {_version(name)}")
            except Exception:  # PackageNotFoundError: that part is missing
                found.append(f"{name} missing")
        return ", ".join(found)

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        """The merged chunk's calls (`tools` don't matter: LangChain parses
        arguments without them)."""
        package = PARTNERS[dialect][0]
        try:
            partner = _load(dialect)
        except ImportError as error:
            return self.unavailable(f"{package} is not installed ({error}); {EXTRA_HINT}")
        result = self.new_result(
            version=f"langchain-core {_version('langchain-core')}, {package} {_version(package)}",
            gates_on_parse=True,
        )
        result.library = f"langchain-core + {package}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = chat_model(dialect, partner, _body(frames, dialect, result.notes))
            total = _summed(model, result)
        result.calls = calls_of(total)
        result.calls_from = SNAPSHOT if result.error else DELIVERED
        return result


LENS = LangChainLens()
