"""What a dialect adapter is, and how a stream's dialect is told.

The assembler core (`assembler.py`) holds every rule the wire formats share:
identity, scanning and settling, the end checks, the batch rule, events and
both policies.  A dialect adapter reads one wire format's frames and feeds
the core operations: open a call, append a fragment, close it, text,
reasoning, refusal text, usage, finish, done, error.  The adapters live in
`chat.py`, `responses.py`, `messages.py` and `gemini.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .result import Anomaly, Call, Choice, Refusal

CHAT = "chat"
RESPONSES = "responses"
MESSAGES = "messages"
GEMINI = "gemini"
AUTO_DIALECT = "auto"
DIALECTS = (CHAT, RESPONSES, MESSAGES, GEMINI)

MESSAGES_TYPES = frozenset(
    (
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
    )
)
_URL_HINTS = (
    ("/chat/completions", CHAT),
    ("/responses", RESPONSES),
    ("/messages", MESSAGES),
    (":streamGenerateContent", GEMINI),
    (":generateContent", GEMINI),
)


def dialect_of(payload: dict[str, Any]) -> str | None:
    """The dialect a JSON object frame belongs to (by its `type`, `choices`, `candidates`, …), or
    None when it does not tell (a whole body counts: `object: "response"`,
    Anthropic's `type: "message"` with content)."""
    if "choices" in payload:
        return CHAT
    obj = payload.get("object")
    if type(obj) is str:
        if obj.startswith("chat.completion"):
            return CHAT
        if obj == "response":
            return RESPONSES
    kind = payload.get("type")
    if type(kind) is str:
        if kind.startswith("response."):
            return RESPONSES
        if kind in MESSAGES_TYPES or (kind == "message" and "content" in payload):
            return MESSAGES
    if "candidates" in payload or "usageMetadata" in payload or "promptFeedback" in payload:
        return GEMINI
    return None


def dialect_from_url(url: str | None) -> str | None:
    """The dialect a request URL names (a HAR entry's), or None."""
    if not url:
        return None
    path = url.split("?", 1)[0]
    for marker, dialect in _URL_HINTS:
        if marker in path:
            return dialect
    return None


class Core(Protocol):
    """The operations of the assembler core that an adapter feeds (the core,
    `assembler.Assembler`, implements them; adapters know only this).  `number`
    is the frame's number throughout."""

    policy: str
    sse: bool
    refusal: Refusal | None
    choices: dict[int, Choice]

    def choice(self, index: int) -> Choice: ...
    def text(self, number: int, choice: Choice, text: str) -> None: ...
    def reasoning(self, number: int, choice: Choice, text: str) -> None: ...
    def refusal_text(self, choice: Choice, text: str) -> None: ...
    def take_usage(self, number: int, usage: Any) -> None: ...
    def finish_choice(self, number: int, choice: Choice, reason: str) -> None: ...
    def done(self, number: int) -> None: ...
    def foreign(self, number: int) -> None: ...
    def new_call(self, choice: Choice, kind: str = "function", scanned: bool = True) -> Call: ...
    def touch(self, number: int, call: Call) -> None: ...
    def identify(
        self,
        number: int,
        choice: Choice,
        call: Call,
        call_id: Any,
        name: Any,
        *,
        id_sent: bool,
        name_sent: bool,
    ) -> bool: ...
    def append(self, number: int, choice: Choice, call: Call, fragment: str) -> None: ...
    def close(self, number: int, choice: Choice, call: Call) -> None: ...
    def drop(self, number: int, choice: int, reason: str) -> None: ...
    def refuse(
        self,
        code: str,
        message: str,
        frame: int | None,
        call: Call | None = None,
        choice: int | None = None,
    ) -> None: ...
    def anomaly(
        self, kind: str, frame: int | None, *, call: Call | None = None, choice: int | None = None
    ) -> Anomaly: ...


class Dialect:
    """The base of the four adapters: what the core asks of a dialect.

    `chunk(frame)` reads one JSON object frame (not an error, not a ping)
    and feeds the core.  The rest says what the end checks need to know.
    """

    name = CHAT
    known_finish: frozenset[str] = frozenset()
    has_done_frame = True  # Gemini has none: a stream ends when its candidates finish

    def __init__(self, core: Core) -> None:
        self.core = core

    def chunk(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        raise NotImplementedError

    def done_literal(self, number: int) -> None:
        """`[DONE]`: the done frame only in chat; elsewhere a foreign frame."""
        self.core.foreign(number)

    def error_frame(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        core = self.core
        core.refuse("UPSTREAM_ERROR", error_message(payload), number)
        core.take_usage(number, payload.get("usage"))

    def mismatch(self, choice: Choice) -> bool:
        """Whether the choice's finish reason disagrees with its calls."""
        return False

    def answered(self, choice: Choice) -> bool:
        """Whether a choice with no text and no calls still answered."""
        return False

    def at_end(self, end: int | None) -> None:
        """Dialect anomalies of the end of the stream (before the checks)."""

    def complete(self) -> bool:
        """For a dialect without a done frame: whether the stream finished."""
        return False

    def describe(self, call: Call) -> str:
        """A call in the dialect's own terms, for refusal messages."""
        return f"call #{call.position}"

    def malformed_message(self, call: Call, missing: list[str]) -> str:
        return f"{self.describe(call)} never received its {' or '.join(missing)}"


def error_message(payload: dict[str, Any]) -> str:
    """An error frame's message: `error.message` (with `error.type` when it
    has one), an `error` string, or a top-level `message`."""
    error = payload.get("error")
    if type(error) is dict:
        message = error.get("message")
        kind = error.get("type") or error.get("code") or error.get("status")
        if type(message) is str and message:
            if type(kind) is str and kind:
                return f"upstream error ({kind}): {message}"
            return f"upstream error: {message}"
    if type(error) is str and error:
        return f"upstream error: {error}"
    message = payload.get("message")
    if type(message) is str and message:
        return f"upstream error: {message}"
    return "the upstream sent an error frame"
