"""The timeline picture above the calls: one lane per call, x = frame number.

Drawn on the server as inline SVG.  Each lane shows where the call's
identity arrived (a diamond at its first frame), its argument fragments (bars
over the frames that carried them), where it settled (a bar end) or turned
invalid (a cross), and above the lanes, the frames with anomalies or dropped
deltas (ticks) and the refusal (a red rule through every lane).  Every mark is
a link to its frame's permalink, with a tooltip saying what it is.

It must stay cheap at any size: the data is summarized when the capture is
stored (`captures/timeline_data.py`, kept in `Assembly.timeline`), so
drawing reads one more query (the lanes' names) and no frame.  A capture
stored before timelines existed is counted from the database instead, in
buckets (three queries, bounded, slower at 100k frames); bench/timeline.py
measures both.  Names and ids are escaped; nothing of the stream is drawn
unescaped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, ExpressionWrapper, F, IntegerField, Min
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ..models import Assembly, Capture, Fragment
from ..timeline_data import (
    BUCKETS,
    LANES,
    MARKED_FRAMES,
    runs_from_buckets,
)
from .frames import frame_permalink
from .marks import mark_words

WIDTH, LEFT, RIGHT = 1000, 190, 990  # viewBox x: the labels' column, then the plot
LANE_HEIGHT, TOP = 18, 34  # the marks strip and the axis take the top
LABEL_CHARS = 26


@dataclass
class Lane:
    """One call's lane: what it shows, in frames (x is computed on drawing)."""

    position: int
    label: str
    title: str
    started: int | None
    settled: int | None
    invalid: int | None
    runs: list[list[int]] = field(default_factory=list)  # [first, last, frames]


@dataclass
class Picture:
    total: int
    slug: str
    lanes: list[Lane]
    more_calls: int
    marks: dict[int, list[str]]  # frame -> marks (anomalies, drops)
    marks_cut: bool
    refusal: tuple[int, str] | None  # (frame, code)


def timeline_picture(capture: Capture, strict: Assembly | None, call_total: int) -> SafeString:
    """The capture's timeline as inline SVG ("" for a capture without frames);
    `call_total`: how many calls the strict result has (the calls panel's count)."""
    total = capture.frame_count
    if strict is None or total <= 0:
        return mark_safe("")
    picture = Picture(
        total=total,
        slug=capture.slug,
        lanes=_lanes(strict),
        more_calls=0,
        marks={},
        marks_cut=False,
        refusal=(strict.refusal_frame, strict.refusal_code)
        if strict.refusal_code and strict.refusal_frame is not None
        else None,
    )
    picture.more_calls = max(0, call_total - len(picture.lanes))
    stored = getattr(strict, "timeline", None)
    if stored:
        _from_summary(picture, stored)
    else:
        _add_runs(picture, strict)
        _add_marks(picture, capture)
    return mark_safe(draw(picture))


def _from_summary(picture: Picture, stored: dict[str, Any]) -> None:
    runs = {lane["position"]: lane["runs"] for lane in stored.get("lanes") or []}
    for lane in picture.lanes:
        lane.runs = runs.get(lane.position, [])
    picture.marks = {frame: kinds for frame, kinds in stored.get("marks") or []}
    picture.marks_cut = bool(stored.get("marks_cut"))


def _lanes(strict: Assembly) -> list[Lane]:
    rows = strict.calls.order_by("position").values(
        "position", "name", "call_id", "kind", "started_frame", "settled_frame", "invalid_at"
    )[:LANES]
    lanes = []
    for row in rows:
        name = row["name"] or "(no name)"
        label = f"#{row['position']} {name}"
        invalid = row["invalid_at"]
        lanes.append(
            Lane(
                position=row["position"],
                label=label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "\u2026",
                title=f"#{row['position']} {name} {row['call_id'] or ''} ({row['kind']})".strip(),
                started=row["started_frame"],
                settled=row["settled_frame"],
                invalid=invalid.get("frame") if isinstance(invalid, dict) else None,
            )
        )
    return lanes


