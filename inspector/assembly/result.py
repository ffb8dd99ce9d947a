"""What the assembler says: calls, choices, anomalies, refusals, events, and
the result document `manage.py assemble` prints.

Events reference Call objects, not numbers: a call's position in the final
`calls` list is only known at the end (calls that start later come before
calls that never start), so numbers are given out when the result is built.
"""

from __future__ import annotations

import copy
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .scanner import ArgumentScanner, TextScanner

# code -> retryable by default (a retry may get a good answer; a refusal of what was said will not)
RETRYABLE = {
    "MALFORMED_TOOL_CALL": True,
    "EMPTY_RESPONSE": True,
    "INCOMPLETE_STREAM": True,
    "UPSTREAM_ERROR": True,
    "AMBIGUOUS_CONTINUATION": False,
    "IDENTITY_CONFLICT": False,
    "INVALID_ARGUMENTS": False,
    "INVALID_FRAME": False,
    "INCONSISTENT_CALL": True,  # a final copy or terminal output disagrees with the deltas
    "SPLICED_STREAM": True,
}
REFUSAL_CODES = tuple(RETRYABLE)
ANOMALY_KINDS = (
    "unterminated_frame",
    "malformed_entry",
    "arguments_not_string",
    "index_reused",
    "index_changed",
    "guessed_continuation",
    "missing_done",
    "data_after_done",
    "finish_mismatch",
    "no_finish_reason",  # a done frame but no finish reason: how truncation looks
    "unknown_finish_reason",
    # the dialects' own
    "event_type_mismatch",
    "event_name_missing",
    "foreign_frame",
    "item_id_changed",
    "call_id_changed",
    "sequence_gap",
    "sequence_disorder",
    "resumed_stream",
    "item_not_done",
    "arguments_only_in_done",
    "block_not_stopped",
    "arguments_only_in_start",
    "start_input_discarded",
    "repeated_start",
)
KINDS = ("function", "custom", "builtin", "server")  # who runs the call, what its input is
DROP_REASONS = ("empty_delta", "orphan_continuation")


