"""The tool-call assembler core: frames in, events and a result out.

Theory of operation (the choices the rules leave open are in
`docs/assembly-decisions.md`):

* One core of rules, whatever the wire format: identity is established once
  and never erased (a different name is `IDENTITY_CONFLICT`), arguments are
  scanned as they arrive and a call *settles* once it holds its identity and
  its root object closed, the first refusal ends assembly (later frames
  count only for `usage`, and the `refusal` event is appended last, at
  `finish()`), the end checks and the batch rule (`finish()`).
* A dialect adapter (`chat.py`, `responses.py`, `messages.py`, `gemini.py`)
  reads its wire format's frames and feeds the core's operations:
  `new_call`, `identify`, `append`, `close`, `text`, `reasoning`,
  `refusal_text`, `take_usage`, `finish_choice`, `done`, `refuse`.
* With dialect `auto`, frames are held until the first JSON object that is
  not an error frame says which dialect the stream speaks (`dialect.py`),
  then replayed; nothing deciding by the end means chat.  Equal frames in a
  row are held as one frame and a count (a million `data: {}` frames cost
  one), and replayed each under its own number.

The assembler never parses JSON but the arguments' final check: frames come
in already classified and parsed (see `frames.py`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import orjson

from .chat import ChatDialect
from .dialect import (
    AUTO_DIALECT,
    CHAT,
    DIALECTS,
    GEMINI,
    MESSAGES,
    RESPONSES,
    Dialect,
    dialect_of,
)
from .frames import Frame, FrameKind, read_frame
from .gemini import GeminiDialect
from .messages import MessagesDialect
from .responses import ResponsesDialect
from .result import Anomaly, Call, Choice, Event, EventLog, Refusal, Result
from .scanner import BLANK

STRICT = "strict"
LENIENT = "lenient"
POLICIES = (STRICT, LENIENT)
# The refusals only strict makes: the one rule the policies differ in (spec
# section 8, and Messages' spliced stream in the dialects).  Until strict
# makes one of them, lenient reads a stream exactly as strict does, so
# `lenient_twin` can give lenient's result without a second assembly.
STRICT_ONLY_REFUSALS = frozenset({"AMBIGUOUS_CONTINUATION", "SPLICED_STREAM"})


def lenient_twin(strict: Result) -> Result | None:
    """Lenient's result for the stream that gave `strict`: the same result
    under lenient's name when strict made none of STRICT_ONLY_REFUSALS;
    None when it did (lenient went on from there, and only reading the
    stream again under lenient tells how)."""
    if strict.refusal is not None and strict.refusal.code in STRICT_ONLY_REFUSALS:
        return None
    return strict.as_policy(LENIENT)


ADAPTERS: dict[str, type[Dialect]] = {
    CHAT: ChatDialect,
    RESPONSES: ResponsesDialect,
    MESSAGES: MessagesDialect,
    GEMINI: GeminiDialect,
}


# Frame kinds read the same in every dialect (their refusal is generic).
_NEUTRAL = (FrameKind.COMMENT, FrameKind.INVALID, FrameKind.ERROR)


def _usable_string(value: Any) -> bool:
    return type(value) is str and value != ""


def _same(held: Frame, frame: Frame) -> bool:
    """Whether two frames read the same but for their numbers."""
    return (
        held.kind is frame.kind
        and held.data == frame.data
        and held.raw == frame.raw
        and held.event == frame.event
        and held.unterminated == frame.unterminated
        and held.parse_failed == frame.parse_failed
    )


def _again(frame: Frame, number: int) -> Frame:
    """A held frame's twin numbered `number`, with a payload of its own."""
    payload = orjson.loads(frame.data) if frame.payload is not None else None
    return Frame(
        number,
        frame.kind,
        frame.raw,
        frame.data,
        payload,
        unterminated=frame.unterminated,
        parse_failed=frame.parse_failed,
        event=frame.event,
    )


