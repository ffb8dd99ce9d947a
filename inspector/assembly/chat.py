"""The chat-completions adapter: `choices[].delta` in, core
operations out.

Each `choices[i]` is assembled on its own.  A tool-call delta is
normalised, resolved to a call by id first and index only as a hint (an
explicit id re-associates, a new id binds or starts a call, an id-less
delta continues its one candidate), then applies its identity and appends
its fragment through the core.  Entries of `type: "custom"` (or with a
`custom` object and no `function`) are calls of kind `custom` whose
free-text input is never scanned.  A whole `chat.completion` body is its
one-frame stream: each choice's `message` read as its delta, then done.

This is the hot path of the benchmark: the common continuation (an entry
with an index and arguments only) takes the shortest way through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .dialect import CHAT, Core, Dialect, dialect_of
from .jsontext import compact
from .scanner import BLANK

if TYPE_CHECKING:
    from .result import Call, Choice

COMPLETION = "chat.completion"
KNOWN_FINISH = frozenset(
    ("stop", "length", "tool_calls", "content_filter", "function_call", "error")
)


class ChatDialect(Dialect):
    name = CHAT
    known_finish = KNOWN_FINISH

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        self._append = core.append
        self._strict = core.policy == "strict"

    def done_literal(self, number: int) -> None:
        self.core.done(number)

    # -- frames -------------------------------------------------------------

    def chunk(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        """Read one chunk: the plain continuation, most frames of a stream,
        here and flat; any other frame in `_any_chunk`.

        The plain continuation is one choice whose delta is `{"tool_calls":
        [{"index": i, "function": {"arguments": s}}]}`, with no finish reason,
        for the one unsettled call holding index `i`: `s` is appended as
        `_tool_delta` would (rule 3, one candidate, no identity to apply).
        The call is found in the choice's `open_at`, which holds it while the
        set of unsettled calls and their indexes stays the same (see
        `Choice.changed`); `_candidates` decides when it does not."""
        core = self.core
        try:  # each step fails on any other shape (JSON gives dicts, lists, scalars)
            (item,) = payload["choices"]
            delta = item["delta"]
            (entry,) = delta["tool_calls"]
            function = entry["function"]
            fragment = function["arguments"]
            index = entry["index"]
            choice_index = item["index"]
            choice = core.choices[choice_index]
        except (KeyError, IndexError, TypeError, ValueError):
            return self._any_chunk(number, payload)
        if (
            type(fragment) is not str
            or type(index) is not int
            or type(choice_index) is not int
            or index < 0
            or len(delta) != 1
            or len(entry) != 2
            or len(function) != 1
            or item.get("finish_reason") is not None
            or core.refusal is not None
            or payload.get("object") == COMPLETION
        ):
            return self._any_chunk(number, payload)
        call = choice.open_at.get(index)
        if call is None:
            candidates = self._candidates(choice, index)
            if len(candidates) != 1 or candidates[0].index != index:
                return self._any_chunk(number, payload)
            call = choice.open_at[index] = candidates[0]
        call.frames.append(number)  # the frame's one entry: nothing touched the call before
        self._append(number, choice, call, fragment)
        usage = payload.get("usage")
        if usage is not None:
            core.take_usage(number, usage)

    def _any_chunk(self, number: int, payload: dict[str, Any]) -> None:
        core = self.core
        choices = payload.get("choices")
        if type(choices) is not list:
            if dialect_of(payload) not in (None, CHAT):
                core.foreign(number)
                return
        elif core.refusal is None:
            whole = payload.get("object") == COMPLETION
            for item in choices:
                if type(item) is dict:
                    self._choice(number, item, whole)
                    if core.refusal is not None:
                        break
            if whole:
                core.take_usage(number, payload.get("usage"))
                core.done(number)
                return
        core.take_usage(number, payload.get("usage"))

    def _choice(self, number: int, item: dict[str, Any], whole: bool) -> None:
        core = self.core
        index = item.get("index")
        if type(index) is not int or index < 0:
            index = 0
        choice = core.choices.get(index)
        if choice is None:
            choice = core.choice(index)
        delta = item.get("delta")
        if type(delta) is not dict and whole:
            delta = _message_as_delta(item.get("message"))
        if type(delta) is dict:
            self._delta(number, choice, delta)
            if core.refusal is not None:
                return
        finish = item.get("finish_reason")
        if type(finish) is str and finish:
            core.finish_choice(number, choice, finish)
            if finish == "error":
                core.refuse(
                    "UPSTREAM_ERROR",
                    "the upstream ended the choice with finish_reason 'error'",
                    number,
                )

    def _delta(self, number: int, choice: Choice, delta: dict[str, Any]) -> None:
        # `type(x) is str and x` is the hot path's inline form of a usable string.
        core = self.core
        content = delta.get("content")
        if type(content) is str and content:
            core.text(number, choice, content)
        reasoning = delta.get("reasoning_content")
        if not (type(reasoning) is str and reasoning):
            reasoning = delta.get("reasoning")
        if type(reasoning) is str and reasoning:
            core.reasoning(number, choice, reasoning)
        refusal_text = delta.get("refusal")
        if type(refusal_text) is str and refusal_text:
            core.refusal_text(choice, refusal_text)
        entries = delta.get("tool_calls")
        if type(entries) is list:
            for entry in entries:
                self._tool_delta(number, choice, entry)
                if core.refusal is not None:
                    return

    # -- tool-call deltas: normalise, resolve, apply identity, append ---------

    def _tool_delta(self, number: int, choice: Choice, entry: Any) -> None:
        core = self.core
        if type(entry) is not dict:
            core.anomaly("malformed_entry", number, choice=choice.index)
            return
        call_id = entry.get("id")
        if not (type(call_id) is str and call_id):
            call_id = None
        function = entry.get("function")
        kind = "function"
        if type(function) is dict:
            name = function.get("name")
            arguments = function.get("arguments")
        else:
            function, name, arguments = _custom_entry(entry)
            if function is not None or entry.get("type") == "custom":
                kind = "custom"
        index = entry.get("index")
        if type(index) is not int or index < 0:
            index = None
        not_string_anomaly = None
        if type(arguments) is str:
            fragment = arguments
        elif arguments is None:
            fragment = ""
        else:
            fragment = compact(arguments)
            not_string_anomaly = core.anomaly("arguments_not_string", number)

        has_name = type(name) is str and name != ""
        target = self._resolve(number, choice, call_id, has_name, index, fragment, kind)
        if target is None:
            return
        if not_string_anomaly is not None:
            not_string_anomaly.call = target
        frames = target.frames
        if not frames or frames[-1] != number:
            frames.append(number)
        if not (
            index == target.index
            and "id" not in entry
            and (function is None or "name" not in function)
        ) and not self._apply_identity(number, choice, target, entry, function, index):
            return
        self._append(number, choice, target, fragment)

    def _candidates(self, choice: Choice, index: int | None) -> list[Call]:
        unsettled = choice.unsettled
        if index is None:
            return unsettled
        holding = [call for call in unsettled if call.index == index]
        return holding or [call for call in unsettled if call.index is None]

    def _resolve(
        self,
        number: int,
        choice: Choice,
        call_id: str | None,
        has_name: bool,
        index: int | None,
        fragment: str,
        kind: str,
    ) -> Call | None:
        """Rules 1-3: the call this delta belongs to, a new call, or None
        (dropped or refused)."""
        core = self.core
        if call_id is not None:
            known = choice.by_id.get(call_id)
            if known is not None:
                return known
            id_less = [c for c in self._candidates(choice, index) if c.id is None]
            if len(id_less) == 1:
                return id_less[0]
            call = self._new_call(choice, index, kind)
            if index is not None and index in choice.held_indexes:
                core.anomaly("index_reused", number, call=call)
            return call
        candidates = self._candidates(choice, index)
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            if self._strict:
                core.refuse(
                    "AMBIGUOUS_CONTINUATION",
                    f"a delta without an id fits {len(candidates)} unsettled calls",
                    number,
                )
                return None
            guess = _most_recent(candidates)
            core.anomaly("guessed_continuation", number, call=guess)
            return guess
        if has_name or (index is not None and fragment.strip(BLANK)):
            return self._new_call(choice, index, kind)
        reason = "empty_delta" if index is not None else "orphan_continuation"
        core.drop(number, choice.index, reason)
        return None

    def _new_call(self, choice: Choice, index: int | None, kind: str) -> Call:
        """A new call; when another call of the choice holds its index, that
        one is remembered (with whether it had settled) for the diagnosis."""
        previous = None
        if index is not None and index in choice.held_indexes:
            previous = next(c for c in reversed(choice.calls) if c.index == index)
        call = self.core.new_call(choice, kind, scanned=kind != "custom")
        if previous is not None:
            call.follows = (previous, previous.settled_frame is not None)
        return call

    def _apply_identity(
        self,
        number: int,
        choice: Choice,
        call: Call,
        entry: dict[str, Any],
        function: dict[str, Any] | None,
        index: int | None,
    ) -> bool:
        """Establish id and name, note ignored ones; False on a conflict."""
        name_sent = function is not None and "name" in function
        if not self.core.identify(
            number,
            choice,
            call,
            entry.get("id"),
            function.get("name") if function is not None else None,
            id_sent="id" in entry,
            name_sent=name_sent,
        ):
            return False
        if index is not None:
            if call.index is None:
                call.index = index
                choice.held_indexes.add(index)
                choice.changed()  # the calls holding `index` changed
            elif call.index != index:
                self.core.anomaly("index_changed", number, call=call)
        return True

    # -- end of stream ------------------------------------------------------

    def mismatch(self, choice: Choice) -> bool:
        reason = choice.finish_reason
        client_calls = any(call.kind != "server" for call in choice.calls)
        return (reason == "stop" and client_calls) or (reason == "tool_calls" and not client_calls)

    def malformed_message(self, call: Call, missing: list[str]) -> str:
        """Name the likely fault of two real-world shapes: text after a closed
        call at its index, and an id changed mid-call."""
        if call.follows is not None:
            previous, had_settled = call.follows
            if call.id is None and call.name is None and had_settled:
                return (
                    f"text arrived at index {call.index} after call #{previous.position}'s "
                    f"arguments had closed: it is either trailing text of call "
                    f"#{previous.position} or a call that never named itself (call "
                    f"#{call.position} never received its id or name)"
                )
            if call.id is not None and call.name is None and not had_settled:
                return (
                    f"the id changed mid-call at index {call.index} (from {previous.id!r} "
                    f"to {call.id!r}): call #{call.position} never received its name"
                )
        return super().malformed_message(call, missing)


def _custom_entry(entry: dict[str, Any]) -> tuple[dict[str, Any] | None, Any, Any]:
    """(the `custom` object, its name, its input) of a custom tool entry, or
    (None, None, None)."""
    custom = entry.get("custom")
    if type(custom) is dict:
        return custom, custom.get("name"), custom.get("input")
    return None, None, None


def _message_as_delta(message: Any) -> Any:
    """A whole completion's `message` read as a delta: tool calls without an
    index are numbered by position."""
    if type(message) is not dict:
        return message
    calls = message.get("tool_calls")
    if type(calls) is not list:
        return message
    numbered = [
        {"index": position, **call} if type(call) is dict and "index" not in call else call
        for position, call in enumerate(calls)
    ]
    return {**message, "tool_calls": numbered}


def _most_recent(candidates: list[Call]) -> Call:
    started = [call for call in candidates if call.start_order is not None]
    if started:
        return max(started, key=lambda call: call.start_order)
    return max(candidates, key=lambda call: call.seen_order)
