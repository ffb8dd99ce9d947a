"""Chat tool-call entries inside chunk frames: where they are, and frames
with some removed or their arguments replaced (the entries, fragments and
characters passes)."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from .frames import MinFrame, rewritten

# Where a tool-call entry is: (frame position, choice position, entry position).
Ref = tuple[int, int, int]


def entry_lists(payload: dict[str, Any] | None) -> list[tuple[int, list[Any]]]:
    """(choice position, its delta.tool_calls list) for every such list."""
    if payload is None or type(payload.get("choices")) is not list:
        return []
    out = []
    for ci, item in enumerate(payload["choices"]):
        delta = item.get("delta") if type(item) is dict else None
        entries = delta.get("tool_calls") if type(delta) is dict else None
        if type(entries) is list:
            out.append((ci, entries))
    return out


def entry_refs(frames: list[MinFrame]) -> list[Ref]:
    return [
        (fi, ci, ei)
        for fi, frame in enumerate(frames)
        for ci, entries in entry_lists(frame.payload)
        for ei in range(len(entries))
    ]


def fragment(frames: list[MinFrame], ref: Ref) -> str | None:
    """The entry's arguments when it is a non-empty string, else None."""
    fi, ci, ei = ref
    entry = frames[fi].payload["choices"][ci]["delta"]["tool_calls"][ei]
    function = entry.get("function") if type(entry) is dict else None
    arguments = function.get("arguments") if type(function) is dict else None
    return arguments if type(arguments) is str and arguments else None


def edit_entries(
    frames: list[MinFrame],
    fmt: str,
    *,
    remove: AbstractSet[Ref] = frozenset(),
    arguments: dict[Ref, str] | None = None,
) -> list[MinFrame]:
    """`frames` with these entries removed and these arguments replaced.
    Frames no edit touches are the same objects; the others are rewritten,
    copying only the dicts and lists on the way to what changed."""
    arguments = arguments or {}
    by_frame: dict[int, set[tuple[int, int]]] = {}
    for fi, ci, ei in (*remove, *arguments):
        by_frame.setdefault(fi, set()).add((ci, ei))
    out = list(frames)
    for fi, places in by_frame.items():
        payload = dict(frames[fi].payload)
        choices = payload["choices"] = list(payload["choices"])
        for ci in sorted({ci for ci, _ in places}):
            choices[ci] = _edited_choice(choices[ci], (fi, ci), remove, arguments)
        out[fi] = rewritten(frames[fi], payload, fmt)
    return out


def _edited_choice(
    choice: dict[str, Any],
    where: tuple[int, int],
    remove: AbstractSet[Ref],
    arguments: dict[Ref, str],
) -> dict[str, Any]:
    choice = dict(choice)
    delta = choice["delta"] = dict(choice["delta"])
    kept = []
    for ei, entry in enumerate(delta["tool_calls"]):
        ref = (*where, ei)
        if ref in remove:
            continue
        if ref in arguments:
            entry = dict(entry)
            function = entry["function"] = dict(entry["function"])
            function["arguments"] = arguments[ref]
        kept.append(entry)
    if kept:
        delta["tool_calls"] = kept
    else:
        del delta["tool_calls"]  # a list left empty is dropped from its delta
    return choice
