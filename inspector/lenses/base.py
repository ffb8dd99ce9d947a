"""What every lens hands back, and the frames every lens reads.

A lens answers one question: what would a widely used client library have
assembled from the very frames our reader produced?  Its answer is a
`LensResult`: the calls the library would hand its caller (id, name, the
arguments text, and that text parsed the way the library or its usual caller
parses it), or the error it would raise.

Every lens reads the same frames (`wire`): the chunk, error and invalid
frames in order, up to the `done` frame.  Comment frames carry no data and
no client sees them.  A last block that the input cut off before its blank
line (`unterminated`) is skipped too: an SSE client dispatches an event only
at the blank line that ends it (the WHATWG rule the OpenAI SDK's
`SSEDecoder` and eventsource-parser follow), so no client would have seen it.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from inspector.assembly import Frame, FrameKind

# What a lens whose library is missing tells its reader to do.
EXTRA_HINT = "install the optional extra: pip install 'stream-inspector[lenses]'"

# Where a lens's calls come from (`LensResult.calls_from`).
DELIVERED = "final"  # what the library hands its caller
SNAPSHOT = "snapshot"  # its state when it raised: the caller never gets these


@dataclass
class LensCall:
    """One tool call as a library would hand it over.

    `arguments` is the parsed arguments object when the text parses to a JSON
    object by the lens's rule (the library's own parser, or `json.loads` where
    the library leaves parsing to its caller), else None with `parse_error`
    saying why: such a call would not run.
    """

    id: str | None
    name: str | None
    arguments_text: str | None
    arguments: dict[str, Any] | None = None
    parse_error: str | None = None
    choice: int = 0
    # "function", or "custom" for a free-text (custom tool) call, whose
    # `arguments_text` is its input and is never JSON to parse.
    kind: str = "function"

    @property
    def parsed(self) -> bool:
        return self.arguments is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "choice": self.choice,
            "id": self.id,
            "name": self.name,
            "arguments_text": self.arguments_text,
            "arguments": self.arguments,
            "parsed": self.parsed,
            "parse_error": self.parse_error,
            "kind": self.kind,
        }


# What `LensCall.to_dict` holds that builds the call again (`parsed` follows).
CALL_FIELDS = ("id", "name", "arguments_text", "arguments", "parse_error", "choice", "kind")


@dataclass
class LensResult:
    """One lens's answer for one stream.

    `error` is the exception (type and message) the library would raise, or
    the error it would report, as `"Type: message"`.  `calls_from` is
    `"final"` when the calls are what the library hands its caller, or
    `"snapshot"` when it raised and the calls are only its state at that
    point (the caller gets none of them).  `gates_on_parse` says the library
    itself parses the arguments and would not run a call whose arguments fail
    (Vercel, LangChain); otherwise it hands the text on and its caller's
    `json.loads` decides.  `notes` say what the lens skipped or assumed on
    this stream.
    """

    lens: str
    library: str
    version: str
    available: bool = True
    calls: list[LensCall] = field(default_factory=list)
    error: str | None = None
    calls_from: str | None = DELIVERED
    gates_on_parse: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def delivered_calls(self) -> list[LensCall]:
        """The calls the caller would actually get."""
        return self.calls if self.calls_from == DELIVERED else []

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> LensResult:
        """The result `to_dict` gave (a stored one)."""
        calls = [
            LensCall(**{key: call.get(key) for key in CALL_FIELDS if key in call})
            for call in document.get("calls") or []
        ]
        return cls(
            lens=document["lens"],
            library=document["library"],
            version=document["version"],
            available=document.get("available", True),
            calls=calls,
            error=document.get("error"),
            calls_from=document.get("calls_from") or DELIVERED,
            gates_on_parse=bool(document.get("gates_on_parse")),
            notes=list(document.get("notes") or []),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "lens": self.lens,
            "library": self.library,
            "version": self.version,
            "available": self.available,
            "calls": [call.to_dict() for call in self.calls],
            "calls_from": self.calls_from if self.calls else None,
            "error": self.error,
            "gates_on_parse": self.gates_on_parse,
            "notes": list(self.notes),
        }


class Lens:
    """One client library's lens: who it is and how to run it.

    `name` is the key (the matrix column, `--lens NAME`), `title` how a
    sentence names the library ("LiteLLM would run ..."), `library` and
    `version` what it follows.  `run` reads the frames once; `tools` (the
    request's tool definitions, when known) matter only to lenses whose
    library parses arguments against them.
    """

    name: str = ""
    title: str = ""
    library: str = ""
    version: str = ""
    # The dialects whose streams the library reads (its column in their matrix).
    dialects: tuple[str, ...] = ("chat",)
    # False for a port of the library's rules (it cannot run here): "emulated".
    runs_library: bool = False
    # Whether the fork server runs it once to warm it (`warm.py`): not for a
    # lens whose every run is a process of its own (Node), nothing stays warm.
    warms: bool = True

    def available(self) -> bool:
        """Whether the library can run here (a re-implementation always can)."""
        return True

    def current_version(self) -> str:
        """The version a run would report now: a stored result made with
        another one is stale."""
        return self.version

    def run(
        self,
        frames: Iterable[Frame],
        *,
        tools: list[dict[str, Any]] | None = None,
        dialect: str = "chat",
    ) -> LensResult:
        """What the library makes of `frames`, a stream of `dialect` (one of
        `dialects`)."""
        raise NotImplementedError

    # How `run_as_tested` enters the library, when not as `run` does (lens_check says it).
    tested_entry: str = ""

    def run_as_tested(self, frames: Iterable[Frame], *, dialect: str = "chat") -> LensResult:
        """What the library makes of `frames` entered where its own tests enter
        it (`manage.py lens_check` compares this with those tests).  `run`,
        unless the tests call a lower part than a user's stream goes through
        (`tested_entry` names it)."""
        return self.run(frames, dialect=dialect)

    def new_result(self, **fields: Any) -> LensResult:
        """An empty answer of this lens, naming its library and version."""
        fields.setdefault("version", self.version)
        return LensResult(lens=self.name, library=self.library, **fields)

    def unavailable(self, why: str) -> LensResult:
        """The answer of a lens whose library cannot run here."""
        return self.new_result(
            version="not installed", available=False, calls_from=None, notes=[why]
        )


class InstalledLens(Lens):
    """A lens that runs a library installed here (the `lenses` extra):
    available, and at its installed version, when it imports."""

    runs_library = True

    def installed_version(self) -> str:
        """The installed library's version; ImportError when it is missing."""
        raise NotImplementedError

    def available(self) -> bool:
        try:
            self.installed_version()
        except ImportError:
            return False
        return True

    def current_version(self) -> str:
        try:
            return self.installed_version()
        except ImportError:
            return "not installed"


class LensError(Exception):
    """Raised inside a re-implemented lens where the library would raise;
    carries the `"Type: message"` text the lens reports."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.text = f"{kind}: {message}"


def describe_exception(error: BaseException) -> str:
    """`"Type: message"`, as a traceback's last line names an exception."""
    message = str(error)
    name = type(error).__name__
    return f"{name}: {message}" if message else name


@dataclass(frozen=True, slots=True)
class WireItem:
    """One frame a client would have seen: its number, our reader's kind,
    the parsed payload (chunk and error frames) and its data text."""

    number: int
    kind: FrameKind
    payload: dict[str, Any] | None
    data: str
    parse_failed: bool


def wire(frames: Iterable[Frame], notes: list[str] | None = None) -> Iterator[WireItem]:
    """The frames a client would have read, in order, up to `done`.

    `notes`, when given, collects one line for each frame skipped for a
    reason worth telling (an unterminated last block).
    """
    for frame in frames:
        if frame.kind is FrameKind.DONE:
            return
        if frame.kind is FrameKind.COMMENT:
            continue
        if frame.unterminated:
            if notes is not None:
                notes.append(
                    f"frame {frame.number} skipped: the input ends before its blank line, "
                    "and an SSE client never dispatches such an event"
                )
            continue
        yield WireItem(frame.number, frame.kind, frame.payload, frame.data, frame.parse_failed)


def sdk_error_message(error: Any) -> str:
    """The message the OpenAI SDK's `Stream.__stream__` gives the APIError it
    raises for a chunk with a truthy `error`."""
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return message


def sdk_transport(items: Iterable[WireItem]) -> Iterator[WireItem]:
    """The frames as the OpenAI SDK's raw `Stream` hands them on, for the
    lenses whose library streams through it (LiteLLM, LangChain): a frame
    whose data is not JSON raises `JSONDecodeError` (`sse.json()`), one whose
    JSON has a truthy `"error"` raises `APIError`; data that is JSON but not
    an object is handed on and fails in the library, reported as TypeError.
    """
    for item in items:
        payload = item.payload
        if payload is None:
            try:
                payload = json.loads(item.data)
            except json.JSONDecodeError as error:
                raise LensError("JSONDecodeError", str(error)) from None
            if not isinstance(payload, dict):
                raise LensError(
                    "TypeError", f"frame {item.number} is a JSON {type(payload).__name__}"
                )
        if payload.get("error"):
            raise LensError("APIError", sdk_error_message(payload["error"]))
        yield WireItem(item.number, item.kind, payload, item.data, item.parse_failed)


def json_object(text: Any) -> tuple[dict[str, Any] | None, str | None]:
    """`json.loads(text)` as a caller would run it: (the object, None) or
    (None, why not)."""
    if not isinstance(text, str):
        return None, f"TypeError: arguments are {type(text).__name__}, not a string"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return None, describe_exception(error)
    if not isinstance(value, dict):
        return None, f"not a JSON object: {type(value).__name__}"
    return value, None


def text_of(value: Any) -> str | None:
    """A call field as text: strings as they are, None as None, anything
    else as compact JSON (an integer id, an arguments object)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
