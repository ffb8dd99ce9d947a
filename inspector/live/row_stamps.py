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
import re
import threading
from types import SimpleNamespace
from typing import Any

from django.template.loader import get_template
from django.utils.html import conditional_escape

from inspector.captures.pages.frames import RAW_SHOWN, ROW_TEMPLATE, FrameRow, frame_row

logger = logging.getLogger(__name__)

MAX_STAMPS = 512  # shapes kept; all are dropped when more come (a rare, odd stream)
_PLACE = "\ue000{}\ue001"  # private-use characters: the template neither escapes nor makes them
_PLACE_SPLIT = re.compile("\ue000([0-9]+)\ue001")

# A stamp: the literal pieces and, between each two, the value slot to put there.
Stamp = tuple[tuple[str, ...], tuple[int, ...]]

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
    values: list[Any] = []
    key = _shape(row, values, {})
    stamp = _stamps.get(key, False)
    if stamp is False:
        stamp = _new_stamp(key, row, values)
    if stamp is None:
        return render(row)
    return _fill(stamp, values)


def render(row: FrameRow) -> str:
    """The row template rendered the slow way."""
    return get_template(ROW_TEMPLATE).render({"row": row})


def _new_stamp(key: tuple, row: FrameRow, values: list[Any]) -> Stamp | None:
    """Render the shape's stamp and check it on this row."""
    pieces = _PLACE_SPLIT.split(render(_placeheld(row, {})))
    stamp: Stamp | None = (tuple(pieces[0::2]), tuple(int(slot) for slot in pieces[1::2]))
    if _fill(stamp, values) != render(row):
        logger.warning("a frame row's shape is not stampable; it is rendered by the template")
        stamp = None
    with _lock:
        if len(_stamps) >= MAX_STAMPS:
            _stamps.clear()
        _stamps[key] = stamp
    return stamp


def _fill(stamp: Stamp, values: list[Any]) -> str:
    literal, slots = stamp
    out = [literal[0]]
    for slot, after in zip(slots, literal[1:], strict=True):
        value = values[slot]
        kind = type(value)
        # What the template does to a value: an int as is, a plain str escaped
        # (Django's `escape` is `html.escape`), anything else conditionally.
        if kind is int:
            out.append(str(value))
        elif kind is str:
            out.append(html.escape(value))
        else:
            out.append(conditional_escape(value))
        out.append(after)
    return "".join(out)


# -- shapes ----------------------------------------------------------------------------------
#
# `_shape` and `_placeheld` walk a row alike, leaf by leaf (str and int values,
# in the same order): `_shape` collects the values and says the shape,
# `_placeheld` builds the copy with placeholders in the same slots.


def _shape(value: Any, values: list[Any], slots: dict) -> Any:
    kind = type(value)
    if kind is str or kind is int:
        if not value:
            return (kind, value)
        slot = slots.get((kind, value))
        if slot is None:
            slot = slots[(kind, value)] = len(values)
            values.append(value)
        return slot
    if kind is list or kind is tuple:
        return (kind, tuple([_shape(item, values, slots) for item in value]))
    if kind is dict:
        return (kind, tuple([(name, _shape(item, values, slots)) for name, item in value.items()]))
    names = _field_names.get(kind, False)
    if names is False:
        names = _fields(kind)
    if names is not None:
        return (kind, tuple([_shape(getattr(value, name), values, slots) for name in names]))
    return (kind, value)  # None, bool, float: part of the shape as they are


def _placeheld(value: Any, slots: dict) -> Any:
    kind = type(value)
    if kind is str or kind is int:
        if not value:
            return value
        slot = slots.setdefault((kind, value), len(slots))
        return _PLACE.format(slot)
    if kind is list or kind is tuple:
        return kind(_placeheld(item, slots) for item in value)
    if kind is dict:
        return {name: _placeheld(item, slots) for name, item in value.items()}
    names = _fields(kind)
    if names is not None:
        return SimpleNamespace(**{name: _placeheld(getattr(value, name), slots) for name in names})
    return value


# A type's dataclass fields, or None for a type that is no dataclass (`_fields`).
_field_names: dict[type, tuple[str, ...] | None] = {}


def _fields(kind: type) -> tuple[str, ...] | None:
    """The field names of dataclass `kind`, None for another type; asked once
    a type (`_shape` reads the cache first: it asks of every value)."""
    names = _field_names.get(kind, False)
    if names is False:
        names = _field_names[kind] = (
            tuple(field.name for field in dataclasses.fields(kind))
            if dataclasses.is_dataclass(kind)
            else None
        )
    return names
