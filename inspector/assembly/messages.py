"""The Anthropic Messages adapter: `message_start`, content blocks keyed by
their index, `message_delta`, `message_stop`.

A call's key is its content block `index`.  `content_block_start` of a
`tool_use` (function) or `server_tool_use` / `mcp_tool_use` (server) block
opens a call, `input_json_delta` pieces append to it, `content_block_stop`
closes it; `message_stop` is the done frame.  Whole `tool_use` blocks inside
`message_start` are whole calls.  Departures from anthropic-sdk-python,
which addresses blocks by position: a delta for an index with no block is
an orphan, one for a stopped block is `INCONSISTENT_CALL`, a second start
at a used index is `index_reused`, and frames with no `event:` line are
read (`event_name_missing`), not dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .dialect import MESSAGES, Core, Dialect, dialect_of
from .jsontext import compact

if TYPE_CHECKING:
    from .result import Call, Choice

KNOWN_FINISH = frozenset(
    (
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    )
)
CALL_BLOCKS = {"tool_use": "function", "server_tool_use": "server", "mcp_tool_use": "server"}


class Block:
    """One content block: its call (None for text and other blocks), the
    start's `input`, whether a non-empty delta came, whether it stopped."""

    __slots__ = ("call", "start_input", "had_delta", "stopped")

    def __init__(self, call: Call | None, start_input: Any = None) -> None:
        self.call = call
        self.start_input = start_input
        self.had_delta = False
        self.stopped = False