def _add_runs(picture: Picture, strict: Assembly) -> None:
    """Each lane's fragments, counted per bucket in the database (a capture
    stored before timelines)."""
    if not picture.lanes:
        return
    bucket = ExpressionWrapper(F("frame") * BUCKETS / picture.total, output_field=IntegerField())
    rows = (
        Fragment.objects.filter(
            call__assembly=strict, call__position__lte=picture.lanes[-1].position
        )
        .annotate(bucket=bucket)
        .values("call__position", "bucket")
        .annotate(first=Min("frame"), count=Count("id"))
        .order_by("call__position", "bucket")
    )
    buckets: dict[int, list[tuple[int, int, int]]] = {}
    for row in rows:
        buckets.setdefault(row["call__position"], []).append(
            (row["bucket"], row["first"], row["count"])
        )
    for lane in picture.lanes:
        lane.runs = runs_from_buckets(buckets.get(lane.position, []), picture.total)


def _add_marks(picture: Picture, capture: Capture) -> None:
    rows = list(
        capture.frames.exclude(marks=[])
        .order_by("number")
        .values_list("number", "marks")[: MARKED_FRAMES + 1]
    )
    picture.marks_cut = len(rows) > MARKED_FRAMES
    picture.marks = {number: list(marks or []) for number, marks in rows[:MARKED_FRAMES]}


# --- drawing -------------------------------------------------------------------------------


def _x(frame: int, total: int) -> float:
    return round(LEFT + (RIGHT - LEFT) * frame / max(total - 1, 1), 1)


def _link(picture: Picture, frame: int, title: str, shape: str) -> str:
    href = escape(frame_permalink(picture.slug, frame))
    return f'<a href="{href}"><title>{escape(title)}</title>{shape}</a>'


