"""Frame rows for live viewers, rendered by the capture page's row template
at a fraction of its cost.

Rendering `_frame_row.html` through Django's template engine costs about
0.15 ms a row, most of a live frame's budget at thousands of frames a
second.  Yet the rows of one stream come in a few shapes only (a fragment of
call 2, a text delta, the finish...): they differ in their values (number,
time, raw text, argument piece), not in which parts of the template they
use.  So each shape is rendered once, by the page's own template, from a
copy of the row whose truthy values are replaced by placeholders; that
rendering, cut at the placeholders, is the shape's stamp, and each row of
the shape is its stamp with the row's values, escaped as the template
escapes them, put back in.  The template stays the one renderer: a stamp is
its output.

A row's shape is everything the template may branch on: the structure of
the row (its lists' lengths), which values are falsy (those stay in the
copy as they are) and which values are equal (equal values share a
placeholder, so `{% if a == b %}` renders alike).  The first row of every
shape is also rendered the slow way and compared: a shape whose stamp does
not give the template's output (a filter that transforms a value) is
rendered by the template from then on.
"""

from __future__ import annotations

import dataclasses
import html
import logging
import operator
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from django.template.loader import get_template

from inspector.captures.pages.frames import RAW_SHOWN, ROW_TEMPLATE, FrameRow, frame_row

logger = logging.getLogger(__name__)

MAX_STAMPS = 512  # shapes kept; all are dropped when more come (a rare, odd stream)
_PLACE = "\ue000{}\ue001"  # private-use characters: the template neither escapes nor makes them
_PLACE_SPLIT = re.compile("\ue000([0-9]+)\ue001")

# A stamp: the template's output cut at the values, a hole ("") where each value
# goes (every other piece), and a getter of the values' texts in the holes' order.
Stamp = tuple[list[str], Callable[[list[str]], Sequence[str]]]

_stamps: dict[tuple, Stamp | None] = {}  # None: the shape is rendered by the template
_lock = threading.Lock()


def live_row_html(
    slug: str,
    number: int,
    kind: str,
    raw: str,
    arrived_ms: float | None,
    *,
    calls: Any = (),
    marks: Any = (),
    did: Any = None,
    dialect: str = "chat",
    frames_at: str | None = None,
) -> str:
    """What `frames.live_frame_row` renders for these arguments (the page's
    row for a frame of a live capture), from its shape's stamp."""
    raw = raw.replace("\x00", "\ufffd")
    row = frame_row(
        slug, number, kind, raw[:RAW_SHOWN], len(raw), arrived_ms,
        calls=calls, marks=marks, did=did, dialect=dialect, frames_at=frames_at,
    )  # fmt: skip
    return stamped(row)


def stamped(row: FrameRow) -> str:
    """The row template's output for `row`."""
    shape: list[Any] = []
    slots: dict = {}  # a value -> its slot; in slot order, so its keys are the values
    loose: list[Any] = []
    _walk((row,), shape, slots, loose)
    if loose:  # a bool or float equal to a value in a slot (True == 1) is part of the shape
        shape.extend([slots.get(value) for value in loose])
    key = tuple(shape)
    stamp = _stamps.get(key, False)
    if stamp is False:
        stamp = _new_stamp(key, row, slots)
    if stamp is None:
        return render(row)
    return _fill(stamp, slots)


def render(row: FrameRow) -> str:
    """The row template rendered the slow way."""
    return get_template(ROW_TEMPLATE).render({"row": row})


def _new_stamp(key: tuple, row: FrameRow, values: Iterable[Any]) -> Stamp | None:
    """Render the shape's stamp and check it on this row."""
    pieces = _PLACE_SPLIT.split(render(_placeheld(row, {})))
    slots = [int(slot) for slot in pieces[1::2]]
    pieces[1::2] = [""] * len(slots)
    stamp: Stamp | None = (pieces, _picker(slots))
    if _fill(stamp, values) != render(row):
        logger.warning("a frame row's shape is not stampable; it is rendered by the template")
        stamp = None
    with _lock:
        if len(_stamps) >= MAX_STAMPS:
            _stamps.clear()
        _stamps[key] = stamp
    return stamp


def _picker(slots: list[int]) -> Callable[[list[str]], Sequence[str]]:
    """`texts` -> the texts at `slots`, in that order."""
    if len(slots) > 1:
        return operator.itemgetter(*slots)  # a tuple, for two or more
    return lambda texts: [texts[slot] for slot in slots]


