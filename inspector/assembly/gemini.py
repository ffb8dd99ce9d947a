"""The Google Gemini adapter: candidates as choices, `functionCall` parts
(whole, or streamed as `partialArgs`), finish reasons.

Each frame is a `GenerateContentResponse`; each candidate is a choice.  A
`functionCall` part with a name is a whole call (opened and closed in its
frame, `args` as compact JSON, no id needed: Gemini pairs results by name
and order).  One with `willContinue: true` opens a streamed call (Vertex
AI's `streamFunctionCallArguments`): later `functionCall` parts of the
candidate add `partialArgs` pieces at their `jsonPath` until a part closes
it (an empty `functionCall: {}`, or pieces without `willContinue`).  There
is no done frame: the stream is complete when every candidate seen has a
finish reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .dialect import GEMINI, Core, Dialect, dialect_of
from .jsonpath import PathError, parse_path, set_at
from .jsontext import compact

if TYPE_CHECKING:
    from .result import Call, Choice

KNOWN_FINISH = frozenset(
    (
        "FINISH_REASON_UNSPECIFIED",
        "STOP",
        "MAX_TOKENS",
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "OTHER",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
        "NO_IMAGE",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
    )
)
FAILED_CALL_FINISH = frozenset(
    ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS")
)
VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue")


def _has_counts(usage: dict[str, Any]) -> bool:
    return any(key.endswith("TokenCount") for key in usage)


class GeminiDialect(Dialect):
    name = GEMINI
    known_finish = KNOWN_FINISH
    has_done_frame = False

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        self.open: dict[int, Call] = {}  # candidate -> its streaming call
        self.count: dict[int, int] = {}  # candidate -> calls seen
        self.continuing: dict[Call, dict[str, bool]] = {}
        # A streamed string's pieces, joined once its path stops continuing:
        # call -> path -> (steps, pieces).  Joining per piece would be quadratic.
        self.pending: dict[Call, dict[str, tuple[list[str | int], list[str]]]] = {}
        self.usage_counts = False

    def chunk(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        core = self.core
        candidates = payload.get("candidates")
        if core.refusal is None:
            if type(candidates) is list:
                for candidate in candidates:
                    if type(candidate) is dict:
                        self._candidate(number, candidate)
                        if core.refusal is not None:
                            break
            else:
                feedback = payload.get("promptFeedback")
                reason = feedback.get("blockReason") if type(feedback) is dict else None
                if type(reason) is str and reason:
                    core.refuse("UPSTREAM_ERROR", f"the prompt was blocked: {reason}", number)
                elif "usageMetadata" not in payload and dialect_of(payload) not in (None, GEMINI):
                    core.foreign(number)
                    return
        usage = payload.get("usageMetadata")
        if type(usage) is dict:
            if _has_counts(usage):
                self.usage_counts = True
                core.take_usage(number, usage)
            elif not self.usage_counts:
                core.take_usage(number, usage)  # a placeholder, until counts come

    def _candidate(self, number: int, candidate: dict[str, Any]) -> None:
        core = self.core
        index = candidate.get("index", 0)
        if type(index) is not int or index < 0:
            index = 0
        choice = core.choice(index)
        content = candidate.get("content")
        parts = content.get("parts") if type(content) is dict else None
        for position, part in enumerate(parts if type(parts) is list else []):
            if type(part) is dict:
                self._part(number, choice, part, position)
                if core.refusal is not None:
                    return
        reason = candidate.get("finishReason")
        if type(reason) is str and reason:
            core.finish_choice(number, choice, reason)
            if reason in FAILED_CALL_FINISH:
                message = candidate.get("finishMessage")
                core.refuse(
                    "MALFORMED_TOOL_CALL",
                    message
                    if type(message) is str and message
                    else f"candidate {index} ended with {reason}",
                    number,
                )

    def _part(self, number: int, choice: Choice, part: dict[str, Any], position: int) -> None:
        core = self.core
        function = part.get("functionCall")
        if type(function) is dict:
            self._function_call(number, choice, function)
            return
        tool = part.get("toolCall")
        if type(tool) is dict:
            self._server_call(number, choice, tool)
            return
        text = part.get("text")
        if type(text) is str and text:
            if part.get("thought") is True:
                core.reasoning(number, choice, text)
            else:
                core.text(number, choice, text)

    # -- calls --------------------------------------------------------------

    def _function_call(self, number: int, choice: Choice, function: dict[str, Any]) -> None:
        core = self.core
        call = self.open.get(choice.index)
        if call is not None:
            self._continue(number, choice, call, function)
            return
        streamed = function.get("willContinue") is True
        call = self._new(choice, "function", scanned=not streamed)
        if not self._identify(number, choice, call, function):
            return
        if not streamed:
            args = function.get("args", {})
            core.append(number, choice, call, compact(args))
            core.close(number, choice, call)
            return
        call.must_close = True
        call.value = {}
        self.open[choice.index] = call
        self.continuing[call] = {}
        self.pending[call] = {}
        core.append(number, choice, call, "")
        if "partialArgs" in function:
            self._pieces(number, choice, call, function.get("partialArgs"))

    def _continue(self, number: int, choice: Choice, call: Call, function: dict[str, Any]) -> None:
        """A `functionCall` part while a call streams in this candidate."""
        self.core.touch(number, call)
        if "partialArgs" in function:
            self._pieces(number, choice, call, function.get("partialArgs"))
            if self.core.refusal is None and function.get("willContinue") is not True:
                self._close(number, choice, call)
        elif function == {"willContinue": True}:
            return  # a bare keep-going part
        elif self._identify(number, choice, call, function):
            self._close(number, choice, call)

    def _new(self, choice: Choice, kind: str, *, scanned: bool) -> Call:
        call = self.core.new_call(choice, kind, scanned=scanned)
        call.needs_id = False
        call.index = self.count.get(choice.index, 0)
        self.count[choice.index] = call.index + 1
        return call

    def _identify(self, number: int, choice: Choice, call: Call, part: dict[str, Any]) -> bool:
        self.core.touch(number, call)
        return self.core.identify(
            number,
            choice,
            call,
            part.get("id"),
            part.get("name"),
            id_sent="id" in part,
            name_sent="name" in part,
        )

    def _close(self, number: int, choice: Choice, call: Call) -> None:
        self.open.pop(choice.index, None)
        self._settle_value(call)
        self.core.close(number, choice, call)

    def _settle_value(self, call: Call) -> None:
        """Join every pending string, then show the object as compact JSON."""
        for path in list(self.pending.get(call, ())):
            self._flush(call, path)
        call.final_text = compact(call.value)

    def _flush(self, call: Call, path: str) -> None:
        steps, parts = self.pending[call].pop(path)
        set_at(call.value, steps, "".join(parts), extend=False)

    def _flush_overlapping(self, call: Call, steps: list[str | int]) -> None:
        """Write the pending strings at `steps`, above it or under it before
        anything is set there: the value is then what setting every piece
        at once would have made (a parent set to null, then to a string,
        replaces the string under it), and pending paths never overlap, so
        no later join can fail."""
        pending = self.pending[call]
        for path, (held, _) in list(pending.items()):
            shorter = min(len(held), len(steps))
            if held[:shorter] == steps[:shorter]:
                self._flush(call, path)

    def at_end(self, end: int | None) -> None:
        for call in self.open.values():
            self._settle_value(call)

    def _pieces(self, number: int, choice: Choice, call: Call, pieces: Any) -> None:
        """Apply `partialArgs` entries: each sets (or, continuing its path,
        extends) the value at its jsonPath; each is one fragment."""
        append, continuing, pending = self.core.append, self.continuing[call], self.pending[call]
        for piece in pieces if type(pieces) is list else ():
            if type(piece) is not dict:
                continue
            path = piece.get("jsonPath")
            more = piece.get("willContinue") is True
            key = "stringValue" if "stringValue" in piece else _value_key(piece)
            if key is None and type(path) is str:
                continuing[path] = more
                continue
            value = piece.get(key) if key is not None else None
            if key == "nullValue":
                value = None
            elif key == "numberValue" and type(value) is float and value.is_integer():
                value = int(value)
            extend = type(path) is str and continuing.get(path, False)
            if extend and type(value) is str and path in pending:  # the hot path
                pending[path][1].append(value)
                if not more:
                    self._flush(call, path)
            elif not self._set(number, call, path, value, extend, more):
                return
            append(number, choice, call, f"{path} {'+=' if extend else '='} {compact(value)}")
            continuing[path] = more

    def _set(
        self, number: int, call: Call, path: Any, value: Any, extend: bool, more: bool
    ) -> bool:
        """Set (or extend) the value at `path`; a string that goes on is kept
        as pieces, joined once its path stops continuing (joining per piece
        would be quadratic).  False after refusing a path that can't be read."""
        pending = self.pending[call]
        try:
            if type(path) is not str:
                raise PathError("a partialArgs piece without a jsonPath")
            steps = parse_path(path)
            self._flush_overlapping(call, steps)
            set_at(call.value, steps, value, extend=extend)
            if type(value) is str and more:
                pending[path] = (steps, [_value_at(call.value, steps)])
        except PathError as error:
            self._invalid(number, call, str(error))
            return False
        return True

    def _invalid(self, number: int, call: Call, message: str) -> None:
        call.invalid_at = {"frame": number, "offset": call.scanner.length, "message": message}
        self.core.refuse(
            "INVALID_ARGUMENTS",
            f"partialArgs of {self.describe(call)}: {message}",
            number,
            call,
        )

    def _server_call(self, number: int, choice: Choice, tool: dict[str, Any]) -> None:
        """A `toolCall` part: a whole server call named by its toolType."""
        core = self.core
        call = self._new(choice, "server", scanned=True)
        name = tool.get("toolType") or tool.get("name")
        core.touch(number, call)
        if not core.identify(
            number, choice, call, tool.get("id"), name, id_sent="id" in tool, name_sent=True
        ):
            return
        args = tool.get("args")
        if args is None:
            args = {k: v for k, v in tool.items() if k not in ("id", "toolType", "name")}
        core.append(number, choice, call, compact(args))
        core.close(number, choice, call)

    # -- the end ------------------------------------------------------------

    def complete(self) -> bool:
        choices = self.core.choices
        return bool(choices) and all(choice.finish_reason for choice in choices.values())

    def describe(self, call: Call) -> str:
        return f"functionCall part {call.index} of candidate {call.choice}"

    def malformed_message(self, call: Call, missing: list[str]) -> str:
        return f"{self.describe(call)} has no name"


def _value_key(piece: dict[str, Any]) -> str | None:
    """The first of VALUE_KEYS the piece holds."""
    for key in VALUE_KEYS:
        if key in piece:
            return key
    return None


def _value_at(root: Any, steps: list[str | int]) -> Any:
    for step in steps:
        root = root[step]
    return root
