"""What a stored call's arguments are made of, so pages show them in the
dialect's own terms: JSON text (checked piece by piece), free text (custom
tool input, built-in actions: never scanned), or Gemini `partialArgs` path
pieces, where each fragment sets a value at a JSON path and the state worth
showing is the arguments object so far.
"""

from __future__ import annotations

from typing import Any

import orjson

from inspector.assembly import Call as AssembledCall
from inspector.assembly.jsonpath import PathError, parse_path, set_at
from inspector.assembly.jsontext import dumps

JSON_TEXT = "json"
FREE_TEXT = "text"
PATH_PIECES = "path"

STATE_BUDGET = 1_000_000  # characters of "object so far" stored per call, at most
_OPERATORS = (" += ", " = ")


def argument_form(call: AssembledCall, dialect: str) -> str:
    """json, text or path (see the module docstring)."""
    if call.scanned:
        return JSON_TEXT
    if dialect == "gemini" and call.kind == "function":
        return PATH_PIECES
    return FREE_TEXT


def call_columns(call: AssembledCall, dialect: str) -> dict[str, Any]:
    """The Call row's dialect columns."""
    return {
        "kind": call.kind,
        "item_id": call.item_id or "",
        "block": call.block,
        "argument_form": argument_form(call, dialect),
    }


def split_piece(text: str) -> tuple[str, bool, Any] | None:
    """A path-piece fragment (`$.city += "Zür"`) as (path, extends, value);
    None when it does not read as one."""
    for operator in _OPERATORS:
        start = 0
        while (at := text.find(operator, start)) != -1:
            path, value = text[:at], text[at + len(operator) :]
            start = at + 1
            try:
                parse_path(path)
                return path, operator == " += ", orjson.loads(value)
            except (PathError, orjson.JSONDecodeError):
                continue
    return None


class PieceStates:
    """The arguments object after each path-piece fragment, one fragment at
    a time (`add`): compact JSON, empty once STATE_BUDGET is spent or where
    a piece does not apply (`fragment_rows.FragmentScan`)."""

    def __init__(self) -> None:
        self.value: dict[str, Any] = {}
        self.spent = 0

    def add(self, text: str) -> str:
        piece = split_piece(text)
        if piece is None:
            return ""
        path, extends, part = piece
        try:
            set_at(self.value, parse_path(path), part, extend=extends)
        except PathError:
            return ""
        if self.spent >= STATE_BUDGET:
            return ""
        state = dumps(self.value).decode()
        self.spent += len(state)
        return state
