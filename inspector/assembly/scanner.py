"""Incremental scan of a tool call's arguments text.

Theory of operation: arguments arrive as fragments, often one to three bytes
each.  Re-parsing the whole text per fragment would be quadratic, so the
scanner keeps just enough state (a bracket stack, inside-string and escape
flags) to say, after every fragment, where the root object closed and the
first offset at which the text can no longer be the start of one JSON object:

* the first non-blank character is not `{`;
* a closing bracket does not match the innermost open one;
* non-blank text follows the closed root.

It does not validate literals, numbers or commas; the strict parser at the
end of the stream is the authority on those.  Each character is looked at a
bounded number of times: regular expressions jump from one structural
character to the next, so long strings and numbers cost little.

Offsets count characters (code points) of the text.
"""

from __future__ import annotations

import re

BLANK = " \t\n\r"
_STRUCTURAL = re.compile(r'[{}\[\]"]')
_STRING_STOP = re.compile(r'["\\]')
_NON_BLANK = re.compile(r"[^ \t\n\r]")
_OPENERS = {"}": "{", "]": "["}

# Scanner phases.
BEFORE_ROOT = 0
IN_ROOT = 1
AFTER_ROOT = 2


class ArgumentScanner:
    """Feed fragments; read `closed_at`, `invalid_at`, `depth`, `in_string`."""

    __slots__ = (
        "length",
        "phase",
        "stack",
        "in_string",
        "escape",
        "closed_at",
        "invalid_at",
        "invalid_reason",
    )

    def __init__(self) -> None:
        self.length = 0
        self.phase = BEFORE_ROOT
        self.stack: list[str] = []
        self.in_string = False
        self.escape = False
        self.closed_at: int | None = None  # offset just past the root's closing brace
        self.invalid_at: int | None = None
        self.invalid_reason = ""

    @property
    def depth(self) -> int:
        return len(self.stack)

    @property
    def closed(self) -> bool:
        """The root object closed, and nothing invalid came before that."""
        return self.closed_at is not None

    def feed(self, fragment: str) -> None:
        base = self.length
        self.length = base + len(fragment)
        if self.invalid_at is not None or not fragment:
            return
        if self.in_string and not self.escape and '"' not in fragment and "\\" not in fragment:
            return  # the same string goes on: nothing structural to see
        if self.phase == IN_ROOT:  # the common case, without `_scan`'s loop
            pos = self._scan_root(fragment, 0, base)
            if 0 <= pos < len(fragment):  # the root closed inside the fragment
                self._scan(fragment, base, pos)
            return
        self._scan(fragment, base)

    def _invalid(self, offset: int, reason: str) -> None:
        self.invalid_at = offset
        self.invalid_reason = reason

    def _scan(self, text: str, base: int, pos: int = 0) -> None:
        end = len(text)
        while pos < end:
            if self.phase == IN_ROOT:
                pos = self._scan_root(text, pos, base)
                if pos < 0:
                    return
            else:
                found = _NON_BLANK.search(text, pos)
                if found is None:
                    return
                pos = found.start()
                if self.phase == AFTER_ROOT:
                    return self._invalid(base + pos, "text after the closed root object")
                if text[pos] != "{":
                    return self._invalid(base + pos, "arguments do not start with '{'")
                self.phase = IN_ROOT
                self.stack.append("{")
                pos += 1

    def _scan_root(self, text: str, pos: int, base: int) -> int:
        """Scan inside the root; return where to go on, or -1 when invalid."""
        stack, end = self.stack, len(text)
        while pos < end:
            if self.in_string:
                if self.escape:
                    self.escape = False
                    pos += 1
                    continue
                found = _STRING_STOP.search(text, pos)
                if found is None:
                    return end
                pos = found.start()
                if text[pos] == "\\":
                    self.escape = True
                else:
                    self.in_string = False
                pos += 1
                continue
            found = _STRUCTURAL.search(text, pos)
            if found is None:
                return end
            pos = found.start()
            char = text[pos]
            pos += 1
            if char == '"':
                self.in_string = True
            elif char == "{" or char == "[":
                stack.append(char)
            elif stack[-1] != _OPENERS[char]:
                self._invalid(base + pos - 1, f"'{char}' does not close '{stack[-1]}'")
                return -1
            else:
                stack.pop()
                if not stack:
                    self.phase = AFTER_ROOT
                    self.closed_at = base + pos
                    return pos
        return pos


class TextScanner:
    """The scanner of a call whose text is not JSON (a custom call's input,
    a builtin's streamed pieces, Gemini's path pieces): it only counts
    characters, and its text never closes or turns invalid."""

    __slots__ = ("length",)

    closed_at = None
    invalid_at = None
    invalid_reason = ""
    depth = 0
    in_string = False
    closed = False

    def __init__(self) -> None:
        self.length = 0

    def feed(self, fragment: str) -> None:
        self.length += len(fragment)
