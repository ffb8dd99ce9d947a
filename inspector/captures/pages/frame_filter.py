"""The frames panel's filters (`?frames=`): only the frames that touched call
#N (`call-N`), only marked ones (`anomalies`: an anomaly, a dropped delta or
the refusal), only those that carried text or reasoning (`text`).

A filtered panel is paged by frame number, never OFFSET: `?from=N` shows
the first FRAMES_PER_PAGE matching frames numbered N or more, `?before=N`
the last ones numbered below N.  At most two queries whatever the
capture's size: how many match with the first and last of them (for the
links), unless the strict assembly's timeline data already counted them
(`known_ends`), and the page.  Every link is a plain URL: the filters work
without JavaScript.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db import connection
from django.db.models import BooleanField, Count, Max, Min, QuerySet
from django.db.models.expressions import RawSQL

from ..models import Capture, Frame
from .frames import FRAMES_PER_PAGE, frame_columns
from .paging import MAX_QUERY_DIGITS, query_int

_CALL = re.compile(rf"call-([0-9]{{1,{MAX_QUERY_DIGITS}}})")
NAMED = {"anomalies": "with an anomaly, a drop or the refusal", "text": "with text or reasoning"}


@dataclass(frozen=True)
class FrameFilter:
    """One filter: its query value ("" for none) and, for `call-N`, N."""

    value: str = ""
    call: int | None = None

    def __bool__(self) -> bool:
        return bool(self.value)

    @property
    def label(self) -> str:
        if self.call is not None:
            return f"touching call #{self.call}"
        return NAMED.get(self.value, "all frames")

    def matching(self, frames: QuerySet[Frame]) -> QuerySet[Frame]:
        """The frames that pass it."""
        if self.value == "anomalies":
            return frames.exclude(marks=[])
        if self.value == "text":
            return frames.filter(has_text=True)
        assert self.call is not None
        return touching_call(frames, self.call)


NO_FILTER = FrameFilter()


def frame_filter(value: Any) -> FrameFilter:
    """The filter a query value names; none for anything else."""
    if not isinstance(value, str):
        return NO_FILTER
    if value in NAMED:
        return FrameFilter(value)
    found = _CALL.fullmatch(value)
    return FrameFilter(value, int(found.group(1))) if found else NO_FILTER


def touching_call(frames: QuerySet[Frame], position: int) -> QuerySet[Frame]:
    """Frames whose `calls` hold `position`: JSON containment on PostgreSQL;
    SQLite's JSON1 has no containment operator Django uses, so json_each."""
    if connection.vendor == "postgresql":
        return frames.filter(calls__contains=[position])
    table = Frame._meta.db_table
    touched = RawSQL(
        f'EXISTS (SELECT 1 FROM json_each("{table}"."calls") WHERE json_each.value = %s)',
        (position,),
        output_field=BooleanField(),
    )
    return frames.annotate(touches_call=touched).filter(touches_call=True)


@dataclass(frozen=True)
class FilteredPage:
    """One page of a filtered frames panel and its links ("" for none)."""

    filter: FrameFilter
    total: int  # frames that match
    frames: list[Frame]
    previous: str
    next: str
    first: str
    last: str


@dataclass(frozen=True)
class Ends:
    """How many frames match, the first, and a frame number at or after the
    last (the timeline's runs end at a bucket's end); `numbers`: all of
    them, when known."""

    total: int
    first: int | None
    last: int | None
    numbers: list[int] | None = None


def known_ends(chosen: FrameFilter, timeline: Any) -> Ends | None:
    """What the strict assembly's timeline data (`timeline_data.summarize`,
    computed when the capture was stored) already counted: the marked
    frames (unless there were more than it keeps) and each drawn call's
    runs of frames.  None when it does not say (text; a call past the
    drawn lanes; a live capture, which has no timeline yet)."""
    if not isinstance(timeline, dict):
        return None
    if chosen.value == "anomalies" and not timeline.get("marks_cut"):
        numbers = [frame for frame, _ in timeline.get("marks", [])]
        return Ends(len(numbers), min(numbers, default=None), max(numbers, default=None), numbers)
    for lane in timeline.get("lanes", []) if chosen.call is not None else []:
        if lane["position"] == chosen.call and lane["runs"]:
            runs = lane["runs"]
            return Ends(sum(run[2] for run in runs), runs[0][0], runs[-1][1])
    return None