class Call:
    """One tool call as it is being assembled.

    `kind` is one of `KINDS`.  A call whose text is JSON (`scanned`) has an
    `ArgumentScanner`; the others (custom input, builtin pieces, Gemini's
    partialArgs) a `TextScanner`, which only counts.  `value`, when set, is
    the arguments the end check takes as they are (a builtin's action object,
    a custom call's text); `final_text`, when set, is the `arguments_text`
    shown in place of the joined fragments (Gemini's streamed arguments,
    whose fragments are path pieces).  `needs_id` is False where the dialect
    pairs results without ids; `must_close` marks calls that fail unless a
    frame closed them (`closed_frame`).
    """

    __slots__ = (
        "choice",
        "id",
        "name",
        "index",
        "kind",
        "item_id",
        "block",
        "scanned",
        "needs_id",
        "must_close",
        "closed_frame",
        "value",
        "final_text",
        "follows",
        "scanner",
        "pieces",
        "joined",
        "fragment_frames",
        "fragment_starts",
        "frames",
        "started_frame",
        "settled_frame",
        "arguments",
        "invalid_at",
        "position",
        "seen_order",
        "start_order",
    )

    def __init__(
        self, choice: int, seen_order: int, kind: str = "function", scanned: bool = True
    ) -> None:
        self.choice = choice
        self.id: str | None = None
        self.name: str | None = None
        self.index: int | None = None
        self.kind = kind
        self.item_id: str | None = None
        self.block: int | None = None
        self.scanned = scanned
        self.needs_id = kind != "server"
        self.must_close = False
        self.closed_frame: int | None = None
        self.value: Any = None
        self.final_text: str | None = None
        # (the call that held this call's index when it began, whether that
        # call had settled): what a MALFORMED_TOOL_CALL message points at.
        self.follows: tuple[Call, bool] | None = None
        self.scanner: ArgumentScanner | TextScanner = (
            ArgumentScanner() if scanned else TextScanner()
        )
        # The fragments' texts; `compact` joins those it has not joined yet.
        self.pieces: list[str] = []
        self.joined = 0  # leading `pieces` that `compact` made
        # Non-empty fragments: the frame each came in and its start offset.
        self.fragment_frames = array("q")
        self.fragment_starts = array("q")
        self.frames = array("q")  # the frames that touched the call
        self.started_frame: int | None = None
        self.settled_frame: int | None = None
        self.arguments: Any = None
        self.invalid_at: dict[str, Any] | None = None
        self.position: int | None = None
        self.seen_order = seen_order
        self.start_order: int | None = None

    @property
    def arguments_text(self) -> str:
        if self.final_text is not None:
            return self.final_text
        return "".join(self.pieces)

    def fragments(self, start: int = 0) -> list[tuple[int, int, str]]:
        """(frame, start offset, text) of every non-empty fragment from the
        `start`-th on."""
        return list(self.iter_fragments(start))

    def iter_fragments(self, start: int = 0) -> Iterator[tuple[int, int, str]]:
        """`fragments()`, one at a time."""
        frames, starts = self.fragment_frames[start:], self.fragment_starts[start:]
        if len(self.pieces) == len(self.fragment_frames):  # one piece per fragment
            return zip(frames, starts, self.pieces[start:], strict=True)
        return self._cut(frames, starts)

    def _cut(self, frames: array[int], starts: array[int]) -> Iterator[tuple[int, int, str]]:
        """The fragments of compacted pieces: the text from the first of them
        on (not the whole call's: an upload asks for each step's new
        fragments, `FragmentLog.new_rows`), cut at their offsets."""
        if not starts:
            return
        pieces, base, skipped = self.pieces, 0, 0
        first = starts[0]
        while skipped < len(pieces) and base + len(pieces[skipped]) <= first:
            base += len(pieces[skipped])
            skipped += 1
        text = "".join(pieces[skipped:])
        for slot, (frame, at) in enumerate(zip(frames, starts, strict=True)):
            end = starts[slot + 1] - base if slot + 1 < len(starts) else len(text)
            yield frame, at, text[at - base : end]

    def compact(self) -> None:
        """Join the texts of the fragments taken since the last `compact`
        into one string: a fragment of a few characters costs about 50 bytes
        more as a string of its own.  `fragments()` still tells each one."""
        self.joined = join_since(self.pieces, self.joined)

    def to_dict(self, *, frames: bool = True) -> dict[str, Any]:
        """The call's record in the result document; `frames` is its last
        key (`frames=False`: without it, for a caller that writes it)."""
        out = {
            "choice": self.choice,
            "id": self.id,
            "name": self.name,
            "index": self.index,
            "kind": self.kind,
            "item_id": self.item_id,
            "block": self.block,
            "arguments": self.arguments,
            "arguments_text": self.arguments_text,
            "started_frame": self.started_frame,
            "settled_frame": self.settled_frame,
            "invalid_at": self.invalid_at,
        }
        if frames:
            out["frames"] = self.frames.tolist()
        return out


def join_since(parts: list[str], joined: int) -> int:
    """Join `parts[joined:]` into one entry (more than one to join); how many
    leading entries are joined now.  Each call joins only what came since
    the last one, so compacting as a stream goes costs linear time."""
    if len(parts) - joined > 1:
        parts[joined:] = ["".join(parts[joined:])]
    return len(parts)


class Choice:
    """One `choices[i]`: its text, reasoning, refusal text, finish reason."""

    __slots__ = (
        "index",
        "text",
        "reasoning",
        "refusal_text",
        "finish_reason",
        "finish_detail",
        "calls",
        "unsettled",
        "by_id",
        "held_indexes",
        "joined",
        "open_at",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal_text: list[str] = []
        self.finish_reason: str | None = None
        self.finish_detail: str | None = None
        self.calls: list[Call] = []
        self.unsettled: list[Call] = []
        self.by_id: dict[str, Call] = {}
        self.held_indexes: set[int] = set()
        self.joined = [0, 0, 0]  # leading entries `compact` made: text, reasoning, refusal
        # index -> the one unsettled call holding it, as `_candidates` found
        # it (the chat adapter's shortcut); emptied whenever `unsettled` or
        # the index of one of its calls changes (`changed`).
        self.open_at: dict[int, Call] = {}

    def changed(self) -> None:
        """`unsettled` changed, or the index one of its calls holds."""
        self.open_at.clear()

    def compact(self) -> None:
        """Join the pieces of text taken since the last `compact` (see
        `Call.compact`)."""
        joined = self.joined
        joined[0] = join_since(self.text, joined[0])
        joined[1] = join_since(self.reasoning, joined[1])
        joined[2] = join_since(self.refusal_text, joined[2])

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "text": "".join(self.text),
            "reasoning": "".join(self.reasoning),
            "refusal_text": "".join(self.refusal_text),
            "finish_reason": self.finish_reason,
            "finish_detail": self.finish_detail,
        }


