"""What the timeline picture tests read out of a page: the SVG, its marks
(href, title) and where each mark is drawn."""

from __future__ import annotations

import re

MARK = re.compile(
    r'<a href="([^"]+)"><title>([^<]*)</title><(?:path|rect) class="([^"]+)" (?:d="M|x=")([\d.]+)'
)


def svg(page: str) -> str:
    match = re.search(r'<svg class="tl-picture".*?</svg>', page, re.S)
    assert match, "no timeline"
    return match.group(0)


def links(picture: str) -> list[tuple[str, str]]:
    """(href, title) of every mark."""
    return re.findall(r'<a href="([^"]+)"><title>([^<]*)</title>', picture)


# How far left of its frame's x each shape starts (bars start at their first frame).
SHAPE_OFFSET = {"tl-anomaly": 4, "tl-drop": 4, "tl-invalid": 5, "tl-settle": 1.5, "tl-refusal": 1.5}


def marks(picture: str) -> list[tuple[str, str, str, float]]:
    """(href, title, css class, x of the frame it marks) of every mark."""
    return [
        (href, title, css, round(float(x) + SHAPE_OFFSET.get(css, 0), 1))
        for href, title, css, x in MARK.findall(picture)
    ]


def frame_of(href: str) -> int:
    """The frame a permalink opens."""
    match = re.search(r"/frames/(\d+)/#f-(\d+)$", href)
    assert match and match.group(1) == match.group(2), href
    return int(match.group(1))
