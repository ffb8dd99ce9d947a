"""The timeline picture above the calls: one lane per call and one for the
text and reasoning; x = frame number, or arrival time for a capture whose
frames have one (`?timeline=time`, offered by a link; frames by default).

Drawn on the server as inline SVG.  Each lane shows where the call's
identity arrived (a diamond at its first frame), its argument fragments (bars
over the frames that carried them), where it settled (a bar end) or turned
invalid (a cross); the text lane, the frames that carried text (lower bars)
and reasoning (upper bars); above the lanes, the frames with anomalies or
dropped deltas (ticks) and the refusal (a red rule through every lane).
Every mark is a link to its frame's permalink, with a tooltip saying what it
is.

It must stay cheap at any size: the data is summarized when the capture is
stored (`captures/timeline_data.py`, kept in `Assembly.timeline`), so
drawing reads one more query (the lanes' names) and no frame; the time axis
places frames by the summary's `clock`.  A capture stored before timelines
existed is counted from the database instead, in buckets (three queries,
bounded, slower at 100k frames; frame axis only); bench/timeline.py measures
both.  Names and ids are escaped; nothing of the stream is drawn unescaped.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, ExpressionWrapper, F, IntegerField, Min
from django.http import HttpRequest
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ..models import Assembly, Capture, Fragment
from ..timeline_data import BUCKETS, LANES, MARKED_FRAMES, runs_from_buckets
from .frames import frame_permalink
from .marks import mark_words

WIDTH, LEFT, RIGHT = 1000, 190, 990  # viewBox x: the labels' column, then the plot
LANE_HEIGHT, TOP = 18, 34  # the marks strip and the axis take the top
LABEL_CHARS = 26
MIN_BAR = 4  # a run of one frame is still a bar one can click
FRAMES, TIME = "frames", "time"  # the x axes (`?timeline=`)
PROSE_LABELS = {"text": "text", "reasoning": "reasoning"}


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
class Clock:
    """The time axis: arrival times (ms) of the frames drawn, sorted by frame."""

    start: float
    end: float
    frames: list[int]
    times: list[float]

    @classmethod
    def from_summary(cls, time: dict[str, Any]) -> Clock:
        clock = time.get("clock") or []
        return cls(
            start=float(time["start"]),
            end=float(time["end"]),
            frames=[frame for frame, _ in clock],
            times=[float(ms) for _, ms in clock],
        )

    def ms(self, frame: int) -> float:
        """A frame's arrival time; one not in the clock (a summary stored
        by another version) takes the nearest earlier frame's."""
        slot = bisect_left(self.frames, frame)
        if slot < len(self.frames) and self.frames[slot] == frame:
            return self.times[slot]
        return self.times[slot - 1] if slot else self.start


@dataclass
class Picture:
    total: int
    slug: str
    lanes: list[Lane]
    more_calls: int
    marks: dict[int, list[str]]  # frame -> marks (anomalies, drops)
    marks_cut: bool
    refusal: tuple[int, str] | None  # (frame, code)
    prose: dict[str, list[list[int]]] = field(default_factory=dict)  # kind -> runs
    clock: Clock | None = None  # set when the capture's frames have arrival times
    axis: str = FRAMES

    def x(self, frame: int) -> float:
        """Where a frame is drawn on the picture's axis."""
        if self.axis == TIME and self.clock is not None:
            return self.x_ms(self.clock.ms(frame))
        return round(LEFT + (RIGHT - LEFT) * frame / max(self.total - 1, 1), 1)

    def x_ms(self, ms: float) -> float:
        clock = self.clock
        assert clock is not None
        span = clock.end - clock.start
        share = (ms - clock.start) / span if span > 0 else 0.0
        return round(LEFT + (RIGHT - LEFT) * min(max(share, 0.0), 1.0), 1)


def timeline_section(
    request: HttpRequest, capture: Capture, strict: Assembly | None, call_total: int
) -> SafeString:
    """The picture on the axis `?timeline=` asks for (frames unless "time"
    and the capture has arrival times), after the link that switches it when
    both axes can be drawn.  Works without JavaScript."""
    asked = TIME if request.GET.get("timeline") == TIME else FRAMES
    picture = build_picture(capture, strict, call_total, asked)
    if picture is None:
        return mark_safe("")
    return mark_safe(axis_switch(request, picture) + draw(picture))


