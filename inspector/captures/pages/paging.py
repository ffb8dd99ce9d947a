"""Paging arithmetic shared by the pages: which page of a numbered sequence
is shown, read from a query parameter that may be anything, and the links to
its neighbours.

Pages read their rows by number range (`start`/`stop`), never OFFSET, so a
page deep into 100k frames costs what the first one does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_QUERY_DIGITS = 18  # longer numbers are no page or position of anything stored


@dataclass(frozen=True)
class Pager:
    """One page of a numbered sequence, 1-based."""

    number: int
    per_page: int
    total: int

    @property
    def count(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def start(self) -> int:
        """First item (0-based) on this page."""
        return (self.number - 1) * self.per_page

    @property
    def stop(self) -> int:
        return min(self.start + self.per_page, self.total)

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.count

    @property
    def previous(self) -> int:
        return self.number - 1

    @property
    def next(self) -> int:
        return self.number + 1


def query_int(value: Any) -> int | None:
    """A query parameter read as a non-negative int, or None when it is not one.

    Only ASCII digits count: `str.isdigit()` accepts '²', which int() then
    refuses (a 500), and int() itself accepts spaces, signs, underscores and
    other scripts' digits.  An int passes through (a page worked out here)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if value >= 0 else None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_QUERY_DIGITS:
        return None
    if not value.isascii() or not value.isdigit():
        return None
    return int(value)


def pager(requested: Any, per_page: int, total: int) -> Pager:
    """The page asked for, clamped to the pages there are; page 1 when what
    was asked is not a number."""
    number = query_int(requested) or 1
    last = max(1, -(-total // per_page))
    return Pager(min(max(number, 1), last), per_page, total)


def page_holding(item: int, per_page: int) -> int:
    """The 1-based page that holds the 0-based `item`."""
    return item // per_page + 1


def page_share(total: int, most: int, sharing: int) -> int:
    """Each of `sharing` items' part of a page's `total`, at most `most`.

    A page of calls shares its fragment rows and its pretty-printed arguments
    among the calls on it, so that what it renders does not grow with how long
    the calls are: ten calls of 10k fragments each show 10 fragments each (100
    rows), where one such call shows 25."""
    return max(1, min(most, total // max(1, sharing)))


def pager_links(page: Pager, url: Callable[[int], str]) -> dict[str, str]:
    """The previous, next, first and last links of a pager ("" for none)."""
    return {
        "previous": url(page.previous) if page.has_previous else "",
        "next": url(page.next) if page.has_next else "",
        "first": url(1),
        "last": url(page.count),
    }