class Assembler:
    """Feed frames in order with `feed`; call `finish` once at the end.

    `events` grows as frames are fed (a live view can read it as it grows);
    `refusal` is set the moment a refusal is decided.  `dialect` is one of
    `DIALECTS` or `auto`; `hint` is what decides `auto` when no frame does
    before the first one that would (a HAR's request URL); `sse` says whether
    the frames come from SSE (only there can an `event:` line be missing).
    """

    def __init__(
        self,
        policy: str = STRICT,
        dialect: str = AUTO_DIALECT,
        *,
        hint: str | None = None,
        sse: bool = True,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
        if dialect != AUTO_DIALECT and dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}; expected one of {DIALECTS}")
        self.policy = policy
        self.sse = sse
        self.frames = 0
        self.done_frame: int | None = None
        self.refusal: Refusal | None = None
        self.usage: dict[str, Any] | None = None
        self.choices: dict[int, Choice] = {}
        self.calls: list[Call] = []  # in the order first seen
        self.started: list[Call] = []  # in the order started
        self.dropped: list[dict[str, Any]] = []
        self.anomalies: list[Anomaly] = []
        self.events = EventLog(self.started)
        self._log = self.events.items.append  # the hot path's append (see EventLog)
        self._after_done_noted = False
        self._foreign_noted = False
        self._finished: Result | None = None
        self.dialect: str = CHAT
        self.adapter: Dialect
        # Frames held while `auto` has not decided, as runs of equal frames
        # ([first frame, how many]); None once it has.
        self._held: list[list[Any]] | None = None
        if dialect == AUTO_DIALECT and hint in DIALECTS:
            dialect = hint
        if dialect == AUTO_DIALECT:
            self._held = []
            self._use(CHAT)
        else:
            self._use(dialect)

    def _use(self, dialect: str) -> None:
        self.dialect = dialect
        self.adapter = ADAPTERS[dialect](self)
        self._chunk = self.adapter.chunk

    # -- frames -------------------------------------------------------------

    def feed(self, frame: Frame) -> None:
        if self._held is not None:
            self._hold(frame)
            return
        self.frames = frame.number + 1
        if self.done_frame is not None:
            if not self._after_done_noted:
                self._after_done_noted = True
                if self.refusal is None:
                    self._anomaly("data_after_done", frame.number)
            return
        if frame.unterminated and self.refusal is None:
            self._anomaly("unterminated_frame", frame.number)
        kind = frame.kind
        if kind is FrameKind.CHUNK:
            self._chunk(frame.number, frame.payload, frame.event)
        elif kind is FrameKind.DONE:
            self.adapter.done_literal(frame.number)
        elif kind is FrameKind.ERROR:
            self.adapter.error_frame(frame.number, frame.payload, frame.event)
        elif kind is FrameKind.INVALID:
            if frame.unterminated and frame.parse_failed:
                self.refuse(
                    "INCOMPLETE_STREAM",
                    "the connection was cut in the middle of a frame",
                    frame.number,
                )
            else:
                self.refuse("INVALID_FRAME", "frame data is not a JSON object", frame.number)
        elif kind is FrameKind.PING and self.dialect == MESSAGES:
            self.adapter.ping(frame.number, frame.event)  # type: ignore[attr-defined]

    def read_chunk(
        self,
        number: int,
        block: bytes | str | None,
        data: bytes | str,
        payload: dict[str, Any],
        event: str | None,
    ) -> None:
        """`feed` for a frame a reader read and made no `Frame` of
        (`SSEReader.read`, `JSONArrayReader.read`): a terminated block (or
        array element) whose data parsed as the object `payload`.  A chunk,
        while the dialect is decided and before the done frame, goes to the
        adapter as `feed` would send it; anything else becomes its `Frame`
        and is fed."""
        if (
            self._held is None
            and self.done_frame is None
            and payload.get("error") is None
            and payload.get("object") != "error"
            and len(payload) != 1  # maybe a ping
        ):
            self.frames = number + 1
            self._chunk(number, payload, event)
        else:
            self.feed(read_frame(number, block, data, payload, event))

    def _hold(self, frame: Frame) -> None:
        """`auto`: hold frames until one tells the dialect, then replay."""
        held = self._held
        assert held is not None
        if not held and frame.kind in _NEUTRAL:
            # Read at once: a live view must see such a refusal when it happens.
            self._held = None
            self.feed(frame)
            self._held = held
            return
        last = held[-1] if held else None
        if last is not None and frame.number == last[0].number + last[1] and _same(last[0], frame):
            last[1] += 1
        else:
            held.append([frame, 1])
        decided = None
        if frame.kind is FrameKind.CHUNK:
            decided = dialect_of(frame.payload)  # type: ignore[arg-type]
        elif frame.kind is FrameKind.PING:
            decided = MESSAGES
        if decided is not None:
            self._replay(decided)

    def _replay(self, dialect: str) -> None:
        held = self._held or []
        self._held = None
        if dialect != self.dialect:
            self._use(dialect)
        for first, count in held:
            self.feed(first)
            for number in range(first.number + 1, first.number + count):
                self.feed(_again(first, number))

    def compact(self) -> None:
        """Between frames, when the caller has stored what came so far: join
        the small texts taken since the last time (each call's fragments,
        each choice's text) into one string each, so a long stream's pieces
        do not each cost a string of their own.  The result is unchanged."""
        for choice in self.choices.values():
            choice.compact()
        for call in self.calls:
            call.compact()

    def cut_after_last_frame(self) -> None:
        """The input ended between frames of a format that must close (a
        JSON array with no `]`): `INCOMPLETE_STREAM` at the last frame."""
        if self._held is not None:
            self._replay(CHAT)
        if self.done_frame is None:
            self.refuse(
                "INCOMPLETE_STREAM",
                "the input ended before the JSON array closed",
                self.frames - 1 if self.frames else None,
            )

    # -- operations the adapters feed ---------------------------------------

    def choice(self, index: int) -> Choice:
        choice = self.choices.get(index)
        if choice is None:
            choice = self.choices[index] = Choice(index)
        return choice

    def text(self, number: int, choice: Choice, text: str) -> None:
        choice.text.append(text)
        self._event("text_delta", number, fields={"choice": choice.index, "delta": text})

    def reasoning(self, number: int, choice: Choice, text: str) -> None:
        choice.reasoning.append(text)
        self._event("reasoning_delta", number, fields={"choice": choice.index, "delta": text})

    def refusal_text(self, choice: Choice, text: str) -> None:
        """The model declining (not the assembler's refusal): no event."""
        choice.refusal_text.append(text)

    def take_usage(self, number: int, usage: Any) -> None:
        if type(usage) is dict:
            self.usage = usage
            self._event("usage", number, fields={"usage": usage})

    def finish_choice(self, number: int, choice: Choice, reason: str) -> None:
        """A finish reason (non-empty): the last one wins; outside the
        dialect's known set it is kept and noted."""
        choice.finish_reason = reason
        self._event("finish", number, fields={"choice": choice.index, "finish_reason": reason})
        if reason not in self.adapter.known_finish:
            self._anomaly("unknown_finish_reason", number, choice=choice.index)

    def done(self, number: int) -> None:
        """The done frame: the stream is over.  A choice that never said why
        gets `no_finish_reason` here."""
        self.done_frame = number
        if self.refusal is None:
            self._event("done", number)
            for index in sorted(self.choices):
                if self.choices[index].finish_reason is None:
                    self._anomaly("no_finish_reason", number, choice=index)

    def foreign(self, number: int) -> None:
        """A frame of another dialect: no effect, noted once."""
        if not self._foreign_noted and self.refusal is None:
            self._foreign_noted = True
            self._anomaly("foreign_frame", number)

    def new_call(self, choice: Choice, kind: str = "function", scanned: bool = True) -> Call:
        call = Call(choice.index, len(self.calls), kind, scanned)
        self.calls.append(call)
        choice.calls.append(call)
        choice.unsettled.append(call)
        choice.changed()
        return call

    def touch(self, number: int, call: Call) -> None:
        """Record that a delta of frame `number` resolved to `call`."""
        frames = call.frames
        if not frames or frames[-1] != number:
            frames.append(number)

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
    ) -> bool:
        """Establish id and name, note ignored ones; False on a conflict.

        A different id than the one held is the anomaly `call_id_changed`
        (the first stays); a different name is `IDENTITY_CONFLICT`.
        """
        if _usable_string(call_id):
            if call.id is None:
                call.id = call_id
                choice.by_id.setdefault(call_id, call)
                self._event("identity", number, call, {"field": "id", "value": call_id})
            elif call.id != call_id:
                self._anomaly("call_id_changed", number, call=call)
        elif id_sent:
            self._event("identity_ignored", number, call, {"field": "id", "value": call_id})
        if _usable_string(name):
            if call.name is None:
                call.name = name
                self._event("identity", number, call, {"field": "name", "value": name})
            elif call.name != name:
                if self.dialect == CHAT:
                    who, later = f"call {call.id or call.name!r}", "a later delta"
                else:
                    who = f"{self.adapter.describe(call)} (call {call.id or call.name!r})"
                    later = f"frame {number}"
                self.refuse(
                    "IDENTITY_CONFLICT",
                    f"{who} is named {call.name!r}, {later} names it {name!r}",
                    number,
                    call,
                )
                return False
        elif name_sent:
            self._event("identity_ignored", number, call, {"field": "name", "value": name})
        return True

    def append(self, number: int, choice: Choice, call: Call, fragment: str) -> None:
        """Append a fragment (maybe empty); start the call once it holds an
        id or a name; settle it when its root object closed."""
        scanner = call.scanner
        if fragment:
            length = scanner.length
            call.fragment_frames.append(number)
            call.fragment_starts.append(length)
            call.pieces.append(fragment)
            if (
                scanner.in_string
                and not scanner.escape
                and '"' not in fragment
                and "\\" not in fragment
            ):  # the same string goes on: `ArgumentScanner.feed`'s shortcut, without the call
                scanner.length = length + len(fragment)
            else:
                scanner.feed(fragment)
            if call.started_frame is not None:  # the hot path: one event per fragment
                self._log((number, call.position, fragment))
                if scanner.closed_at is not None and call.settled_frame is None:
                    if call.id is not None and call.name is not None:
                        self._settle(number, choice, call)
                return
        if call.started_frame is None:
            if call.id is None and call.name is None:
                return
            call.started_frame = number
            # Started calls lead `calls` in start order, so this is final.
            call.position = call.start_order = len(self.started)
            self.started.append(call)
            self._event("toolcall_start", number, call)
            if scanner.length:
                self._event("toolcall_delta", number, call, "".join(call.pieces))
        if (
            call.settled_frame is None
            and scanner.closed_at is not None
            and call.id is not None
            and call.name is not None
        ):
            self._settle(number, choice, call)

    def close(self, number: int, choice: Choice, call: Call) -> None:
        """A frame closed the call (a final copy, a block stop, a whole
        part): calls that are not scanned, or need no id, settle here."""
        if call.closed_frame is None:
            call.closed_frame = number
        if (
            call.settled_frame is None
            and call.started_frame is not None
            and call.name is not None
            and (call.id is not None or not call.needs_id)
            and (not call.scanned or call.scanner.closed_at is not None)
        ):
            self._settle(number, choice, call)

    def _settle(self, number: int, choice: Choice, call: Call) -> None:
        call.settled_frame = number
        if call in choice.unsettled:
            choice.unsettled.remove(call)
            choice.changed()
        self._event("settled", number, call)

    def drop(self, number: int, choice: int, reason: str) -> None:
        self.dropped.append({"frame": number, "choice": choice, "reason": reason})
        self._event("dropped", number, fields={"choice": choice, "reason": reason})

    # -- bookkeeping --------------------------------------------------------

    def _event(
        self,
        type_: str,
        frame: int | None,
        call: Call | None = None,
        fields: dict[str, Any] | str | None = None,
    ) -> None:
        self._log(Event(type_, frame, call, fields))

    def _anomaly(
        self, kind: str, frame: int | None, *, call: Call | None = None, choice: int | None = None
    ) -> Anomaly:
        anomaly = Anomaly(kind, frame, call, choice)
        self.anomalies.append(anomaly)
        self._event("anomaly", frame, fields={"anomaly": anomaly})
        return anomaly

    anomaly = _anomaly

    def refuse(
        self,
        code: str,
        message: str,
        frame: int | None,
        call: Call | None = None,
        choice: int | None = None,
    ) -> None:
        if self.refusal is None:
            self.refusal = Refusal(code, message, frame, call, choice)

    _refuse = refuse

    # -- end of stream: done or cut, the end checks, the batch rule --------

    def finish(self) -> Result:
        """Run the end-of-stream checks once and return the result."""
        if self._finished is not None:
            return self._finished
        if self._held is not None:
            self._replay(CHAT)
        end = (
            self.done_frame
            if self.done_frame is not None
            else (self.frames - 1 if self.frames else None)
        )
        calls = self.started + [call for call in self.calls if call.started_frame is None]
        for position, call in enumerate(calls):
            call.position = position
        if self.refusal is None:
            self._check_end(end, calls)
        if self.refusal is None:
            for call in calls:
                self._event("toolcall_end", end, call)
        else:
            self.events.append(
                Event("refusal", self.refusal.frame, fields={"refusal": self.refusal})
            )
        self._finished = Result(
            policy=self.policy,
            dialect=self.dialect,
            frames=self.frames,
            refusal=self.refusal,
            usage=self.usage,
            choices=[self.choices[i] for i in sorted(self.choices)],
            calls=calls,
            dropped=self.dropped,
            anomalies=self.anomalies,
            events=self.events,
        )
        return self._finished

    def _check_end(self, end: int | None, calls: list[Call]) -> None:
        adapter = self.adapter
        adapter.at_end(end)
        if self.refusal is not None:
            return
        if not adapter.has_done_frame:
            if not adapter.complete():
                self.refuse(
                    "INCOMPLETE_STREAM",
                    "the input ended before every candidate had a finish reason",
                    end,
                )
                return
        elif self.done_frame is None:
            if not any(choice.finish_reason for choice in self.choices.values()):
                self.refuse(
                    "INCOMPLETE_STREAM",
                    "the input ended with no done frame and no finish reason",
                    end,
                )
                return
            self._anomaly("missing_done", end)
        for index in sorted(self.choices):
            if adapter.mismatch(self.choices[index]):
                self._anomaly("finish_mismatch", end, choice=index)
        for call in calls:
            if not self._check_call(end, call):
                return
        for index in sorted(self.choices) or [0]:
            choice = self.choices.get(index)
            if choice is None or not (
                choice.text or choice.refusal_text or choice.calls or adapter.answered(choice)
            ):
                self.refuse(
                    "EMPTY_RESPONSE",
                    f"choice {index} has no text, no refusal text and no tool calls",
                    end,
                    choice=index,
                )
                return

    def _check_call(self, end: int | None, call: Call) -> bool:
        missing = [
            field
            for field in ("id", "name")
            if getattr(call, field) is None and (field == "name" or call.needs_id)
        ]
        if missing:
            self.refuse(
                "MALFORMED_TOOL_CALL", self.adapter.malformed_message(call, missing), end, call
            )
            return False
        if call.must_close and call.closed_frame is None:
            self.refuse(
                "MALFORMED_TOOL_CALL",
                f"{self.adapter.describe(call)} was still streaming its arguments at the end",
                end,
                call,
            )
            return False
        if not call.scanned:
            call.arguments = call.value if call.value is not None else call.arguments_text
            return True
        text = call.arguments_text
        if not text.strip(BLANK):
            call.arguments = {}
            return True
        scanner = call.scanner
        if scanner.invalid_at is not None:
            return self._invalid_arguments(call, scanner.invalid_at, scanner.invalid_reason)
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as error:
            return self._invalid_arguments(call, error.pos, error.msg)
        if type(value) is not dict:  # the scan rules this out; kept as a guard
            return self._invalid_arguments(call, 0, "arguments are not a JSON object")
        call.arguments = value
        return True

    def _invalid_arguments(self, call: Call, offset: int, message: str) -> bool:
        starts = call.fragment_starts
        if offset >= call.scanner.length:
            slot = len(starts) - 1
        else:
            slot = bisect_right(starts, offset) - 1
        frame = call.fragment_frames[slot]
        call.invalid_at = {"frame": frame, "offset": offset, "message": message}
        self.refuse(
            "INVALID_ARGUMENTS",
            f"arguments of {self.adapter.describe(call)} are not one "
            f"JSON object: {message} at offset {offset}",
            frame,
            call,
        )
        return False