def draw(picture: Picture) -> str:
    height = TOP + LANE_HEIGHT * max(len(picture.lanes), 1) + 22
    parts = [
        f'<svg class="tl-picture" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="Timeline of {len(picture.lanes)} calls over {picture.total} frames" '
        'preserveAspectRatio="xMinYMin meet">'
    ]
    parts.extend(_axis(picture, height))
    parts.extend(_mark_ticks(picture))
    for row, lane in enumerate(picture.lanes):
        parts.extend(_lane(picture, lane, TOP + LANE_HEIGHT * row))
    parts.extend(_refusal(picture, height))
    if picture.more_calls:
        parts.append(
            f'<text class="tl-note" x="4" y="{height - 3}">+{picture.more_calls} more calls</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _text(css: str, x: float, y: float, text: str, anchor: str = "start") -> str:
    return f'<text class="{css}" x="{x}" y="{y}" text-anchor="{anchor}">{escape(text)}</text>'


def nice_ticks(last: int, most: int = 5) -> list[int]:
    """Round frame numbers for the axis: multiples of the smallest 1, 2 or 5
    x 10^k step that gives at most `most` ticks from 0 to `last`."""
    steps = (unit * 10**power for power in range(13) for unit in (1, 2, 5))
    step = next(step for step in steps if last // step < most)
    return list(range(0, max(last, 0) + 1, step))


def _axis(picture: Picture, height: int) -> list[str]:
    bottom = height - 16
    out = [f'<line class="tl-axis" x1="{LEFT}" y1="{bottom}" x2="{RIGHT}" y2="{bottom}"/>']
    for frame in nice_ticks(picture.total - 1):
        x = _x(frame, picture.total)
        out.append(
            _text("tl-tick", x, height - 3, str(frame), "end" if x > RIGHT - 30 else "middle")
        )
    out.append(_text("tl-tick", LEFT - 6, height - 3, "frame", "end"))
    out.append('<text class="tl-label" x="4" y="14">marks</text>')
    return out


def _mark_ticks(picture: Picture) -> list[str]:
    out = []
    for frame, marks in picture.marks.items():
        kinds = ", ".join(marks)
        words = "; ".join(filter(None, (mark_words(mark) for mark in marks)))
        title = f"frame {frame}: {kinds}" + (f" ({words})" if words else "")
        x = _x(frame, picture.total)
        dropped = any(mark in ("empty_delta", "orphan_continuation") for mark in marks)
        css = "tl-drop" if dropped else "tl-anomaly"
        shape = f'<path class="{css}" d="M{x - 4} 4 L{x + 4} 4 L{x} 14 Z"/>'
        out.append(_link(picture, frame, title, shape))
    if picture.marks_cut:
        out.append(
            f'<text class="tl-note" x="{RIGHT}" y="26" text-anchor="end">'
            f"first {MARKED_FRAMES} marked frames shown</text>"
        )
    return out


def _shape(kind: str, x: float, mid: float) -> str:
    """A lane marker centred on (x, mid)."""
    if kind == "identity":
        points = f"M{x} {mid - 6} L{x + 6} {mid} L{x} {mid + 6} L{x - 6} {mid} Z"
        return f'<path class="tl-start" d="{points}"/>'
    if kind == "settled":
        return f'<rect class="tl-settle" x="{x - 1.5}" y="{mid - 7}" width="3" height="14"/>'
    cross = f"M{x - 5} {mid - 5} L{x + 5} {mid + 5} M{x + 5} {mid - 5} L{x - 5} {mid + 5}"
    return f'<path class="tl-invalid" d="{cross}"/>'


def _runs(picture: Picture, lane: Lane, mid: float) -> list[str]:
    out = []
    for first, last, count in lane.runs:
        x0, x1 = _x(first, picture.total), _x(last, picture.total)
        plural = "s" if count != 1 else ""
        title = f"#{lane.position}: {count} frame{plural} carried it, {first}\u2013{last}"
        shape = (
            f'<rect class="tl-frag" x="{x0}" y="{mid - 4}" width="{max(x1 - x0, 3)}" height="8"/>'
        )
        out.append(_link(picture, first, title, shape))
    return out


def _open_span(picture: Picture, lane: Lane, mid: float) -> list[str]:
    """While the call was open: from its identity to where it settled or
    turned invalid (or to the end, when it never did)."""
    if lane.started is None:
        return []
    end = lane.settled if lane.settled is not None else lane.invalid
    x0 = _x(lane.started, picture.total)
    x1 = _x(end if end is not None else picture.total - 1, picture.total)
    return [f'<line class="tl-open" x1="{x0}" y1="{mid}" x2="{x1}" y2="{mid}"/>']


def _lane(picture: Picture, lane: Lane, y: int) -> list[str]:
    mid = y + LANE_HEIGHT / 2
    out = [
        f'<text class="tl-label" x="4" y="{mid + 4}"><title>{escape(lane.title)}</title>'
        f"{escape(lane.label)}</text>",
        f'<line class="tl-lane" x1="{LEFT}" y1="{mid}" x2="{RIGHT}" y2="{mid}"/>',
        *_open_span(picture, lane, mid),
        *_runs(picture, lane, mid),
    ]
    for kind, frame in (
        ("identity", lane.started),
        ("settled", lane.settled),
        ("invalid", lane.invalid),
    ):
        if frame is not None:
            title = f"#{lane.position} {kind} at frame {frame}"
            out.append(_link(picture, frame, title, _shape(kind, _x(frame, picture.total), mid)))
    return out


def _refusal(picture: Picture, height: int) -> list[str]:
    if picture.refusal is None:
        return []
    frame, code = picture.refusal
    x = _x(frame, picture.total)
    shape = f'<rect class="tl-refusal" x="{x - 1.5}" y="0" width="3" height="{height - 16}"/>'
    return [_link(picture, frame, f"refusal {code} at frame {frame}", shape)]