class MessagesDialect(Dialect):
    name = MESSAGES
    known_finish = KNOWN_FINISH

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        self.blocks: dict[int, Block] = {}
        self.message_id: Any = None
        self.message_open = False
        self.usage: dict[str, Any] | None = None
        self.name_missing_noted = False

    # -- frames -------------------------------------------------------------

    def ping(self, number: int, event: str | None) -> None:
        self._check_event_name(number, event)

    def error_frame(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        self._check_event_name(number, event)
        super().error_frame(number, payload, event)

    def _check_event_name(self, number: int, event: str | None) -> None:
        if not event and self.core.sse and not self.name_missing_noted:
            self.name_missing_noted = True
            if self.core.refusal is None:
                self.core.anomaly("event_name_missing", number)

    def chunk(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        core = self.core
        self._check_event_name(number, event)
        kind = payload.get("type")
        if type(kind) is not str or not kind:
            kind = event or None
        elif event and event != kind and core.refusal is None:
            core.anomaly("event_type_mismatch", number)
        if kind == "message_stop":
            self._stop(number)
        elif kind == "message_start":
            message = payload.get("message")
            self._start(number, message if type(message) is dict else {})
        elif kind == "message_delta":
            self._message_delta(number, payload)
        elif kind == "message" and "content" in payload:
            self._whole(number, payload)
        elif core.refusal is not None:
            return
        elif kind == "content_block_start":
            self._block_start(number, payload)
        elif kind == "content_block_delta":
            self._block_delta(number, payload)
        elif kind == "content_block_stop":
            self._block_stop(number, payload)
        elif kind == "error":
            core.refuse("UPSTREAM_ERROR", "the upstream sent an error event", number)
        elif dialect_of(payload) not in (None, MESSAGES):
            core.foreign(number)

    def _merge_usage(self, number: int, usage: Any) -> None:
        """Usage merges key by key at the top level, the later value winning."""
        if type(usage) is dict:
            self.usage = {**(self.usage or {}), **usage}
            self.core.take_usage(number, self.usage)

    def _start(self, number: int, message: dict[str, Any]) -> None:
        core = self.core
        message_id = message.get("id")
        if self.message_open and core.refusal is None:
            if message_id == self.message_id:
                core.anomaly("repeated_start", number)
                return
            if core.policy == "strict":
                core.refuse(
                    "SPLICED_STREAM",
                    f"message {message_id!r} started while message {self.message_id!r} "
                    "was still open",
                    number,
                )
                return
            for block in self.blocks.values():  # lenient: close the first message
                if block.call is not None and not block.stopped:
                    block.stopped = True
                    core.close(number, core.choice(0), block.call)
            self.blocks = {}
        self.message_id = message_id
        self.message_open = True
        self._merge_usage(number, message.get("usage"))
        if core.refusal is not None:
            return
        choice = core.choice(0)
        content = message.get("content")
        for position, block in enumerate(content if type(content) is list else []):
            if type(block) is dict:
                self._whole_block(number, choice, position, block)
                if core.refusal is not None:
                    return
        reason = message.get("stop_reason")
        if type(reason) is str and reason:
            core.finish_choice(number, choice, reason)

    def _whole_block(self, number: int, choice: Choice, position: int, block: dict) -> None:
        """A block already whole in `message_start` (or a whole body)."""
        core = self.core
        kind = CALL_BLOCKS.get(block.get("type"))  # type: ignore[arg-type]
        if kind is None:
            text = block.get("text") if block.get("type") == "text" else block.get("thinking")
            if type(text) is str and text:
                if block.get("type") == "text":
                    core.text(number, choice, text)
                else:
                    core.reasoning(number, choice, text)
            return
        call = core.new_call(choice, kind)
        call.index = call.block = position
        core.touch(number, call)
        if not core.identify(
            number,
            choice,
            call,
            block.get("id"),
            block.get("name"),
            id_sent="id" in block,
            name_sent="name" in block,
        ):
            return
        value = block.get("input")
        core.append(number, choice, call, compact(value) if value is not None else "")
        core.close(number, choice, call)

    def _block_start(self, number: int, payload: dict[str, Any]) -> None:
        core = self.core
        index = payload.get("index")
        if type(index) is not int or index < 0:
            return
        block = payload.get("content_block")
        if type(block) is not dict:
            return
        choice = core.choice(0)
        kind = CALL_BLOCKS.get(block.get("type"))  # type: ignore[arg-type]
        existing = self.blocks.get(index)
        if kind is None:
            self.blocks[index] = Block(None)
            if existing is not None:
                core.anomaly("index_reused", number)
            self._whole_block(number, choice, index, block)
            return
        block_id = block.get("id")
        if (
            existing is not None
            and existing.call is not None
            and type(block_id) is str
            and block_id
            and existing.call.id == block_id
        ):
            return  # the same block announced again: an inert repeat
        call = core.new_call(choice, kind)
        call.index = call.block = index
        self.blocks[index] = Block(call, block.get("input"))
        if existing is not None:
            core.anomaly("index_reused", number, call=call)
        core.touch(number, call)
        if core.identify(
            number,
            choice,
            call,
            block_id,
            block.get("name"),
            id_sent="id" in block,
            name_sent="name" in block,
        ):
            core.append(number, choice, call, "")

    def _block_delta(self, number: int, payload: dict[str, Any]) -> None:
        core = self.core
        delta = payload.get("delta")
        if type(delta) is not dict:
            return
        kind = delta.get("type")
        choice = core.choice(0)
        if kind == "text_delta":
            text = delta.get("text")
            if type(text) is str and text:
                core.text(number, choice, text)
            return
        if kind == "thinking_delta":
            text = delta.get("thinking")
            if type(text) is str and text:
                core.reasoning(number, choice, text)
            return
        if kind != "input_json_delta":
            return  # signature, citations, compaction deltas: no effect
        index = payload.get("index")
        block = self.blocks.get(index) if type(index) is int else None
        if block is None or block.call is None:
            core.drop(number, choice.index, "orphan_continuation")
            return
        call = block.call
        if block.stopped:
            core.refuse(
                "INCONSISTENT_CALL",
                f"{self.describe(call)} received input_json_delta after its content_block_stop",
                number,
                call,
            )
            return
        piece = delta.get("partial_json")
        fragment = piece if type(piece) is str else ""
        if fragment and not block.had_delta:
            block.had_delta = True
            if block.start_input not in (None, {}):
                core.anomaly("start_input_discarded", number, call=call)
        core.touch(number, call)
        core.append(number, choice, call, fragment)

    def _block_stop(self, number: int, payload: dict[str, Any]) -> None:
        core = self.core
        index = payload.get("index")
        block = self.blocks.get(index) if type(index) is int else None
        if block is None or block.stopped:
            return
        block.stopped = True
        call = block.call
        if call is None:
            return
        choice = core.choice(0)
        start_input = block.start_input
        if not block.had_delta and type(start_input) is dict and start_input:
            core.anomaly("arguments_only_in_start", number, call=call)
            core.append(number, choice, call, compact(start_input))
        core.close(number, choice, call)

    def _message_delta(self, number: int, payload: dict[str, Any]) -> None:
        core = self.core
        delta = payload.get("delta")
        if core.refusal is None and type(delta) is dict:
            choice = core.choice(0)
            details = delta.get("stop_details")
            if type(details) is dict:
                explanation = details.get("explanation")
                if type(explanation) is str and explanation:
                    core.refusal_text(choice, explanation)
            reason = delta.get("stop_reason")
            if type(reason) is str and reason:
                core.finish_choice(number, choice, reason)
        self._merge_usage(number, payload.get("usage"))

    def _stop(self, number: int) -> None:
        core = self.core
        if core.refusal is None:
            core.choice(0)
            for block in self.blocks.values():
                if not block.stopped:
                    core.anomaly("block_not_stopped", number, call=block.call)
        self.message_open = False
        core.done(number)

    def _whole(self, number: int, message: dict[str, Any]) -> None:
        """A whole non-streamed `message` body: its start, then its stop."""
        self._start(number, message)
        self._stop(number)

    # -- the end ------------------------------------------------------------

    def mismatch(self, choice: Choice) -> bool:
        reason = choice.finish_reason
        functions = any(call.kind == "function" for call in choice.calls)
        return (reason == "tool_use" and not functions) or (
            functions and reason in ("end_turn", "stop_sequence")
        )

    def answered(self, choice: Choice) -> bool:
        return choice.finish_reason == "refusal"

    def describe(self, call: Call) -> str:
        if call.block is not None:
            return f"block {call.block}"
        return f"call #{call.position}"
