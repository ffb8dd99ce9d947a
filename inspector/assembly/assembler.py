"""The tool-call assembler: frames in, events and a result out.

Theory of operation (the law is the project's assembly spec; the section
numbers below are its sections):

* Each `choices[i]` is assembled on its own (section 2).  A tool-call delta
  is normalised, resolved to a call by id first and index only as a hint,
  then applies its identity and appends its fragment (section 3).
* A call is *settled* once it holds an id, a name and arguments whose root
  object closed; a settled call takes only deltas that name its id.  The
  incremental `ArgumentScanner` says when the root closed (section 4).
* The first refusal ends assembly: later frames count only for `usage`, and
  the `refusal` event is appended last, at `finish()` (section 6).
* `finish()` runs the end-of-stream checks and builds the `Result`
  (sections 5 and 7).

The assembler never parses JSON but the arguments' final check: frames come
in already classified and parsed (see `frames.py`).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

import orjson

from .frames import Frame, FrameKind
from .jsontext import compact
from .result import Anomaly, Call, Choice, Event, EventLog, Refusal, Result
from .scanner import BLANK

STRICT = "strict"
LENIENT = "lenient"
POLICIES = (STRICT, LENIENT)


def _usable_string(value: Any) -> bool:
    return type(value) is str and value != ""


class Assembler:
    """Feed frames in order with `feed`; call `finish` once at the end.

    `events` grows as frames are fed (a live view can read it as it grows);
    `refusal` is set the moment a refusal is decided.
    """

    def __init__(self, policy: str = STRICT) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
        self.policy = policy
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
        self._finished: Result | None = None

    # -- frames -------------------------------------------------------------

    def feed(self, frame: Frame) -> None:
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
            self._chunk(frame.number, frame.payload)
        elif kind is FrameKind.DONE:
            self.done_frame = frame.number
            if self.refusal is None:
                self._event("done", frame.number)
        elif kind is FrameKind.ERROR:
            self._refuse("UPSTREAM_ERROR", _error_message(frame.payload), frame.number)
            self._take_usage(frame.number, frame.payload)
        elif kind is FrameKind.INVALID:
            if frame.unterminated and frame.parse_failed:
                self._refuse(
                    "INCOMPLETE_STREAM",
                    "the connection was cut in the middle of a frame",
                    frame.number,
                )
            else:
                self._refuse("INVALID_FRAME", "frame data is not a JSON object", frame.number)

    def _chunk(self, number: int, payload: dict[str, Any]) -> None:
        if self.refusal is None:
            choices = payload.get("choices")
            if type(choices) is list:
                for item in choices:
                    if type(item) is dict:
                        self._choice(number, item)
                        if self.refusal is not None:
                            break
        self._take_usage(number, payload)

    def _take_usage(self, number: int, payload: dict[str, Any]) -> None:
        usage = payload.get("usage")
        if type(usage) is dict:
            self.usage = usage
            self._event("usage", number, fields={"usage": usage})

    def _choice(self, number: int, item: dict[str, Any]) -> None:
        index = item.get("index")
        if type(index) is not int or index < 0:
            index = 0
        choice = self.choices.get(index)
        if choice is None:
            choice = self.choices[index] = Choice(index)
        delta = item.get("delta")
        if type(delta) is dict:
            self._delta(number, choice, delta)
            if self.refusal is not None:
                return
        finish = item.get("finish_reason")
        if type(finish) is str and finish:
            choice.finish_reason = finish
            self._event("finish", number, fields={"choice": index, "finish_reason": finish})
            if finish == "error":
                self._refuse(
                    "UPSTREAM_ERROR",
                    "the upstream ended the choice with finish_reason 'error'",
                    number,
                )

    def _delta(self, number: int, choice: Choice, delta: dict[str, Any]) -> None:
        # `type(x) is str and x` is the hot path's inline form of _usable_string.
        content = delta.get("content")
        if type(content) is str and content:
            choice.text.append(content)
            self._event("text_delta", number, fields={"choice": choice.index, "delta": content})
        reasoning = delta.get("reasoning_content")
        if not (type(reasoning) is str and reasoning):
            reasoning = delta.get("reasoning")
        if type(reasoning) is str and reasoning:
            choice.reasoning.append(reasoning)
            self._event(
                "reasoning_delta", number, fields={"choice": choice.index, "delta": reasoning}
            )
        refusal_text = delta.get("refusal")
        if type(refusal_text) is str and refusal_text:
            choice.refusal_text.append(refusal_text)
        entries = delta.get("tool_calls")
        if type(entries) is list:
            for entry in entries:
                self._tool_delta(number, choice, entry)
                if self.refusal is not None:
                    return

    # -- tool-call deltas (section 3) ---------------------------------------

    def _tool_delta(self, number: int, choice: Choice, entry: Any) -> None:
        if type(entry) is not dict:
            self._anomaly("malformed_entry", number, choice=choice.index)
            return
        call_id = entry.get("id")
        if not (type(call_id) is str and call_id):
            call_id = None
        function = entry.get("function")
        if type(function) is dict:
            name = function.get("name")
            arguments = function.get("arguments")
        else:
            function = name = arguments = None
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
            not_string_anomaly = self._anomaly("arguments_not_string", number)

        has_name = type(name) is str and name != ""
        target = self._resolve(number, choice, call_id, has_name, index, fragment)
        if target is None:
            return
        if not_string_anomaly is not None:
            not_string_anomaly.call = target
        frames = target.frames
        if not frames or frames[-1] != number:
            frames.append(number)
        if not self._apply_identity(number, choice, target, entry, function, index):
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
    ) -> Call | None:
        """Rules 1-3: the call this delta belongs to, a new call, or None
        (dropped or refused)."""
        if call_id is not None:
            known = choice.by_id.get(call_id)
            if known is not None:
                return known
            id_less = [c for c in self._candidates(choice, index) if c.id is None]
            if len(id_less) == 1:
                return id_less[0]
            call = self._new_call(choice)
            if index is not None and index in choice.held_indexes:
                self._anomaly("index_reused", number, call=call)
            return call
        candidates = self._candidates(choice, index)
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            if self.policy == STRICT:
                self._refuse(
                    "AMBIGUOUS_CONTINUATION",
                    f"a delta without an id fits {len(candidates)} unsettled calls",
                    number,
                )
                return None
            guess = _most_recent(candidates)
            self._anomaly("guessed_continuation", number, call=guess)
            return guess
        if has_name or (index is not None and fragment.strip(BLANK)):
            return self._new_call(choice)
        reason = "empty_delta" if index is not None else "orphan_continuation"
        self.dropped.append({"frame": number, "choice": choice.index, "reason": reason})
        self._event("dropped", number, fields={"choice": choice.index, "reason": reason})
        return None

    def _new_call(self, choice: Choice) -> Call:
        call = Call(choice.index, len(self.calls))
        self.calls.append(call)
        choice.calls.append(call)
        choice.unsettled.append(call)
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
        if (
            index == call.index
            and "id" not in entry
            and (function is None or "name" not in function)
        ):
            return True  # a plain continuation: nothing to establish or ignore
        call_id = entry.get("id")
        if _usable_string(call_id):
            if call.id is None:
                call.id = call_id
                choice.by_id[call_id] = call
                self._event("identity", number, call, {"field": "id", "value": call_id})
        elif "id" in entry:
            self._event("identity_ignored", number, call, {"field": "id", "value": call_id})
        if function is not None:
            name = function.get("name")
            if _usable_string(name):
                if call.name is None:
                    call.name = name
                    self._event("identity", number, call, {"field": "name", "value": name})
                elif call.name != name:
                    self._refuse(
                        "IDENTITY_CONFLICT",
                        f"call {call.id or call.name!r} is named "
                        f"{call.name!r}, a later delta names it {name!r}",
                        number,
                        call,
                    )
                    return False
            elif "name" in function:
                self._event("identity_ignored", number, call, {"field": "name", "value": name})
        if index is not None:
            if call.index is None:
                call.index = index
                choice.held_indexes.add(index)
            elif call.index != index:
                self._anomaly("index_changed", number, call=call)
        return True

    def _append(self, number: int, choice: Choice, call: Call, fragment: str) -> None:
        scanner = call.scanner
        if fragment:
            call.fragment_frames.append(number)
            call.fragment_starts.append(scanner.length)
            call.pieces.append(fragment)
            scanner.feed(fragment)
        if call.started_frame is None:
            if call.id is None and call.name is None:
                return
            call.started_frame = number
            # Started calls lead `calls` in start order, so this is final.
            call.position = call.start_order = len(self.started)
            self.started.append(call)
            self._event("toolcall_start", number, call)
            if scanner.length:
                self._event("toolcall_delta", number, call, call.arguments_text)
        elif fragment:  # the hot path: one event per fragment, its fields the bare text
            self._log((number, call.position, fragment))
        if (
            call.settled_frame is None
            and scanner.closed_at is not None
            and call.id is not None
            and call.name is not None
        ):
            call.settled_frame = number
            choice.unsettled.remove(call)
            self._event("settled", number, call)

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

    def _refuse(
        self,
        code: str,
        message: str,
        frame: int | None,
        call: Call | None = None,
        choice: int | None = None,
    ) -> None:
        if self.refusal is None:
            self.refusal = Refusal(code, message, frame, call, choice)

    # -- end of stream (section 5) ------------------------------------------

    def finish(self) -> Result:
        """Run the end-of-stream checks once and return the result."""
        if self._finished is not None:
            return self._finished
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
        finished = any(choice.finish_reason for choice in self.choices.values())
        if self.done_frame is None:
            if not finished:
                self._refuse(
                    "INCOMPLETE_STREAM", "the input ended with no [DONE] and no finish_reason", end
                )
                return
            self._anomaly("missing_done", end)
        for index in sorted(self.choices):
            choice = self.choices[index]
            reason = choice.finish_reason
            if (reason == "stop" and choice.calls) or (reason == "tool_calls" and not choice.calls):
                self._anomaly("finish_mismatch", end, choice=index)
        for call in calls:
            if not self._check_call(end, call):
                return
        for index in sorted(self.choices) or [0]:
            choice = self.choices.get(index)
            if choice is None or not (choice.text or choice.refusal_text or choice.calls):
                self._refuse(
                    "EMPTY_RESPONSE",
                    f"choice {index} has no text, no refusal text and no tool calls",
                    end,
                    choice=index,
                )
                return

    def _check_call(self, end: int | None, call: Call) -> bool:
        missing = [field for field in ("id", "name") if getattr(call, field) is None]
        if missing:
            self._refuse(
                "MALFORMED_TOOL_CALL",
                f"call #{call.position} never received its {' or '.join(missing)}",
                end,
                call,
            )
            return False
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
        self._refuse(
            "INVALID_ARGUMENTS",
            f"arguments of call #{call.position} are not one "
            f"JSON object: {message} at offset {offset}",
            frame,
            call,
        )
        return False


def _most_recent(candidates: list[Call]) -> Call:
    started = [call for call in candidates if call.start_order is not None]
    if started:
        return max(started, key=lambda call: call.start_order)
    return max(candidates, key=lambda call: call.seen_order)


def _error_message(payload: dict[str, Any]) -> str:
    error = payload.get("error")
    if type(error) is dict and _usable_string(error.get("message")):
        return f"upstream error: {error['message']}"
    if _usable_string(error):
        return f"upstream error: {error}"
    return "the upstream sent an error frame"