def timeline_picture(
    capture: Capture, strict: Assembly | None, call_total: int, axis: str = FRAMES
) -> SafeString:
    """The capture's timeline as inline SVG ("" for a capture without frames);
    `call_total`: how many calls the strict result has (the calls panel's count)."""
    picture = build_picture(capture, strict, call_total, axis)
    return mark_safe("" if picture is None else draw(picture))


def build_picture(
    capture: Capture, strict: Assembly | None, call_total: int, axis: str = FRAMES
) -> Picture | None:
    total = capture.frame_count
    if strict is None or total <= 0:
        return None
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
        _from_summary(picture, stored, axis)
    else:
        _add_runs(picture, strict)
        _add_marks(picture, capture)
    return picture


def _from_summary(picture: Picture, stored: dict[str, Any], axis: str) -> None:
    """The stored summary's runs on the axis asked for (see `timeline_data`;
    a summary stored before `prose` and `time` has neither)."""
    time = stored.get("time")
    if time:
        picture.clock = Clock.from_summary(time)
    on = time if axis == TIME and time else stored
    picture.axis = TIME if on is time else FRAMES
    runs = {lane["position"]: lane["runs"] for lane in on.get("lanes") or []}
    for lane in picture.lanes:
        lane.runs = runs.get(lane.position, [])
    picture.prose = {lane["kind"]: lane["runs"] for lane in on.get("prose") or []}
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
            capture_id=strict.capture_id, position__lte=picture.lanes[-1].position
        )
        .annotate(bucket=bucket)
        .values("position", "bucket")
        .annotate(first=Min("frame"), count=Count("id"))
        .order_by("position", "bucket")
    )
    buckets: dict[int, list[tuple[int, int, int]]] = {}
    for row in rows:
        buckets.setdefault(row["position"], []).append((row["bucket"], row["first"], row["count"]))
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


# --- the axis switch -----------------------------------------------------------------------


def axis_switch(request: HttpRequest, picture: Picture) -> str:
    """Links to the picture on each axis (the page's other parameters kept),
    only when the capture has arrival times."""
    if picture.clock is None:
        return ""
    links = []
    for axis, words in ((FRAMES, "frame number"), (TIME, "arrival time")):
        query = request.GET.copy()
        query["timeline"] = axis
        shape = '<a href="?{}#timeline" aria-current="true">{}</a>'
        if axis != picture.axis:
            shape = '<a href="?{}#timeline">{}</a>'
        links.append(format_html(shape, query.urlencode(), words))
    return f'<p class="tl-switch">x axis: {" · ".join(links)}</p>'


# --- drawing -------------------------------------------------------------------------------


def _link(picture: Picture, frame: int, title: str, shape: str) -> str:
    href = escape(frame_permalink(picture.slug, frame))
    return f'<a href="{href}"><title>{escape(title)}</title>{shape}</a>'


def draw(picture: Picture) -> str:
    rows = len(picture.lanes) + (1 if picture.prose else 0)
    height = TOP + LANE_HEIGHT * max(rows, 1) + 22
    unit = "arrival time" if picture.axis == TIME else "frames"
    parts = [
        f'<svg class="tl-picture" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="Timeline of {len(picture.lanes)} calls over {picture.total} frames, '
        f'by {unit}" data-axis="{picture.axis}" preserveAspectRatio="xMinYMin meet">'
    ]
    parts.extend(_axis(picture, height))
    parts.extend(_mark_ticks(picture))
    first_call_row = 0
    if picture.prose:
        parts.extend(_prose_lane(picture, TOP))
        first_call_row = 1
    for row, lane in enumerate(picture.lanes, start=first_call_row):
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


def ms_label(ms: int, span: float) -> str:
    """A time tick: milliseconds when the whole axis is under a second, else seconds."""
    if span < 1000:
        return f"{ms} ms"
    return f"{ms / 1000:g} s"


def _ticks(picture: Picture) -> list[tuple[float, str]]:
    """(x, label) of the axis's ticks: round frame numbers, or round times
    since the first frame arrived."""
    if picture.axis == TIME and picture.clock is not None:
        clock = picture.clock
        span = clock.end - clock.start
        return [
            (picture.x_ms(clock.start + ms), ms_label(ms, span)) for ms in nice_ticks(int(span))
        ]
    return [(picture.x(frame), str(frame)) for frame in nice_ticks(picture.total - 1)]


