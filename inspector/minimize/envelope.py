"""What every frame repeats: envelope keys, ids, names and texts.

After frames, entries and fragments are gone, a chunk still carries its
`id`, `object`, `created`, `model`, `system_fingerprint`, `logprobs`,
`usage`; a Responses event its `sequence_number` and a whole `response`
copy; an Anthropic `message_start` its message's `model`, `usage`, ...  Two
edits take them off, each kept only when the failure's signature stays:

* **keys**: a key at the top of a payload, or one level down (inside
  `response`, `message`, `usage`, a choice, an item, ...), is removed.  The
  `type` key is never removed: with the SSE `event:` line it is the
  dialect's framing, and an event is removed whole or not at all.
* **strings**: each distinct id, name, model or text is shortened to a short
  prefix, everywhere it occurs at once, so equal ids stay equal and
  different ones different.  Arguments are the characters pass's job.

Pure functions over `frames.MinFrame` lists.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .frames import MinFrame, rewritten

KeyRef = tuple[int, tuple[Any, ...]]  # (frame position, path to a key)
FRAMING_KEYS = frozenset({"type"})
SHORTENABLE = frozenset(
    {
        "id",
        "call_id",
        "item_id",
        "name",
        "model",
        "system_fingerprint",
        "content",
        "text",
        "reasoning_content",
        "thinking",
        "message",
        "refusal",
    }
)


def key_refs(frames: list[MinFrame]) -> list[KeyRef]:
    """Every removable key: top-level, and one level down in dicts and lists."""
    refs: list[KeyRef] = []
    for fi, frame in enumerate(frames):
        if frame.payload is not None:
            refs.extend((fi, path) for path in _paths(frame.payload))
    return refs


def _paths(payload: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    for key, value in payload.items():
        if key in FRAMING_KEYS:
            continue
        yield (key,)
        inner = [(None, value)] if type(value) is dict else []
        if type(value) is list:
            inner = [(i, item) for i, item in enumerate(value) if type(item) is dict]
        for position, item in inner:
            prefix = (key,) if position is None else (key, position)
            yield from ((*prefix, k) for k in item if k not in FRAMING_KEYS)


def without_keys(frames: list[MinFrame], fmt: str, remove: set[KeyRef]) -> list[MinFrame]:
    """`frames` without these keys (a key under one already removed is skipped)."""
    by_frame: dict[int, list[tuple[Any, ...]]] = {}
    for fi, path in remove:
        by_frame.setdefault(fi, []).append(path)
    out = list(frames)
    for fi, paths in by_frame.items():
        payload = frames[fi].payload
        for path in sorted(paths, key=len):
            payload = _delete(payload, path)
        out[fi] = rewritten(frames[fi], payload, fmt)
    return out


def _delete(node: Any, path: tuple[Any, ...]) -> Any:
    """A copy of `node` without the key at `path`, copying only the way there."""
    head, rest = path[0], path[1:]
    if type(node) is dict and head in node:
        copy = dict(node)
        if rest:
            copy[head] = _delete(node[head], rest)
        else:
            del copy[head]
        return copy
    if type(node) is list and type(head) is int and head < len(node) and rest:
        copy = list(node)
        copy[head] = _delete(node[head], rest)
        return copy
    return node


def short_strings(frames: list[MinFrame]) -> list[str]:
    """The distinct shortenable strings of the stream, in order of appearance."""
    seen: dict[str, None] = {}
    for frame in frames:
        if frame.payload is not None:
            for value in _strings(frame.payload):
                seen.setdefault(value, None)
    return list(seen)


def _strings(node: Any) -> Iterator[str]:
    if type(node) is dict:
        for key, value in node.items():
            if key in SHORTENABLE and type(value) is str:
                yield value
            else:
                yield from _strings(value)
    elif type(node) is list:
        for item in node:
            yield from _strings(item)


def shorter_versions(value: str, taken: set[str]) -> list[str]:
    """Shorter stand-ins for `value`, shortest first, none of them `taken`:
    its prefixes, then its first character with a number."""
    prefixes = [value[:n] for n in (1, 2, 4, 8) if n < len(value)]
    numbered = [value[:1] + str(k) for k in range(2, 10)]
    out = []
    for candidate in prefixes + numbered:
        if candidate not in taken and len(candidate) < len(value) and candidate not in out:
            out.append(candidate)
    return out


def replace_string(frames: list[MinFrame], fmt: str, old: str, new: str) -> list[MinFrame]:
    """`frames` with every shortenable `old` value made `new`."""
    out = []
    for frame in frames:
        payload = frame.payload
        changed = _replaced(payload, old, new) if payload is not None else payload
        out.append(frame if changed is payload else rewritten(frame, changed, fmt))
    return out


def _replaced(node: Any, old: str, new: str) -> Any:
    """`node` with the value replaced; the very same object when nothing changed."""
    if type(node) is dict:
        copy = {
            key: new
            if key in SHORTENABLE and value == old and type(value) is str
            else _replaced(value, old, new)
            for key, value in node.items()
        }
        return node if all(copy[k] is node[k] for k in node) else copy
    if type(node) is list:
        items = [_replaced(item, old, new) for item in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    return node