def filtered_frames(
    capture: Capture, chosen: FrameFilter, params: Any, base_url: str, timeline: Any = None
) -> FilteredPage:
    """The page of matching frames `params` (?from= or ?before=) asks for;
    `base_url` is the panel's URL with the filter (a `?` already in it);
    `timeline`: the strict assembly's, which spares the counting query
    where it already counted (`known_ends`)."""
    matching = chosen.matching(Frame.objects.filter(capture=capture))
    ends = known_ends(chosen, timeline) or _counted(matching)
    frames, more_after = _page(matching, ends, params)
    shown = [frame.number for frame in frames]
    more_before = bool(shown) and ends.first is not None and ends.first < shown[0]
    return FilteredPage(
        filter=chosen,
        total=ends.total,
        frames=frames,
        previous=f"{base_url}&before={shown[0]}#frames" if more_before else "",
        next=f"{base_url}&from={shown[-1] + 1}#frames" if shown and more_after else "",
        first=f"{base_url}#frames",
        last=f"{base_url}&before={ends.last + 1}#frames" if ends.last is not None else "",
    )


def _counted(matching: QuerySet[Frame]) -> Ends:
    found = matching.aggregate(total=Count("pk"), first=Min("number"), last=Max("number"))
    return Ends(found["total"], found["first"], found["last"])


def _page(matching: QuerySet[Frame], ends: Ends, params: Any) -> tuple[list[Frame], bool]:
    """The frames shown, and whether more match after them."""
    start, before = query_int(params.get("from")), query_int(params.get("before"))
    descending = start is None and before is not None
    if ends.numbers is not None:
        return _numbered_page(matching, ends.numbers, start, before if descending else None)
    if descending:
        rows = frame_columns(matching.filter(number__lt=before).order_by("-number"))
        return list(rows[:FRAMES_PER_PAGE])[::-1], ends.last is not None and before <= ends.last
    rows = frame_columns(matching.filter(number__gte=start or 0).order_by("number"))
    found = list(rows[: FRAMES_PER_PAGE + 1])
    return found[:FRAMES_PER_PAGE], len(found) > FRAMES_PER_PAGE


def _numbered_page(
    matching: QuerySet[Frame], numbers: list[int], start: int | None, before: int | None
) -> tuple[list[Frame], bool]:
    """A page of frames whose numbers are known: read by number (the
    unique index), not found by scanning."""
    if before is not None:
        stop = bisect_left(numbers, before)
        chosen = numbers[max(0, stop - FRAMES_PER_PAGE) : stop]
    else:
        at = bisect_left(numbers, start or 0)
        chosen, stop = numbers[at : at + FRAMES_PER_PAGE], at + FRAMES_PER_PAGE
    frames = frame_columns(matching.filter(number__in=chosen).order_by("number"))
    return list(frames), stop < len(numbers)


def panel_url(capture_url: str, **params: Any) -> str:
    """The capture page with these query parameters (falsy ones left out),
    always with a `?` so that more can be added with `&`."""
    kept = {key: value for key, value in params.items() if value}
    return f"{capture_url}?{urlencode(kept)}"


CALL_CHOICES = 200  # calls offered in the filter's list (any call-N works as a URL)


def panel_links(
    capture_url: str, path: str, params: Any, chosen: FrameFilter, raw_open: bool
) -> dict[str, Any]:
    """The filter links (each keeps ?raw=1), the raw toggle (keeps where the
    panel is), and what the filter form needs."""
    raw = "1" if raw_open else ""
    toggled = params.copy()
    if raw_open:
        toggled.pop("raw", None)
    else:
        toggled["raw"] = "1"
    return {
        "all": panel_url(capture_url, raw=raw) + "#frames",
        "anomalies": panel_url(capture_url, frames="anomalies", raw=raw) + "#frames",
        "text": panel_url(capture_url, frames="text", raw=raw) + "#frames",
        "raw_toggle": f"{path}?{toggled.urlencode()}#frames",
        "raw": raw,
        "chosen": chosen,
    }


def call_choices(call_count: int) -> range:
    """The calls the filter form lists."""
    return range(min(call_count, CALL_CHOICES))