def _fill(stamp: Stamp, values: Iterable[Any]) -> str:
    """The stamp with `values` (in slot order) put in, as the template writes
    them: a str escaped, an int as `str` writes it (the values are str and
    int: `_walk`).  Django's `escape` is `html.escape`, which changes only a
    str with one of `&<>"'` in it, which most of a row's are not: the `in`
    tests are several times cheaper than a regex search or the escape."""
    pieces, pick = stamp
    texts = [
        (
            html.escape(value)
            if "&" in value or "<" in value or ">" in value or '"' in value or "'" in value
            else value
        )
        if type(value) is str
        else str(value)
        for value in values
    ]
    out = pieces.copy()
    out[1::2] = pick(texts)
    return "".join(out)


# -- shapes ----------------------------------------------------------------------------------
#
# `_walk` and `_placeheld` walk a row alike, leaf by leaf (str and int values,
# in the same order): `_walk` collects the values and says the shape,
# `_placeheld` builds the copy with placeholders in the same slots.  A truthy
# str or int is a leaf, its slot shared by equal values (a str never equals an
# int); "" and 0 stay in the copy as they are, and None, bool and float too
# (the bools and floats are also noted as `loose`: `stamped` adds to the shape
# which slot's value each equals).
#
# The shape is one flat list of tokens, the row written out in prefix order:
# a leaf is its slot (an int), "" or -1 (for 0), or `(type, value)` for a
# value of another type; a list or tuple is its type and its length, then its
# items; a dict is `dict` and its keys (a tuple), then its values; a
# dataclass is its type, then its fields.  Each token says how many follow it
# as its own, so two rows have equal lists only if they have the same shape,
# and no tuple is built for each container.


def _walk(items: Iterable[Any], shape: list[Any], slots: dict, loose: list[Any]) -> None:
    """Append the tokens of `items` to `shape` (and each new value to `slots`,
    at the next slot); the leaves (most items are) said here, not by a call
    each."""
    for item in items:
        kind = type(item)
        if kind is str or kind is int:
            if item:
                shape.append(slots.setdefault(item, len(slots)))
            else:
                shape.append(item if kind is str else -1)
        elif kind is list or kind is tuple:
            shape.append(kind)
            shape.append(len(item))
            _walk(item, shape, slots, loose)
        elif kind is dict:
            shape.append(kind)
            shape.append(tuple(item))
            _walk(item.values(), shape, slots, loose)
        else:
            fields = _field_getters.get(kind, False)
            if fields is False:
                fields = _field_getter(kind)
            if fields is not None:
                shape.append(kind)
                _walk(fields(item), shape, slots, loose)
                continue
            if kind is bool or kind is float:
                loose.append(item)
            shape.append((kind, item))


def _placeheld(value: Any, slots: dict) -> Any:
    kind = type(value)
    if kind is str or kind is int:
        if not value:
            return value
        slot = slots.setdefault(value, len(slots))
        return _PLACE.format(slot)
    if kind is list or kind is tuple:
        return kind(_placeheld(item, slots) for item in value)
    if kind is dict:
        return {name: _placeheld(item, slots) for name, item in value.items()}
    names = _fields(kind)
    if names is not None:
        return SimpleNamespace(**{name: _placeheld(getattr(value, name), slots) for name in names})
    return value


# A dataclass's field names (`_fields`) and a getter of their values as a
# tuple, in that order (`_field_getter`); None for a type that is no dataclass.
_field_names: dict[type, tuple[str, ...] | None] = {}
_field_getters: dict[type, Callable[[Any], tuple] | None] = {}


def _fields(kind: type) -> tuple[str, ...] | None:
    """The field names of dataclass `kind`, None for another type."""
    names = _field_names.get(kind, False)
    if names is False:
        names = _field_names[kind] = (
            tuple(field.name for field in dataclasses.fields(kind))
            if dataclasses.is_dataclass(kind)
            else None
        )
    return names


def _field_getter(kind: type) -> Callable[[Any], tuple] | None:
    """`value` -> its fields' values, for dataclass `kind`; asked once a type
    (`_walk` reads the cache first: it asks of every value)."""
    getter = _field_getters.get(kind, False)
    if getter is False:
        names = _fields(kind)
        if names is None:
            getter = None
        elif not names:
            getter = _no_fields
        elif len(names) == 1:
            getter = _one_field(names[0])
        else:
            getter = operator.attrgetter(*names)
        _field_getters[kind] = getter
    return getter


def _one_field(name: str) -> Callable[[Any], tuple]:
    return lambda value: (getattr(value, name),)


def _no_fields(value: Any) -> tuple:
    return ()
