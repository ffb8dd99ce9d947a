"""The JSON-array stream (Gemini without `alt=sse`): `[{...},\\r\\n{...}]`,
cut anywhere; and a whole non-streamed body (one JSON object), read the
same way as a one-element stream.

Theory of operation: the text is decoded incrementally (as the line
splitter does).  Object elements that end inside the decoded text are read
on a fast path (`_objects`): the end is the first likely `}` whose prefix
parses, and that parse is the frame's payload, so each element is parsed
once.  Anything else (an element the text cuts, a bare value, an element
whose likely ends all fail) is walked with regular expressions from one
structural character to the next, keeping only a depth, an inside-string
flag and an escape flag, so each character is looked at a bounded number
of times.  Both ways end an element at the same place, so a cut anywhere
gives the same frames.  An element ends where its brackets close, or, for a
bare value, at the `,` or `]` after it.  A walked element is classified
like SSE data (`frames.classify`).

At the end: an element the input cut is a frame marked unterminated (its
data does not parse: `INCOMPLETE_STREAM` at it, as a cut SSE block); an
input that ended after a complete element with no `]` sets `cut_between`
(the stream assembler refuses `INCOMPLETE_STREAM` at the last element).
Text after the closing `]` is ignored.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Any

import orjson

from .frames import Frame, classify, parsed_frame
from .lines import BOM
from .readers import Sinks

_OUTSIDE = re.compile(r'[\[\]{}",]')
_INSIDE = re.compile(r'["\\]')
_NON_BLANK = re.compile(r"[^ \t\r\n]")
# Where an object element may end: a `}` before `, {` (the next element) or
# before a `]` that ends the text (the array's end).  Only a hint: the
# candidate must parse, else the slow walk decides.
_OBJECT_END = re.compile(r"\}[ \t\r\n]*(?:(,)[ \t\r\n]*(?=\{)|(?=\][ \t\r\n]*\Z))")
FAST_TRIES = 4

START, BETWEEN, AFTER, ELEMENT, CLOSED = range(5)


class JSONArrayReader:
    """Bytes in, one frame per array element out."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._at_start = True
        self._phase = START
        self._whole = False  # the input is one object, not an array
        self._pieces: list[str] = []
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._count = 0
        self._separator = ""  # `}`, the separator between objects looked for, `{`
        self._seen = ""  # the last separator read with a regular expression
        self.cut_between = False
        self._chunk: Callable[[int, str, str, dict[str, Any], None], None] | None = None

    @property
    def whole(self) -> bool:
        """The input is one whole object (a body), not an array."""
        return self._whole

    @property
    def opened(self) -> bool:
        """The input opened an array with `[`."""
        return self._phase != START and not self._whole

    @property
    def closed(self) -> bool:
        """The array's `]` was read."""
        return self._phase == CLOSED and not self._whole

    def feed(self, data: bytes) -> list[Frame]:
        return self._scan(self._decode(data))

    def read(self, data: bytes, sinks: Sinks | None = None) -> list[Frame]:
        """`feed`; with `sinks` (chunk, frame), each frame is handed over at
        once, in order, and none is returned (as `SSEReader.read`): an object
        element read on the fast path as `chunk(number, text, text, payload,
        None)`, with no `Frame` made, any other as `frame(frame)`."""
        if sinks is None:
            return self.feed(data)
        self._chunk = sinks[0]
        try:
            self._scan(self._decode(data), _FrameSink(sinks[1]))
        finally:
            self._chunk = None
        return []

    def close(self) -> list[Frame]:
        frames = self._scan(self._decode(b"", final=True))
        if self._phase == ELEMENT:
            text = "".join(self._pieces).strip()
            self._pieces = []
            if text:
                frames.append(self._frame(text, unterminated=True))
        elif self._phase in (BETWEEN, AFTER):
            self.cut_between = True
        return frames

    def _decode(self, data: bytes, *, final: bool = False) -> str:
        text = self._decoder.decode(data, final)
        if self._at_start and text:
            self._at_start = False
            if text[0] == BOM:
                text = text[1:]
        return text

    def _frame(self, text: str, *, unterminated: bool = False) -> Frame:
        frame = classify(self._count, text, text, done_literals=(), unterminated=unterminated)
        self._count += 1
        return frame

    def _scan(self, text: str, frames: Any = None) -> list[Frame]:
        if frames is None:
            frames = []
        pos, end = 0, len(text)
        while pos < end:
            if self._phase == ELEMENT:
                pos = self._element(text, pos, frames)
                continue
            if self._phase == CLOSED:
                break
            found = _NON_BLANK.search(text, pos)
            if found is None:
                break
            pos = found.start()
            char = text[pos]
            if self._phase == START:
                if char == "[":
                    self._phase = BETWEEN
                    pos += 1
                else:  # a whole body: the one element
                    self._whole = True
                    self._phase = ELEMENT
            elif char == "]":
                self._phase = CLOSED
                pos += 1
            elif char == ",":
                self._phase = BETWEEN
                pos += 1
            elif char == "{":
                pos = self._objects(text, pos, frames)
            else:
                self._phase = ELEMENT
        return frames

    def _objects(self, text: str, pos: int, frames: list[Frame]) -> int:
        """The fast path: object elements from `pos` on, one after the
        other, each a frame when it ends in `text` and parses; where to go
        on (the phase set: AFTER at the array's last element, else ELEMENT
        for the slow walk of the element at the position returned).

        A candidate end is a `}` before a `,` and `{` (the separator is
        read with it), or before the `]` that ends the text; first looked
        for as the separator the stream repeats (`_learn`; `str.find` is
        cheaper than a regular expression's match, one more object for the
        garbage collector per element), else with `_OBJECT_END`.  A
        candidate whose prefix parses is the object's end, since no other
        prefix of an object is one JSON object: both ways end a well-formed
        object at the same place, so how the bytes were cut does not
        matter.  A `}` inside a string that looks like an end fails to
        parse; after FAST_TRIES of those the slow walk takes over, so an
        element is parsed a bounded number of times.  The value parsed is
        the frame's payload: each element is parsed once."""
        search, loads, separator = _OBJECT_END.search, orjson.loads, self._separator
        start, tries = pos, 0
        while tries < FAST_TRIES:
            at = text.find(separator, pos) if tries == 0 and separator else -1
            if at >= 0:
                end, following = at + 1, at + len(separator) - 1
            else:
                if separator:  # not in the rest of the text: learn one again
                    separator = self._separator = ""
                found = search(text, pos)
                if found is None:
                    break
                end = found.start() + 1
                following = found.end() if found.group(1) is not None else -1
            element = text[start:end]
            try:
                payload = loads(element)
            except orjson.JSONDecodeError:
                tries += 1
                if at >= 0:  # not where this element ends: learn one again, look from pos
                    separator = self._separator = ""
                else:
                    pos = end
                continue
            if self._chunk is not None and type(payload) is dict:
                self._chunk(self._count, element, element, payload, None)
            else:
                frames.append(parsed_frame(self._count, element, element, payload))
            self._count += 1
            if following < 0:  # before the `]` that ends the text
                self._phase = AFTER
                return end
            if at < 0:
                separator = self._learn(text[end - 1 : following + 1])
            start = pos = following  # the next element's `{`
            tries = 0
        self._phase = ELEMENT
        return start

    def _learn(self, separator: str) -> str:
        """The separator to look for next: one seen twice in a row.  A
        separator that is not found, or not where an element ends, is
        forgotten until it is seen twice in a row again, so the text a
        search for it passes over is never passed over again (no quadratic
        time when the separators change)."""
        if separator == self._seen:
            self._separator = separator
        self._seen = separator
        return self._separator

    def _element(self, text: str, pos: int, frames: list[Frame]) -> int:
        """Walk one element from `pos`; return where to go on."""
        start, end = pos, len(text)
        while pos < end:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    pos += 1
                    continue
                found = _INSIDE.search(text, pos)
                if found is None:
                    pos = end
                    break
                pos = found.start()
                if text[pos] == "\\":
                    self._escape = True
                else:
                    self._in_string = False
                pos += 1
                continue
            found = _OUTSIDE.search(text, pos)
            if found is None:
                pos = end
                break
            pos = found.start()
            char = text[pos]
            if char == '"':
                self._in_string = True
                pos += 1
            elif char == "{" or char == "[":
                self._depth += 1
                pos += 1
            elif self._depth == 0:  # `,` or `]` after a bare value, or a stray `}`
                self._end_element(text[start:pos], frames)
                self._phase = CLOSED if char == "]" else BETWEEN if char == "," else AFTER
                return pos + 1
            elif char == ",":
                pos += 1
            else:
                self._depth -= 1
                pos += 1
                if self._depth == 0:
                    self._end_element(text[start:pos], frames)
                    self._phase = CLOSED if self._whole else AFTER
                    return pos
        self._pieces.append(text[start:pos])
        return pos

    def _end_element(self, last: str, frames: list[Frame]) -> None:
        if self._pieces:
            self._pieces.append(last)
            last = "".join(self._pieces)
            self._pieces = []
        text = last.strip()
        if text:
            frames.append(self._frame(text))


class _FrameSink:
    """What `read` gives the walk in place of its list of frames: each frame
    appended is fed at once."""

    __slots__ = ("append",)

    def __init__(self, feed: Callable[[Frame], None]) -> None:
        self.append = feed
