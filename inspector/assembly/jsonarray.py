"""The JSON-array stream (Gemini without `alt=sse`): `[{...},\\r\\n{...}]`,
cut anywhere; and a whole non-streamed body (one JSON object), read the
same way as a one-element stream.

Theory of operation: the text is decoded incrementally (as the line
splitter does) and walked with regular expressions from one structural
character to the next, keeping only a depth, an inside-string flag and an
escape flag, so each character is looked at a bounded number of times and
a cut anywhere gives the same frames.  An element ends where its brackets
close, or, for a bare value, at the `,` or `]` after it.  Each element is
classified like SSE data (`frames.classify`).

At the end: an element the input cut is a frame marked unterminated (its
data does not parse: `INCOMPLETE_STREAM` at it, as a cut SSE block); an
input that ended after a complete element with no `]` sets `cut_between`
(the stream assembler refuses `INCOMPLETE_STREAM` at the last element).
Text after the closing `]` is ignored.
"""

from __future__ import annotations

import codecs
import re

import orjson

from .frames import Frame, classify
from .lines import BOM

_OUTSIDE = re.compile(r'[\[\]{}",]')
_INSIDE = re.compile(r'["\\]')
_NON_BLANK = re.compile(r"[^ \t\r\n]")
# Where an object element may end: a `}` before `, {` (the next element) or
# before a `]` that ends the text (the array's end).  Only a hint: the
# candidate must balance and parse, else the slow walk decides.
_OBJECT_END = re.compile(r"\}(?=[ \t\r\n]*(?:,[ \t\r\n]*\{|\][ \t\r\n]*\Z))")
FAST_TRIES = 8

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
        self.cut_between = False

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

    def _scan(self, text: str) -> list[Frame]:
        frames: list[Frame] = []
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
            else:
                closed = self._whole_object(text, pos) if char == "{" else -1
                if closed < 0:
                    self._phase = ELEMENT
                else:
                    frames.append(self._frame(text[pos:closed]))
                    self._phase = AFTER
                    pos = closed
        return frames

    def _whole_object(self, text: str, pos: int) -> int:
        """The fast path: where the object starting at `pos` ends, when that
        is in `text` and it parses (the first `}` before a `,` or `]` whose
        prefix is one JSON object: no shorter prefix of an object is one);
        -1 to walk it character class by character class instead.  Both
        ways end a well-formed object at the same place, so how the bytes
        were cut does not matter."""
        start = pos
        for _ in range(FAST_TRIES):
            found = _OBJECT_END.search(text, pos)
            if found is None:
                return -1
            end = found.end()
            # Unbalanced brackets: not the end (or braces inside strings: the
            # slow walk decides).  Cheaper than a parser's error.
            if text.count("{", start, end) != text.count("}", start, end) or text.count(
                "[", start, end
            ) != text.count("]", start, end):
                pos = end
                continue
            try:
                orjson.loads(text[start:end])
            except orjson.JSONDecodeError:
                pos = end
                continue
            return end
        return -1

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
