"""The capture page's frames table: one page of frames by number range (the
(capture, number) unique index, never OFFSET), each frame's raw text cut in
the database, its marks and the calls it touched; and frame permalinks."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.db.models import Max, QuerySet
from django.db.models.functions import Length, Substr
from django.template.loader import get_template
from django.urls import get_script_prefix, reverse

from inspector.assembly import DROP_REASONS, REFUSAL_CODES

from ..models import Capture, Frame
from .frame_summary import DidGroup, did_groups
from .paging import Pager

FRAMES_PER_PAGE = 100
RAW_SHOWN = 2000  # characters of a frame's raw text shown in the frames table
ROW_TEMPLATE = "inspector/_frame_row.html"  # one row, on the page and for live viewers


@dataclass
class FrameRow:
    number: int
    kind: str
    time: str
    raw: str
    raw_cut: int  # characters not shown
    calls: list[dict[str, Any]]
    marks: list[tuple[str, str]]  # (mark, tone)
    classes: str
    focus: bool
    permalink: str
    event: str = ""  # the SSE block's `event:` name (Responses, Anthropic)
    json_type: str = ""  # the frame's JSON `type` (Responses, Anthropic)
    did: list[DidGroup] = field(default_factory=list)  # what it did, parsed
    did_known: bool = False  # False while its capture is live (see `frame_row`)
    raw_open: bool = False  # the raw text shown open (?raw=1), not folded


# Read from the shown head of the raw text: an SSE event name, and a "type"
# key that is the data object's first (Responses and Anthropic write it first;
# a chat chunk's only "type" keys are its tool calls', which are no frame type).
_EVENT_LINE = re.compile(r"^event:[ ]?(.{1,80})$", re.MULTILINE)
_TYPE_KEY = re.compile(r'^(?:data:[ ]?)?\{\s*"type"\s*:\s*"([^"\\]{1,80})"', re.MULTILINE)


def event_and_type(raw: str) -> tuple[str, str]:
    """A frame's SSE event name and JSON type, "" for what it does not have."""
    # Each pattern only where its literal is (a chat chunk has neither): the
    # substring test is several times cheaper than the search, on every live row.
    event = _EVENT_LINE.search(raw) if "event:" in raw else None
    kind = _TYPE_KEY.search(raw) if '"type"' in raw else None
    return (event.group(1).strip() if event else ""), (kind.group(1) if kind else "")


def mark_tone(mark: str) -> str:
    """How a frame's mark is coloured: a refusal, a dropped frame, or else an anomaly."""
    if mark in REFUSAL_CODES:
        return "refusal"
    if mark in DROP_REASONS:
        return "dropped"
    return "anomaly"


def frame_total(capture: Capture) -> int:
    """How many frames the capture holds.  A live capture's count is only
    written when it closes, so its frames are counted (one indexed query)."""
    if capture.outcome != Capture.Outcome.LIVE:
        return capture.frame_count
    last = Frame.objects.filter(capture=capture).aggregate(last=Max("number"))["last"]
    return 0 if last is None else last + 1


def load_frames(capture: Capture, page: Pager) -> list[Frame]:
    """One page of frames by number range; raw text cut in the database."""
    frames = Frame.objects.filter(capture=capture, number__gte=page.start, number__lt=page.stop)
    return list(frame_columns(frames.order_by("number")))


def frame_columns(frames: QuerySet[Frame]) -> QuerySet[Frame]:
    """What a row reads of each frame: never the whole raw text."""
    return frames.only("number", "kind", "arrived_ms", "calls", "marks", "did").annotate(
        raw_head=Substr("raw", 1, RAW_SHOWN), raw_length=Length("raw")
    )


def frame_rows(
    capture: Capture,
    frames: list[Frame],
    *,
    focus: int | None,
    call_link: Callable[[int], str],
    raw_open: bool = False,
) -> list[FrameRow]:
    """The table's rows; `call_link(position)` is where a touched call is
    shown; `raw_open`: each frame's raw text shown unfolded (?raw=1)."""
    frames_at = frames_path(capture.slug)
    return [_frame_row(capture, frame, focus, call_link, raw_open, frames_at) for frame in frames]


def _frame_row(
    capture: Capture,
    frame: Frame,
    focus: int | None,
    call_link: Callable[[int], str],
    raw_open: bool,
    frames_at: str,
) -> FrameRow:
    return frame_row(
        capture.slug,
        frame.number,
        frame.kind,
        frame.raw_head,
        frame.raw_length,
        frame.arrived_ms,
        calls=frame.calls,
        marks=frame.marks,
        focus=focus,
        call_link=call_link,
        did=frame.did,
        dialect=capture.dialect,
        raw_open=raw_open,
        frames_at=frames_at,
    )


