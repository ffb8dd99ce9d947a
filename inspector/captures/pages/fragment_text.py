"""How one fragment of a call's arguments is shown (on its card and in the
state at a frame): the text so far up to it, whose window is cut out by the
database so a page never loads a whole (possibly huge) arguments text, and
the argument scanner's state after it.

Stream content is untrusted: the only markup built here goes through
`format_html`, which escapes every argument.  A live capture's fragment
rows are rendered here too (`live_cards.py`): the browser repeats nothing.
"""

from __future__ import annotations

from django.db.models import F, Value
from django.db.models.functions import Greatest, Least, Substr
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..models import Fragment

WINDOW = 300  # characters of text so far shown before a fragment
FRAGMENT_SHOWN = 2000  # a longer fragment is shown cut in its middle


def json_state(fragment: Fragment) -> list[tuple[str, str]]:
    """The scanner's state after a fragment, as (label, tone) chips."""
    chips = []
    if fragment.invalid_from is not None:
        chips.append((f"invalid from offset {fragment.invalid_from}", "bad"))
    if fragment.complete:
        chips.append(("complete", "ok"))
    else:
        chips.append((f"depth {fragment.depth}", "muted"))
        if fragment.in_string:
            chips.append(("inside a string", "muted"))
    return chips


def piece_state(fragment: Fragment, form: str) -> list[tuple[str, str]]:
    """A fragment's state chips as its call's arguments are made: the JSON
    scanner's state, or what a free-text piece or a Gemini path piece is."""
    if form == "path":
        if fragment.invalid_from is not None and not fragment.state:
            return [("piece could not be applied", "bad")]
        return [("path piece: sets a value in the arguments object", "muted")]
    if form == "text":
        return [("free text: not checked as JSON", "muted")]
    return json_state(fragment)


def object_so_far(state: str) -> SafeString:
    """A Gemini call's arguments object after a path piece, escaped and cut."""
    if not state:
        return format_html('<span class="muted">{}</span>', "(not shown: too large or not applied)")
    return format_html("{}", cut_middle(state, FRAGMENT_SHOWN * 4))


def cut_middle(text: str, limit: int) -> str:
    """`text`, or when longer than `limit` its two ends around a count of what was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\u2026[{len(text) - 2 * half} characters]\u2026{text[-half:]}"


def text_so_far(before: str, offset: int, fragment: str) -> SafeString:
    """The text up to and including a fragment: `before` (the WINDOW
    characters that precede it, or fewer at the start), then the fragment in
    a <mark>, all escaped."""
    ellipsis = "\u2026" if offset > WINDOW else ""
    return format_html(
        '<span class="ellipsis">{}</span>{}<mark>{}</mark>',
        ellipsis,
        before[-WINDOW:],
        cut_middle(fragment, FRAGMENT_SHOWN),
    )


def window_before(offset_field: str, text_field: str = "arguments_text") -> Substr:
    """An annotation: the WINDOW characters of a call's arguments (`text_field`)
    before the offset held in `offset_field`, cut out by the database so a page
    never loads a whole (possibly huge) arguments text."""
    start = Greatest(F(offset_field) - WINDOW + 1, Value(1))
    return Substr(text_field, start, Least(F(offset_field), Value(WINDOW)))
