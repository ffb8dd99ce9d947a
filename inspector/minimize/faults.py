"""The class of an `INVALID_ARGUMENTS` fault, read from the text's structure.

Why not from the message.  The messages are the scanner's own wording and,
for what only the strict parser finds, orjson's; either may change.  So the
class is read from what does not change: the scanner's state when it stopped
(`inspector/assembly/scanner.py`: before the root, inside it, after it, and
its bracket stack), and, for what the parser found, the text around the
offset `invalid_at` names.  The message is not read at all.

Classes (`FAULT_CLASSES`):

* `bad_first_character`: the first non-blank character is not `{`;
* `unclosed_bracket`: a closing bracket does not match the innermost open one
  (`open_bracket` names that one);
* `text_after_root`: non-blank text after the closed root object;
* `unexpected_end`: the text ends inside the object (the parser points past it);
* `bad_string`: a control character or bad escape inside a string;
* `bad_number`: a leading zero, a sign or a point with no digit after it, ...;
* `trailing_comma`: a comma right before a closing bracket;
* `bad_literal`: a bare word where a value or a key was expected;
* `unexpected_character`: anything else (a missing `:` or `,`, say);
* `bad_path`: a call whose text is not scanned (Gemini's partialArgs paths).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inspector.assembly.scanner import AFTER_ROOT, BEFORE_ROOT, BLANK, ArgumentScanner

FAULT_CLASSES = (
    "bad_first_character",
    "unclosed_bracket",
    "text_after_root",
    "unexpected_end",
    "bad_string",
    "bad_number",
    "trailing_comma",
    "bad_literal",
    "unexpected_character",
    "bad_path",
)
NUMBER_START = set("-0123456789")
NUMBER_INSIDE = set(".+-eE")


@dataclass(frozen=True)
class Fault:
    """Where the arguments stopped being JSON, and why, in words that do not
    depend on any message: the class, the offending character ("" at the
    end of the text) and, for an unclosed bracket, the bracket left open."""

    reason: str
    char: str = ""
    open_bracket: str = ""


def argument_fault(call: Any) -> Fault:
    """The fault of a call refused with INVALID_ARGUMENTS (its `invalid_at` set)."""
    scanner = call.scanner
    if not isinstance(scanner, ArgumentScanner):
        return Fault("bad_path")
    text, offset = call.arguments_text, int(call.invalid_at["offset"])
    char = text[offset] if 0 <= offset < len(text) else ""
    if scanner.invalid_at is not None:
        return _scanner_fault(scanner, char)
    return Fault(_parser_reason(text, offset), char)


def _scanner_fault(scanner: ArgumentScanner, char: str) -> Fault:
    if scanner.phase == BEFORE_ROOT:
        return Fault("bad_first_character", char)
    if scanner.phase == AFTER_ROOT:
        return Fault("text_after_root", char)
    return Fault("unclosed_bracket", char, scanner.stack[-1] if scanner.stack else "")


def _parser_reason(text: str, offset: int) -> str:
    """The class of a fault only the strict parser found, at `offset` of `text`."""
    if not text[offset:].strip(BLANK):
        return "unexpected_end"
    if _inside_string(text, offset):
        return "bad_string"
    char = text[offset]
    if char in NUMBER_START or _number_before(text, offset):
        return "bad_number"
    if char == "," or (char in "}]" and text[:offset].rstrip(BLANK)[-1:] == ","):
        return "trailing_comma"
    if char.isalpha():
        return "bad_literal"
    return "unexpected_character"


def _number_before(text: str, offset: int) -> bool:
    """Whether a number runs up to `offset` (`1.`, `-`, `1e`: cut short)."""
    start = offset
    while start > 0 and (text[start - 1] in NUMBER_START or text[start - 1] in NUMBER_INSIDE):
        start -= 1
    return start < offset and text[start] in NUMBER_START


def _inside_string(text: str, offset: int) -> bool:
    """Whether `offset` falls inside a string (its opening quote seen, its
    closing one not yet), reading quotes and escapes from the start."""
    inside = escape = False
    for char in text[:offset]:
        if escape:
            escape = False
        elif char == "\\" and inside:
            escape = True
        elif char == '"':
            inside = not inside
    return inside
