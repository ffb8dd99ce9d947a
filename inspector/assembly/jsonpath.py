"""Setting a value at a Gemini `partialArgs` `jsonPath`.

Only the RFC 9535 steps Vertex AI sends are read: `$`, `.name`, `['name']`
and `[n]`.  Missing containers are created (an object for a name step, an
array for an index step); an index past the end of an array pads it with
nulls.  Anything else is a `PathError`, which the adapter turns into
`INVALID_ARGUMENTS`.
"""

from __future__ import annotations

import re
from typing import Any

_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")


class PathError(ValueError):
    """A path that can't be read, or a value that does not fit the path."""


def parse_path(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise PathError(f"jsonPath {path!r} does not start with '$'")
    steps: list[str | int] = []
    pos = 1
    while pos < len(path):
        found = _STEP.match(path, pos)
        if found is None:
            raise PathError(f"jsonPath {path!r} can't be read at character {pos}")
        name, quoted, number = found.groups()
        if number is not None:
            steps.append(int(number))
        else:
            steps.append(name if name is not None else re.sub(r"\\(.)", r"\1", quoted))
        pos = found.end()
    if not steps:
        raise PathError("jsonPath '$' names the arguments object itself")
    return steps


def _child(container: Any, step: str | int, make: Any) -> Any:
    """The container's child at `step`, created as `make()` when missing."""
    if type(step) is int:
        if type(container) is not list:
            raise PathError(f"index [{step}] into a {type(container).__name__}")
        while len(container) <= step:
            container.append(None)
        if container[step] is None:
            container[step] = make()
        return container[step]
    if type(container) is not dict:
        raise PathError(f"name {step!r} into a {type(container).__name__}")
    if container.get(step) is None:
        container[step] = make()
    return container[step]


def set_at(root: dict[str, Any], steps: list[str | int], value: Any, *, extend: bool) -> None:
    """Set `value` at `steps` under `root`; with `extend`, append the string
    `value` to the string there (a piece continuing its path)."""
    container: Any = root
    for step, following in zip(steps, steps[1:], strict=False):
        container = _child(container, step, list if type(following) is int else dict)
    last = steps[-1]
    if type(last) is int:
        if type(container) is not list:
            raise PathError(f"index [{last}] into a {type(container).__name__}")
        while len(container) <= last:
            container.append(None)
        current = container[last]
    else:
        if type(container) is not dict:
            raise PathError(f"name {last!r} into a {type(container).__name__}")
        current = container.get(last)
    if extend:
        if type(current) is not str or type(value) is not str:
            raise PathError("a continuing piece appends a string to a string")
        value = current + value
    elif current is not None and value is not None and _kind(current) != _kind(value):
        raise PathError(f"a {_kind(value)} where the path already holds a {_kind(current)}")
    container[last] = value


def _kind(value: Any) -> str:
    if type(value) is bool:
        return "boolean"
    if type(value) in (int, float):
        return "number"
    return type(value).__name__
