"""What a dialect adapter is, and how a stream's dialect is told.

The assembler core (`assembler.py`) holds every rule the wire formats share:
identity, scanning and settling, the end checks, the batch rule, events and
both policies.  A dialect adapter reads one wire format's frames and feeds
the core operations: open a call, append a fragment, close it, text,
reasoning, refusal text, usage, finish, done, error.  The adapters live in
`chat.py`, `responses.py`, `messages.py` and `gemini.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .assembler import Assembler
    from .result import Call, Choice

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
    """The dialect a JSON object frame belongs to (dialects.md section 1), or
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


class Dialect:
    """The base of the four adapters: what the core asks of a dialect.

    `chunk(frame)` reads one JSON object frame (not an error, not a ping)
    and feeds the core.  The rest says what the end checks need to know.
    """

    name = CHAT
    known_finish: frozenset[str] = frozenset()
    has_done_frame = True  # Gemini has none: a stream ends when its candidates finish

    def __init__(self, core: Assembler) -> None:
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
