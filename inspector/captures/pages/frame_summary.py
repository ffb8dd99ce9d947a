"""A frame's row, parsed: what its stored items (`Frame.did`, filed from the
strict assembler's events when it was stored) say it did, grouped by the
call each delta resolved to, in its dialect's terms.  Nothing is read from
the frame's raw text here: the assembler's rules decided it all."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .dialect_terms import frame_term
from .usage import usage_summary

CALL_KINDS = ("start", "id", "name", "ignored", "args", "settled")


@dataclass(frozen=True)
class DidPart:
    """One thing a frame did: `term` in the dialect's words, `value` shown as
    code, `note` after it ("ignored", "+40 characters")."""

    kind: str
    term: str
    value: str = ""
    note: str = ""


@dataclass
class DidGroup:
    """The parts of one call (`call` its position, None for the stream's
    own: text, finish, usage)."""

    call: int | None
    name: str = ""
    href: str = ""
    parts: list[DidPart] = field(default_factory=list)


def did_groups(
    items: Sequence[Sequence[Any]], dialect: str, call_link: Callable[[int], str]
) -> list[DidGroup]:
    """The row's groups, in the order their first item came."""
    groups: dict[int | None, DidGroup] = {}
    for item in items:
        kind = item[0]
        call = item[1] if kind in CALL_KINDS else _anomaly_call(item)
        group = groups.get(call)
        if group is None:
            href = call_link(call) if isinstance(call, int) else ""
            group = groups[call] = DidGroup(call, href=href)
        if kind in CALL_KINDS and item[2]:
            group.name = str(item[2])
        part = _part(kind, item, dialect)
        if part is not None:
            group.parts.append(part)
    return list(groups.values())


def _anomaly_call(item: Sequence[Any]) -> int | None:
    return item[2] if item[0] == "anomaly" and isinstance(item[2], int) else None


def _part(kind: str, item: Sequence[Any], dialect: str) -> DidPart | None:
    term = frame_term(dialect, kind)
    if kind in ("start", "settled", "done"):
        return DidPart(kind, term)
    if kind in ("id", "name"):
        return DidPart(kind, term, str(item[3]))
    if kind == "ignored":
        return DidPart(kind, frame_term(dialect, item[3]), json.dumps(item[4]), "ignored")
    if kind == "args":
        return DidPart(kind, term, item[3], _more(item[4]))
    if kind in ("text", "reasoning"):
        return DidPart(kind, term, item[2], _more(item[3]))
    if kind == "finish":
        return DidPart(kind, term, str(item[2]))
    if kind == "usage":
        return DidPart(kind, term, usage_summary(dict(_pairs(item[1]))))
    if kind in ("dropped", "anomaly"):
        return DidPart(kind, kind, str(item[2] if kind == "dropped" else item[1]))
    return None


def _pairs(usage: Any) -> list[tuple[str, Any]]:
    """A stored usage item's (key, value) pairs, in the stream's order."""
    if not isinstance(usage, list):
        return []
    return [(str(pair[0]), pair[1]) for pair in usage if isinstance(pair, list) and len(pair) == 2]


def _more(cut: Any) -> str:
    return f"+{cut} characters" if cut else ""