class Refusal:
    __slots__ = ("code", "message", "frame", "call", "choice")

    def __init__(
        self,
        code: str,
        message: str,
        frame: int | None,
        call: Call | None = None,
        choice: int | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.frame = frame
        self.call = call
        self.choice = choice

    @property
    def retryable(self) -> bool:
        return RETRYABLE[self.code]

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "frame": self.frame,
            "call": self.call.position if self.call is not None else None,
            "choice": self.choice,
            "retryable": self.retryable,
        }


class Anomaly:
    __slots__ = ("kind", "frame", "call", "choice")

    def __init__(
        self, kind: str, frame: int | None, call: Call | None = None, choice: int | None = None
    ) -> None:
        self.kind = kind
        self.frame = frame
        self.call = call
        self.choice = choice

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"frame": self.frame, "kind": self.kind}
        if self.call is not None:
            out["call"] = self.call.position
        if self.choice is not None:
            out["choice"] = self.choice
        return out


class Event:
    """One event: a type, the frame it happened in, the call it concerns (if
    any), and the fields particular to its type.

    `fields` is a dict, except for `toolcall_delta`, whose only field is the
    fragment: there is one such event per fragment, so it holds the bare
    text (`delta`) rather than a dict of one key.
    """

    __slots__ = ("type", "frame", "call", "fields")

    def __init__(
        self,
        type: str,
        frame: int | None,
        call: Call | None = None,
        fields: dict[str, Any] | str | None = None,
    ) -> None:
        self.type = type
        self.frame = frame
        self.call = call
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "frame": self.frame}
        if self.call is not None:
            out["call"] = self.call.position
        fields = self.fields
        if type(fields) is str:
            out["delta"] = fields
        elif fields:
            for key, value in fields.items():
                out[key] = value.to_dict() if hasattr(value, "to_dict") else value
        return out

    def __repr__(self) -> str:
        return f"Event({self.type!r}, frame={self.frame}, fields={self.fields!r})"


Delta = tuple[int, int, str]  # a toolcall_delta as stored: (frame, call position, text)


class EventLog(Sequence[Event]):
    """The events of one assembly, in order: a sequence of `Event`.

    A `toolcall_delta` (one per fragment: the bulk of a long stream's events)
    is stored as a bare `(frame, call position, text)` tuple, made an `Event`
    only when read.  Holding only ints and strings, such a tuple is dropped
    from the cyclic GC's lists after its first pass, so full collections no
    longer walk one object per fragment: they had made the assembler's time
    grow faster than its input (bench/assemble.py).  A call's position is
    final once it starts, and only started calls get deltas.

    A caller that writes the events down as they come (an upload) takes them
    with `drain()`, which forgets them: a long stream's events are then not
    all held until it ends.  Indexes keep counting from the stream's first
    event; the drained ones can't be read again.
    """

    __slots__ = ("items", "_started", "drained")

    def __init__(self, started: list[Call]) -> None:
        # Events, and Delta tuples; the assembler appends to it directly.
        self.items: list[Event | Delta] = []
        self._started = started
        self.drained = 0  # events handed out by `drain` and forgotten

    def append(self, event: Event) -> None:
        self.items.append(event)

    def __len__(self) -> int:
        return self.drained + len(self.items)

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if start < self.drained:
                raise IndexError("events before the last drain() were handed out")
            held = slice(start - self.drained, stop - self.drained, step)
            return [self._event(item) for item in self.items[held]]
        if index < 0:
            index += len(self)
        if index < self.drained:
            raise IndexError("events before the last drain() were handed out")
        return self._event(self.items[index - self.drained])

    def __iter__(self) -> Iterator[Event]:
        if self.drained:
            raise IndexError("events before the last drain() were handed out")
        return map(self._event, self.items)

    def _event(self, item: Event | Delta) -> Event:
        if type(item) is tuple:
            frame, position, text = item
            return Event("toolcall_delta", frame, self._started[position], text)
        return item

    def to_dicts(self) -> list[dict[str, Any]]:
        return list(self.iter_dicts())

    def iter_dicts(self) -> Iterator[dict[str, Any]]:
        """The events as the result document writes them, one at a time."""
        if self.drained:
            raise IndexError("events before the last drain() were handed out")
        return map(_event_dict, self.items)

    def drain(self) -> list[dict[str, Any]]:
        """The events not handed out yet, as the result document writes them,
        up to the first that names a call still without its number (a call
        not started: calls are numbered for good when the stream ends); they
        are forgotten here.  After `Assembler.finish` every event has its
        numbers, so a last `drain()` hands out the rest."""
        out = self.numbered(self.drained)
        del self.items[: len(out)]
        self.drained += len(out)
        return out

    def numbered(self, start: int) -> list[dict[str, Any]]:
        """The events from `start` on (counted from the stream's first), as
        the result document writes them, up to the first that names a call
        still without its number, as `drain` hands them out but kept: a
        live recording writes them down as they come and still reads them."""
        if start < self.drained:
            raise IndexError("events before the last drain() were handed out")
        items, out = self.items, []
        for index in range(start - self.drained, len(items)):  # no copy of what is held
            item = items[index]
            if type(item) is not tuple and not _numbered(item):
                break
            out.append(_event_dict(item))
        return out


