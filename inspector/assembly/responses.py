"""The OpenAI Responses adapter: items keyed by `output_index`, their deltas
and final copies, the terminal response.

A call's key is its item's `output_index` (gateways rotate item ids between
events; both official consumers key by position).  `output_item.added`
opens a call, the argument deltas append to the call open at their index
(a delta for an index nothing opened yet is a provisional call, as a
resumed stream sends them), the `*.done` events and `output_item.done` are
final copies: their text must equal the assembled text (`INCONSISTENT_CALL`
otherwise; the SDKs trust the final copy, the inspector says when a
streaming and a non-streaming client would run different calls).  The
terminal frame (`response.completed`, `.incomplete`, `.failed`) is the done
frame; its `response.output` must list the calls the stream built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .dialect import RESPONSES, Core, Dialect, dialect_of, error_message
from .jsontext import compact
from .scanner import ArgumentScanner, TextScanner

if TYPE_CHECKING:
    from .result import Call, Choice

KNOWN_FINISH = frozenset(("completed", "incomplete", "failed"))
BUILTIN_ITEMS = frozenset(
    ("local_shell_call", "shell_call", "apply_patch_call", "computer_call", "mcp_approval_request")
)
SCANNED_ITEMS = frozenset(("function_call", "mcp_call"))  # their text is JSON
# delta event -> the field of its `.done` event that holds the final text
DELTA_EVENTS = {
    "response.function_call_arguments.delta": "arguments",
    "response.custom_tool_call_input.delta": "input",
    "response.mcp_call_arguments.delta": "arguments",
    "response.shell_call_command.delta": None,
    "response.apply_patch_call_operation_diff.delta": None,
    "response.code_interpreter_call_code.delta": "code",
}
DONE_EVENTS = {name[: -len("delta")] + "done": field for name, field in DELTA_EVENTS.items()}
TERMINAL = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
DERIVED_DROP = ("type", "id", "call_id", "status", "output", "result")


def call_kind(item: dict[str, Any]) -> str | None:
    """The kind of call an output item is (client kinds `function`, `custom`,
    `builtin`; any other `*_call` is `server`), or None."""
    kind = item.get("type")
    if type(kind) is not str:
        return None
    if kind == "function_call":
        return "function"
    if kind == "custom_tool_call":
        return "custom"
    if kind in BUILTIN_ITEMS:
        return "builtin"
    if kind == "tool_search_call":
        return "builtin" if item.get("execution") == "client" else "server"
    if kind.endswith("_call"):
        return "server"
    return None


def _index(payload: dict[str, Any]) -> int | None:
    index = payload.get("output_index")
    return index if type(index) is int and index >= 0 else None


def _text(value: Any) -> str | None:
    return value if type(value) is str else None


def item_text(item: dict[str, Any], kind: str) -> str | None:
    """The text a call item's final copy gives its arguments: `arguments`
    or `input` for calls whose arguments stream; else the derived object
    (a builtin's action, a server item minus its bookkeeping) as compact
    JSON."""
    if kind == "function" or item.get("type") == "mcp_call":
        return _text(item.get("arguments"))
    if kind == "custom":
        return _text(item.get("input"))
    return compact(derived_value(item, kind))


def derived_value(item: dict[str, Any], kind: str) -> Any:
    if kind == "builtin":
        for key in ("action", "operation", "arguments"):
            if key in item:
                return item[key]
    return {key: value for key, value in item.items() if key not in DERIVED_DROP}


class ResponsesDialect(Dialect):
    name = RESPONSES
    known_finish = KNOWN_FINISH

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        self.by_index: dict[int, Call] = {}
        self.by_item: dict[str, Call] = {}
        self.keyed: list[Call] = []  # every call, in the order first seen
        self.provisional: set[Call] = set()  # never opened by output_item.added
        self.item_done: set[Call] = set()
        self.item_id_noted: set[Call] = set()
        self.streamed: set[Call] = set()  # calls that got delta text
        self.created = False
        self.last_sequence: int | None = None
        self.noted: set[str] = set()

    # -- frames -------------------------------------------------------------

    def chunk(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        core = self.core
        kind = self._type(number, payload, event)
        self._sequence(number, payload, kind)
        terminal = TERMINAL.get(kind or "")
        if terminal is not None:
            self._terminal(number, payload, terminal)
            return
        if payload.get("object") == "response":
            self._whole(number, payload)
            return
        if core.refusal is not None:
            return
        if kind is None or not kind.startswith("response."):
            if kind == "error":
                core.refuse("UPSTREAM_ERROR", _error_message(payload), number)
            elif dialect_of(payload) not in (None, RESPONSES):
                core.foreign(number)
            return
        choice = core.choice(0)
        if kind in ("response.created", "response.in_progress", "response.queued"):
            self.created = True
        elif kind == "response.output_item.added":
            self._added(number, choice, payload)
        elif kind in DELTA_EVENTS:
            self._delta(number, choice, payload)
        elif kind in DONE_EVENTS:
            self._done_event(number, choice, payload, DONE_EVENTS[kind])
        elif kind == "response.output_item.done":
            self._item_done(number, choice, payload)
        elif kind == "response.output_text.delta":
            delta = payload.get("delta")
            if type(delta) is str and delta:
                core.text(number, choice, delta)
        elif kind == "response.refusal.delta":
            delta = payload.get("delta")
            if type(delta) is str and delta:
                core.refusal_text(choice, delta)
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            delta = payload.get("delta")
            if type(delta) is str and delta:
                core.reasoning(number, choice, delta)

    def error_frame(self, number: int, payload: dict[str, Any], event: str | None) -> None:
        self._sequence(number, payload, self._type(number, payload, event))
        self.core.refuse("UPSTREAM_ERROR", _error_message(payload), number)

    def _type(self, number: int, payload: dict[str, Any], event: str | None) -> str | None:
        """The frame's `type`, else its event name; `type` wins a disagreement."""
        kind = payload.get("type")
        if type(kind) is not str or not kind:
            return event or None
        if event and event != kind:
            self._once("event_type_mismatch", number)
        return kind

    def _once(self, anomaly: str, number: int) -> None:
        if anomaly not in self.noted and self.core.refusal is None:
            self.noted.add(anomaly)
            self.core.anomaly(anomaly, number)

    def _sequence(self, number: int, payload: dict[str, Any], kind: str | None) -> None:
        sequence = payload.get("sequence_number")
        if type(sequence) is not int:
            return
        last = self.last_sequence
        if last is None:
            if sequence > 0 and not self.created and kind != "response.created":
                self._once("resumed_stream", number)
        elif sequence > last + 1:
            self._once("sequence_gap", number)
        elif sequence <= last:
            self._once("sequence_disorder", number)
        self.last_sequence = sequence

    # -- calls --------------------------------------------------------------

    def _call_item(
        self, payload: dict[str, Any]
    ) -> tuple[dict[str, Any], str, int | None, Call | None] | None:
        """An item event's call item: (item, kind, output_index, the call
        held at that index), or None when the item is not a call."""
        item = payload.get("item")
        if type(item) is not dict:
            return None
        kind = call_kind(item)
        if kind is None:
            return None
        index = _index(payload)
        return item, kind, index, self.by_index.get(index) if index is not None else None

    def _added(self, number: int, choice: Choice, payload: dict[str, Any]) -> None:
        found = self._call_item(payload)
        if found is None:
            return
        item, kind, index, call = found
        if call is not None and call in self.provisional:
            self.provisional.discard(call)
            self._adopt(call, kind, item)
        else:
            reused = call is not None
            call = self._open(choice, index, kind, item)
            if reused:
                self.core.anomaly("index_reused", number, call=call)
        self._identify(number, choice, call, item, kind)
        if self.core.refusal is not None:
            return
        first = item.get("input") if kind == "custom" else item.get("arguments")
        streams = kind in ("function", "custom") or item.get("type") == "mcp_call"
        fragment = first if streams and type(first) is str and not call.pieces else ""
        if fragment:
            self.streamed.add(call)
        self.core.append(number, choice, call, fragment)

    def _open(self, choice: Choice, index: int | None, kind: str, item: dict[str, Any]) -> Call:
        call = self.core.new_call(choice, kind, scanned=item.get("type") in SCANNED_ITEMS)
        call.index = index
        if index is not None:
            self.by_index[index] = call
        self.keyed.append(call)
        return call

    def _adopt(self, call: Call, kind: str, item: dict[str, Any]) -> None:
        """A provisional call learns what item it belongs to."""
        call.kind = kind
        call.needs_id = kind != "server"
        scanned = item.get("type") in SCANNED_ITEMS
        if scanned != call.scanned:
            call.scanned = scanned
            call.scanner = ArgumentScanner() if scanned else TextScanner()
            for piece in call.pieces:
                call.scanner.feed(piece)

    def _identify(
        self, number: int, choice: Choice, call: Call, item: dict[str, Any], kind: str
    ) -> bool:
        item_id = item.get("id")
        if type(item_id) is str and item_id:
            if call.item_id is None:
                call.item_id = item_id
            self.by_item.setdefault(item_id, call)
        call_id = item.get("call_id")
        id_sent = "call_id" in item
        if not (type(call_id) is str and call_id) and kind in ("builtin", "server"):
            call_id = item_id if call.id is None else None
        name = item.get("name")
        name_sent = "name" in item
        if not (type(name) is str and name) and kind in ("builtin", "server"):
            name = item.get("type")
        self.core.touch(number, call)
        return self.core.identify(
            number, choice, call, call_id, name, id_sent=id_sent, name_sent=name_sent
        )

    def _delta(self, number: int, choice: Choice, payload: dict[str, Any]) -> None:
        core = self.core
        index = _index(payload)
        item_id = payload.get("item_id")
        if not (type(item_id) is str and item_id):
            item_id = None
        if index is not None:
            call = self.by_index.get(index)
            if call is None:
                call = self.core.new_call(choice, "function")
                call.index = index
                self.by_index[index] = call
                self.keyed.append(call)
                self.provisional.add(call)
        elif item_id is not None and item_id in self.by_item:
            call = self.by_item[item_id]
        else:
            core.drop(number, choice.index, "orphan_continuation")
            return
        if call in self.item_done:
            core.refuse(
                "INCONSISTENT_CALL",
                f"{self.describe(call)} received a delta after its output_item.done",
                number,
                call,
            )
            return
        if (
            item_id is not None
            and call.item_id is not None
            and item_id != call.item_id
            and call not in self.item_id_noted
        ):
            self.item_id_noted.add(call)
            core.anomaly("item_id_changed", number, call=call)
        delta = payload.get("delta")
        fragment = delta if type(delta) is str else "" if delta is None else compact(delta)
        if fragment:
            self.streamed.add(call)
        core.touch(number, call)
        core.append(number, choice, call, fragment)

    def _done_event(
        self, number: int, choice: Choice, payload: dict[str, Any], field: str | None
    ) -> None:
        index = _index(payload)
        call = self.by_index.get(index) if index is not None else None
        if call is None:
            item_id = payload.get("item_id")
            call = self.by_item.get(item_id) if type(item_id) is str else None
        if call is None:
            return
        text = _text(payload.get(field)) if field is not None else None
        self._final(number, choice, call, payload, text)

    def _item_done(self, number: int, choice: Choice, payload: dict[str, Any]) -> None:
        found = self._call_item(payload)
        if found is None:
            return
        item, kind, index, call = found
        if call is None or call in self.item_done:
            call = self._open(choice, index, kind, item)  # an item never opened
        elif call in self.provisional:
            self.provisional.discard(call)
            self._adopt(call, kind, item)
        if kind == "builtin" or (
            kind == "server" and not call.scanned and call not in self.streamed
        ):
            call.value = derived_value(item, kind)
        if not self._identify(number, choice, call, item, kind):
            return
        self._final(number, choice, call, None, item_text(item, call.kind))
        self.item_done.add(call)

    def _final(
        self,
        number: int,
        choice: Choice,
        call: Call,
        payload: dict[str, Any] | None,
        text: str | None,
    ) -> None:
        """A final copy: its name follows the identity rules, its text must
        be the assembled text; a call with no text takes it from here."""
        core = self.core
        if payload is not None:
            core.touch(number, call)
            if not core.identify(
                number,
                choice,
                call,
                payload.get("call_id"),
                payload.get("name"),
                id_sent="call_id" in payload,
                name_sent="name" in payload,
            ):
                return
        fragment = ""
        if text is not None:
            if call not in self.streamed and not call.pieces:
                fragment = text
                streams = call.kind in ("function", "custom") or call.scanned
                if text and streams:
                    core.anomaly("arguments_only_in_done", number, call=call)
            elif text != call.arguments_text:
                core.refuse(
                    "INCONSISTENT_CALL",
                    f"{self.describe(call)}: the final copy's arguments differ from the "
                    f"streamed deltas ({len(text)} vs {len(call.arguments_text)} characters)",
                    number,
                    call,
                )
                return
        core.append(number, choice, call, fragment)
        core.close(number, choice, call)

    # -- the end ------------------------------------------------------------

    def _terminal(self, number: int, payload: dict[str, Any], status: str) -> None:
        core = self.core
        response = payload.get("response")
        if type(response) is not dict:
            response = {}
        core.take_usage(number, response.get("usage"))
        if core.refusal is None:
            choice = core.choice(0)
            reason = response.get("status")
            reason = reason if type(reason) is str and reason else status
            core.finish_choice(number, choice, reason)
            details = response.get("incomplete_details")
            if type(details) is dict and type(details.get("reason")) is str:
                choice.finish_detail = details["reason"]
            for call in self.keyed:
                if call not in self.item_done:
                    core.anomaly("item_not_done", number, call=call)
            self._check_output(number, response)
            if status == "failed" or reason == "failed":
                error = response.get("error")
                core.refuse(
                    "UPSTREAM_ERROR",
                    _error_message({"error": error}) if error else "the response failed",
                    number,
                )
        core.done(number)

    def _check_output(self, number: int, response: dict[str, Any]) -> None:
        """The terminal response's call items must be the calls the stream
        built, by position, with the same names and arguments."""
        listed = _listed_call_items(response)
        if not listed:
            return
        built = sorted(
            self.keyed,
            key=lambda c: (c.index if c.index is not None else 1 << 62, c.seen_order),
        )
        core = self.core
        for position, item in enumerate(listed):
            if position >= len(built):
                core.refuse(
                    "INCONSISTENT_CALL",
                    f"response.output lists a {item.get('type')} item the stream never built",
                    number,
                )
                return
            call = built[position]
            kind = call_kind(item) or "function"
            name = item.get("name") or (item.get("type") if kind in ("builtin", "server") else None)
            if name != call.name or not self._same_arguments(item, call, kind):
                core.refuse(
                    "INCONSISTENT_CALL",
                    f"response.output item {position} ({item.get('type')} {name!r}) does not "
                    f"match {self.describe(call)} as the stream built it",
                    number,
                    call,
                )
                return
            call_id = item.get("call_id")
            if type(call_id) is str and call_id and call.id is not None and call_id != call.id:
                core.anomaly("call_id_changed", number, call=call)
        if len(built) > len(listed):
            core.refuse(
                "INCONSISTENT_CALL",
                f"response.output does not list {self.describe(built[len(listed)])}",
                number,
                built[len(listed)],
            )

    def _same_arguments(self, item: dict[str, Any], call: Call, kind: str) -> bool:
        """An output item's arguments against the call the stream built (a
        server item's streamed pieces hold another shape: not compared)."""
        if call.value is not None:
            return compact(derived_value(item, kind)) == compact(call.value)
        if kind in ("function", "custom") or call.scanned or call not in self.streamed:
            return item_text(item, kind) == call.arguments_text
        return True

    def _whole(self, number: int, response: dict[str, Any]) -> None:
        """A whole non-streamed `response` body: its output items read as
        added and done in this one frame, then its terminal."""
        core = self.core
        if core.refusal is None:
            choice = core.choice(0)
            output = response.get("output")
            for position, item in enumerate(output if type(output) is list else []):
                if type(item) is not dict:
                    continue
                if call_kind(item) is not None:
                    event = {"output_index": position, "item": item}
                    self._added(number, choice, event)
                    self._item_done(number, choice, event)
                elif item.get("type") == "message":
                    self._message(number, choice, item)
                if core.refusal is not None:
                    break
        status = response.get("status")
        self._terminal(number, {"response": response}, status if type(status) is str else "")

    def _message(self, number: int, choice: Choice, item: dict[str, Any]) -> None:
        content = item.get("content")
        for part in content if type(content) is list else []:
            if type(part) is not dict:
                continue
            if part.get("type") == "output_text" and type(part.get("text")) is str:
                if part["text"]:
                    self.core.text(number, choice, part["text"])
            elif part.get("type") == "refusal" and type(part.get("refusal")) is str:
                self.core.refusal_text(choice, part["refusal"])

    def describe(self, call: Call) -> str:
        if call.index is not None:
            return f"item at output_index {call.index}"
        return f"call #{call.position}"

    def malformed_message(self, call: Call, missing: list[str]) -> str:
        if call in self.provisional:
            return (
                f"{self.describe(call)}: deltas arrived but no output_item.added ever opened "
                f"it (never received its {' or '.join(missing)})"
            )
        return super().malformed_message(call, missing)


_error_message = error_message


def _listed_call_items(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The call items a terminal response's `output` lists."""
    output = response.get("output")
    if type(output) is not list:
        return []
    return [item for item in output if type(item) is dict and call_kind(item) is not None]