def frame_row(
    slug: str,
    number: int,
    kind: str,
    raw_head: str,
    raw_length: int,
    arrived_ms: float | None,
    *,
    calls: Sequence[int] = (),
    marks: Sequence[str] = (),
    focus: int | None = None,
    call_link: Callable[[int], str] | None = None,
    did: Sequence[Sequence[Any]] | None = None,
    dialect: str = "chat",
    raw_open: bool = False,
    frames_at: str | None = None,
) -> FrameRow:
    """One row of the frames table from a frame's stored fields (`raw_head`:
    the first RAW_SHOWN characters of its raw text, of `raw_length`; `did`:
    its `Frame.did` items, shown parsed in the `dialect`'s terms, written
    as the frame is stored, live or not).  `did` None: not known, not shown.
    `frames_at`: the capture's `frames_path`, when the caller has it (a
    caller of many rows looks it up once)."""
    link = call_link or call_card
    marked = [(mark, mark_tone(mark)) for mark in marks] if marks else []
    event, json_type = event_and_type(raw_head)
    return FrameRow(
        event=event,
        json_type=json_type,
        number=number,
        kind=kind,
        time="" if arrived_ms is None else f"{arrived_ms:.1f} ms",
        raw=raw_head,
        raw_cut=max(0, raw_length - RAW_SHOWN),
        calls=[{"position": p, "href": link(p)} for p in calls],
        marks=marked,
        did=did_groups(did or (), dialect, link),
        did_known=did is not None,
        raw_open=raw_open,
        classes=_classes(kind, marked, number == focus),
        focus=number == focus,
        permalink=frame_permalink(slug, number, frames_at),
    )


def _classes(kind: str, marked: list[tuple[str, str]], focus: bool) -> str:
    """A row's classes: its kind's, its marks' tones' (each once, sorted), its focus."""
    classes = f"kind-{kind}"
    if marked:  # most rows have no mark
        classes += "".join(f" is-{tone}" for tone in sorted({tone for _, tone in marked}))
    return f"{classes} is-focus" if focus else classes


def call_card(position: int) -> str:
    """Where a call is shown on a live capture's page: its card, on the page."""
    return f"#call-{position}"


def live_frame_row(
    slug: str,
    number: int,
    kind: str,
    raw: str,
    arrived_ms: float | None,
    *,
    calls: Sequence[int] = (),
    marks: Sequence[str] = (),
    did: Sequence[Sequence[Any]] | None = None,
    dialect: str = "chat",
) -> str:
    """The HTML of the row the capture page shows for a frame of a live
    capture (its raw text as stored: NUL as U+FFFD; its calls and marks as
    the live assembler tells them, `live_cards.LiveCards.frame_notes`: the
    stored row gets them when the capture closes; `did`: its stored items,
    when the caller has them), for a live viewer to insert: the page's own
    row template."""
    raw = raw.replace("\x00", "\ufffd")
    row = frame_row(
        slug,
        number,
        kind,
        raw[:RAW_SHOWN],
        len(raw),
        arrived_ms,
        calls=calls,
        marks=marks,
        did=did,
        dialect=dialect,
    )
    return get_template(ROW_TEMPLATE).render({"row": row})


def frame_permalink(slug: str, number: int, frames_at: str | None = None) -> str:
    """The capture page opened at frame `number`, scrolled to its row."""
    return f"{frame_path(slug, number, frames_at)}#f-{number}"


def frame_path(slug: str, number: int, frames_at: str | None = None) -> str:
    """`.../c/<slug>/frames/<number>/` (`frames_at`: `frames_path(slug)`,
    when the caller has it)."""
    return f"{frames_at or frames_path(slug)}{number}/"


def frames_path(slug: str) -> str:
    """`.../c/<slug>/frames/`, a frame's permalink without its number.  The
    script prefix is asgiref thread-local state behind a lock, which the
    threads of many live recordings queue on when each row reads it, so a
    caller of many rows reads it once."""
    return _frames_path(get_script_prefix(), slug)


@lru_cache(maxsize=256)
def _frames_path(prefix: str, slug: str) -> str:
    """`.../c/<slug>/frames/` as the URL conf writes it: one `reverse` per
    capture, not one per row (a quarter of a live row's cost)."""
    path = reverse("frame", args=[slug, 0])
    if not path.endswith("/0/"):
        raise ValueError(f"the frame route no longer ends with its number: {path}")
    return path[:-2]