def _axis(picture: Picture, height: int) -> list[str]:
    bottom = height - 16
    out = [f'<line class="tl-axis" x1="{LEFT}" y1="{bottom}" x2="{RIGHT}" y2="{bottom}"/>']
    for x, label in _ticks(picture):
        # The first tick starts at the axis, clear of the unit's word on its left.
        anchor = "start" if x < LEFT + 15 else "end" if x > RIGHT - 30 else "middle"
        out.append(_text("tl-tick", x, height - 3, label, anchor))
    unit = "arrived" if picture.axis == TIME else "frame"
    out.append(_text("tl-tick", LEFT - 6, height - 3, unit, "end"))
    out.append('<text class="tl-label" x="4" y="14">marks</text>')
    return out


def _mark_ticks(picture: Picture) -> list[str]:
    out = []
    for frame, marks in picture.marks.items():
        kinds = ", ".join(marks)
        words = "; ".join(filter(None, (mark_words(mark) for mark in marks)))
        title = f"frame {frame}: {kinds}" + (f" ({words})" if words else "")
        x = picture.x(frame)
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


def _bars(
    picture: Picture, runs: list[list[int]], what: str, css: str, y: float, h: int
) -> list[str]:
    """A bar per run, each a link to the run's first frame."""
    out = []
    for first, last, count in runs:
        x0, x1 = picture.x(first), picture.x(last)
        plural = "s" if count != 1 else ""
        title = f"{what}: {count} frame{plural} carried it, {first}\u2013{last}"
        width = max(x1 - x0, MIN_BAR)
        shape = f'<rect class="{css}" x="{x0}" y="{y}" width="{width}" height="{h}"/>'
        out.append(_link(picture, first, title, shape))
    return out


def _prose_lane(picture: Picture, y: int) -> list[str]:
    """The text and reasoning, in one lane: reasoning above, text below."""
    mid = y + LANE_HEIGHT / 2
    label = " / ".join(PROSE_LABELS[kind] for kind in picture.prose)
    out = [
        f'<text class="tl-label tl-prose-label" x="4" y="{mid + 4}">{escape(label)}</text>',
        f'<line class="tl-lane" x1="{LEFT}" y1="{mid}" x2="{RIGHT}" y2="{mid}"/>',
    ]
    for kind, runs in picture.prose.items():
        top = mid - 6 if kind == "reasoning" else mid + 1
        out.extend(_bars(picture, runs, kind, f"tl-{kind}", top, 5))
    return out


def _open_span(picture: Picture, lane: Lane, mid: float) -> list[str]:
    """While the call was open: from its identity to where it settled or
    turned invalid (or to the end, when it never did)."""
    if lane.started is None:
        return []
    end = lane.settled if lane.settled is not None else lane.invalid
    x0 = picture.x(lane.started)
    x1 = picture.x(end) if end is not None else RIGHT
    return [f'<line class="tl-open" x1="{x0}" y1="{mid}" x2="{x1}" y2="{mid}"/>']


def _lane(picture: Picture, lane: Lane, y: int) -> list[str]:
    mid = y + LANE_HEIGHT / 2
    out = [
        f'<text class="tl-label" x="4" y="{mid + 4}"><title>{escape(lane.title)}</title>'
        f"{escape(lane.label)}</text>",
        f'<line class="tl-lane" x1="{LEFT}" y1="{mid}" x2="{RIGHT}" y2="{mid}"/>',
        *_open_span(picture, lane, mid),
        *_bars(picture, lane.runs, f"#{lane.position}", "tl-frag", mid - 4, 8),
    ]
    for kind, frame in (
        ("identity", lane.started),
        ("settled", lane.settled),
        ("invalid", lane.invalid),
    ):
        if frame is not None:
            title = f"#{lane.position} {kind} at frame {frame}"
            out.append(_link(picture, frame, title, _shape(kind, picture.x(frame), mid)))
    return out


def _refusal(picture: Picture, height: int) -> list[str]:
    if picture.refusal is None:
        return []
    frame, code = picture.refusal
    x = picture.x(frame)
    shape = f'<rect class="tl-refusal" x="{x - 1.5}" y="0" width="3" height="{height - 16}"/>'
    return [_link(picture, frame, f"refusal {code} at frame {frame}", shape)]