def _event_dict(item: Event | Delta) -> dict[str, Any]:
    if type(item) is tuple:
        frame, position, text = item
        return {"type": "toolcall_delta", "frame": frame, "call": position, "delta": text}
    return item.to_dict()


def _numbered(event: Event) -> bool:
    """Whether every call the event names (itself, or its anomaly's or
    refusal's) has its final position."""
    if event.call is not None and event.call.position is None:
        return False
    fields = event.fields
    if type(fields) is dict:
        for value in fields.values():
            if type(value) in (Anomaly, Refusal) and value.call is not None:
                if value.call.position is None:
                    return False
    return True


class Result:
    """The outcome of one assembly, with everything the spec's result holds."""

    def __init__(
        self,
        *,
        policy: str,
        dialect: str = "chat",
        frames: int,
        refusal: Refusal | None,
        usage: dict[str, Any] | None,
        choices: list[Choice],
        calls: list[Call],
        dropped: list[dict[str, Any]],
        anomalies: list[Anomaly],
        events: EventLog,
    ) -> None:
        self.policy = policy
        self.dialect = dialect
        self.frames = frames
        self.refusal = refusal
        self.usage = usage
        self.choices = choices
        self.calls = calls
        self.dropped = dropped
        self.anomalies = anomalies
        self.events = events

    @property
    def outcome(self) -> str:
        return "ok" if self.refusal is None else "refused"

    def as_policy(self, policy: str) -> Result:
        """This result under another policy's name, sharing all it holds
        (its events too: draining one drains both)."""
        twin = copy.copy(self)
        twin.policy = policy
        return twin

    @property
    def choice0(self) -> Choice | None:
        return next((c for c in self.choices if c.index == 0), None)

    def to_dict(self, *, events: bool = True, frames: bool = True) -> dict[str, Any]:
        """The result document (`events=False`: without its event list,
        which a caller that drained the events must leave out; `frames=False`:
        the calls without their frame lists, see `Call.to_dict`)."""
        first = self.choice0
        document = {
            "policy": self.policy,
            "dialect": self.dialect,
            "outcome": self.outcome,
            "refusal": self.refusal.to_dict() if self.refusal else None,
            "frames": self.frames,
            "finish_reason": first.finish_reason if first else None,
            "usage": self.usage,
            "text": "".join(first.text) if first else "",
            "reasoning": "".join(first.reasoning) if first else "",
            "choices": [choice.to_dict() for choice in self.choices],
            "calls": [call.to_dict(frames=frames) for call in self.calls],
            "dropped": list(self.dropped),
            "anomalies": [anomaly.to_dict() for anomaly in self.anomalies],
        }
        if events:
            document["events"] = self.events.to_dicts()
        return document
