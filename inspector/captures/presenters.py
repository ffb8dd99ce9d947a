"""Shaping stored rows into what the pages show.

Theory of operation: a capture can hold 100k frames and a call 100k argument
fragments, so a page never reads "all of" anything.  Frames are read one page
at a time by number range (the (capture, number) unique index, never OFFSET),
fragments likewise by seq range, and long texts (a frame's raw text, the
assembled text, the lenient calls' arguments) arrive already cut in the
database (`Substr`).  A shown call's arguments text is read once, whole: the
text-so-far windows and the pretty-printed arguments are cut from it.  A
capture's raw bytes and its result documents are read only by the download
views.  Every function here issues a fixed number of queries, whatever the
size.

Stream content is untrusted: the only markup built here goes through
`format_html`, which escapes every argument.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, Count, F, JSONField, Max, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Greatest, Least, Length, Substr
from django.http import Http404
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from inspector.assembly import DROP_REASONS, REFUSAL_CODES, STRICT

from .models import Assembly, Call, Capture, Fragment, Frame

FRAMES_PER_PAGE = 100
FRAGMENTS_PER_PAGE = 25  # fragments of one call shown at a time, at most
FRAGMENT_ROWS = 100  # fragment rows of all the calls on a page, at most
CALLS_PER_PAGE = 10
STATE_CALLS = 20  # calls shown in the "state at frame n" panel
LENIENT_CALLS = 20  # calls of the lenient assembly listed where policies disagree
WINDOW = 300  # characters of text so far shown before a fragment
FRAGMENT_SHOWN = 2000  # a longer fragment is shown cut in its middle
RAW_SHOWN = 2000  # characters of a frame's raw text shown in the frames table
TEXT_SHOWN = 4000  # characters of the assembled text shown
PRETTY_SHOWN = 20_000  # characters of pretty-printed arguments shown, at most
PRETTY_PAGE = 40_000  # characters of pretty-printed arguments of all the calls on a page
TIMELINE_SHOWN = 60  # identity timeline rows shown per call

# What the capture page reads of the capture it was derived from (joined in).
ORIGINAL_FIELDS = ("slug", "title", "frame_count", "byte_size", "refusal_code")
DERIVATIVES_SHOWN = 20  # captures derived from this one listed on its page
ATTEMPTS_SHOWN = 20  # attempts of one group shown in the capture page's strip

EVENT_LABELS = {
    "toolcall_start": ("started", "ok"),
    "settled": ("settled: the arguments' root object closed", "ok"),
    "toolcall_end": ("ended: every call passed its checks", "ok"),
    "index_reused": ("index reused: a new id on an index another call holds", "warn"),
    "index_changed": (
        "index changed: a later delta sent another index (the first is kept)",
        "warn",
    ),
    "guessed_continuation": ("continuation guessed (lenient)", "warn"),
    "arguments_not_string": ("arguments were not a string (serialised as JSON)", "warn"),
}


# --- pages -------------------------------------------------------------------------------


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


MAX_QUERY_DIGITS = 18  # longer numbers are no page or position of anything stored


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
    return item // per_page + 1


def page_share(total: int, most: int, sharing: int) -> int:
    """Each of `sharing` items' part of a page's `total`, at most `most`.

    A page of calls shares its fragment rows and its pretty-printed arguments
    among the calls on it, so that what it renders does not grow with how long
    the calls are: ten calls of 10k fragments each show 10 fragments each (100
    rows), where one such call shows 25."""
    return max(1, min(most, total // max(1, sharing)))


# --- the capture and its assemblies ------------------------------------------------------


def get_capture(slug: str) -> Capture:
    """The capture, with the one it was derived from (joined), how many were
    derived from it, and the newest DERIVATIVES_SHOWN of those (its
    `derivatives_shown`): one query, the derivatives being rows of the same
    select (`slug = X OR derived_from = (the id of X)`, both indexed)."""
    count = (
        Capture.objects.filter(derived_from=OuterRef("pk"))
        .order_by()
        .values("derived_from")
        .annotate(n=Count("pk"))
        .values("n")
    )
    asked = Capture.objects.filter(slug=slug).order_by().values("pk")[:1]
    rows = list(
        Capture.objects.select_related("derived_from")
        .only(*Capture.PAGE_FIELDS, *(f"derived_from__{name}" for name in ORIGINAL_FIELDS))
        .filter(Q(slug=slug) | Q(derived_from_id=Subquery(asked)))
        .annotate(
            derivative_count=Coalesce(Subquery(count), 0),
            is_derivative=Case(When(slug=slug, then=Value(0)), default=Value(1)),
        )
        .order_by("is_derivative", "-created", "-id")[: DERIVATIVES_SHOWN + 1]
    )
    if not rows or rows[0].slug != slug:
        raise Http404("no such capture")
    capture = rows[0]
    capture.derivatives_shown = rows[1:]
    return capture


def call_count() -> Coalesce:
    """An annotation for assembly rows: how many calls each holds (0 for
    none), counted in the same query."""
    counted = (
        Call.objects.filter(assembly=OuterRef("pk"))
        .order_by()
        .values("assembly")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted), 0)


def assemblies(capture: Capture) -> dict[str, Assembly]:
    """Both policies' assemblies, without their result documents, one query."""
    rows = (
        Assembly.objects.filter(capture=capture)
        .defer("result_json", "text")
        .annotate(
            text_head=Substr("text", 1, TEXT_SHOWN),
            text_length=Length("text"),
            call_count=call_count(),
        )
    )
    return {row.policy: row for row in rows}


def usage_items(usage: Any) -> list[tuple[str, str]]:
    if not isinstance(usage, dict):
        return []
    items = []
    for key, value in usage.items():
        shown = value if isinstance(value, int | float | str) else json.dumps(value)
        items.append((str(key), str(shown)))
    return items


# --- derived captures (the minimizer's) -------------------------------------------------


@dataclass
class Derivation:
    """How a capture was made from another: "minimized from <original>:
    keeps CODE, N of M frames, X of Y bytes"."""

    kind: str  # "minimized", or the derivation text when it reads otherwise
    keeps: str
    original: Capture | None  # None once the original was deleted
    frames: int
    bytes: int


def derivation(capture: Capture) -> Derivation | None:
    if not capture.derivation and capture.derived_from_id is None:
        return None
    kind, _, keeps = capture.derivation.partition(": keeps ")
    if not keeps:
        kind, keeps = capture.derivation or "derived", ""
    return Derivation(
        kind=kind,
        keeps=keeps,
        original=capture.derived_from,
        frames=capture.frame_count,
        bytes=capture.byte_size,
    )


def derivatives(capture: Capture) -> list[Capture]:
    """The captures made from this one, newest first, as `get_capture` read
    them (no query)."""
    return list(getattr(capture, "derivatives_shown", []))


# --- retries as attempts -----------------------------------------------------------------


@dataclass
class Attempt:
    number: int | None
    slug: str
    href: str
    outcome: str
    refusal_code: str
    retryable: bool | None
    usage: str
    current: bool


def usage_summary(usage: Any) -> str:
    """A short reading of a usage object: "12 in · 30 out", else its items."""
    if not isinstance(usage, dict) or not usage:
        return ""
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return f"{prompt} in \u00b7 {completion} out"
    return " \u00b7 ".join(f"{key} {value}" for key, value in usage_items(usage)[:3])


@dataclass
class Attempts:
    """The strip of one group's attempts; `earlier`/`later`: some were left out."""

    shown: list[Attempt]
    earlier: bool
    later: bool


def attempts(capture: Capture) -> Attempts | None:
    """The attempts of the capture's group in order, with the strict usage of
    each read in the same query: one query.  At most ATTEMPTS_SHOWN, around
    this capture's attempt when a group is longer."""
    if not capture.attempt_group:
        return None
    usage = Assembly.objects.filter(capture=OuterRef("pk"), policy=STRICT).values("usage")[:1]
    rows = (
        Capture.objects.filter(attempt_group=capture.attempt_group)
        .order_by("attempt", "created", "id")
        .only("slug", "attempt", "outcome", "refusal_code", "retryable")
        .annotate(strict_usage=Subquery(usage, output_field=JSONField()))
    )
    after = max(0, (capture.attempt or 0) - 1 - ATTEMPTS_SHOWN // 2)
    if after:
        rows = rows.filter(attempt__gt=after)
    found = list(rows[: ATTEMPTS_SHOWN + 1])
    shown = [
        Attempt(
            number=row.attempt,
            slug=row.slug,
            href=row.get_absolute_url(),
            outcome=row.outcome,
            refusal_code=row.refusal_code,
            retryable=row.retryable,
            usage=usage_summary(row.strict_usage),
            current=row.pk == capture.pk,
        )
        for row in found[:ATTEMPTS_SHOWN]
    ]
    return Attempts(shown=shown, earlier=after > 0, later=len(found) > ATTEMPTS_SHOWN)


# --- frames ------------------------------------------------------------------------------


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


def mark_tone(mark: str) -> str:
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
    return list(
        Frame.objects.filter(capture=capture, number__gte=page.start, number__lt=page.stop)
        .order_by("number")
        .only("number", "kind", "arrived_ms", "calls", "marks")
        .annotate(raw_head=Substr("raw", 1, RAW_SHOWN), raw_length=Length("raw"))
    )


def frame_rows(
    capture: Capture, frames: list[Frame], *, focus: int | None, call_link
) -> list[FrameRow]:
    rows = []
    for frame in frames:
        marks = [(mark, mark_tone(mark)) for mark in frame.marks]
        tones = {tone for _, tone in marks}
        classes = [f"kind-{frame.kind}"] + [f"is-{tone}" for tone in sorted(tones)]
        if frame.number == focus:
            classes.append("is-focus")
        rows.append(
            FrameRow(
                number=frame.number,
                kind=frame.kind,
                time="" if frame.arrived_ms is None else f"{frame.arrived_ms:.1f} ms",
                raw=frame.raw_head,
                raw_cut=max(0, frame.raw_length - RAW_SHOWN),
                calls=[{"position": p, "href": call_link(p)} for p in frame.calls],
                marks=marks,
                classes=" ".join(classes),
                focus=frame.number == focus,
                permalink=frame_permalink(capture.slug, frame.number),
            )
        )
    return rows


def frame_permalink(slug: str, number: int) -> str:
    return reverse("frame", args=[slug, number]) + f"#f-{number}"


# --- calls -------------------------------------------------------------------------------


@dataclass
class TimelineRow:
    frame: int | None
    last_frame: int | None
    count: int
    label: str
    tone: str


def timeline_rows(
    timeline: list[dict[str, Any]], *, upto: int | None = None, refusal_message: str = ""
) -> tuple[list[TimelineRow], int]:
    """The call's identity timeline; a run of ignored repeats (`"id": ""`
    in every delta, say) is folded into one row per field and value.  At
    most TIMELINE_SHOWN rows, and how many were left out."""
    rows: list[TimelineRow] = []
    run: dict[tuple[str, str], TimelineRow] = {}  # the current run of ignored repeats
    for entry in timeline:
        frame = entry.get("frame")
        if upto is not None and (frame is None or frame > upto):
            continue
        if entry.get("event") != "identity_ignored":
            run = {}
        else:
            key = (str(entry.get("field")), json.dumps(entry.get("value")))
            if key in run:
                run[key].count += 1
                run[key].last_frame = frame
                continue
        label, tone = timeline_label(entry, refusal_message)
        rows.append(TimelineRow(frame, frame, 1, label, tone))
        if entry.get("event") == "identity_ignored":
            run[key] = rows[-1]
    hidden = max(0, len(rows) - TIMELINE_SHOWN)
    return rows[:TIMELINE_SHOWN], hidden


def timeline_label(entry: dict[str, Any], refusal_message: str = "") -> tuple[str, str]:
    event = entry.get("event", "")
    field_name = entry.get("field", "")
    value = entry.get("value")
    if event == "identity":
        return f"{field_name} established: {value}", "ok"
    if event == "identity_ignored":
        return f"{field_name} {json.dumps(value)} ignored (identity is never erased)", "muted"
    if event == "refusal":
        text = f"refused {value}"
        return (f"{text}: {refusal_message}" if refusal_message else text), "bad"
    if event in EVENT_LABELS:
        return EVENT_LABELS[event]
    return event, "muted"


def identity_at(timeline: list[dict[str, Any]], upto: int | None = None) -> dict[str, Any]:
    """The id and name a call held (and where each was established) by frame `upto`."""
    held: dict[str, Any] = {"id": None, "id_frame": None, "name": None, "name_frame": None}
    for entry in timeline:
        frame = entry.get("frame")
        if upto is not None and (frame is None or frame > upto):
            continue
        if entry.get("event") == "identity" and entry.get("field") in ("id", "name"):
            if held[entry["field"]] is None:
                held[entry["field"]] = entry.get("value")
                held[entry["field"] + "_frame"] = frame
    return held


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


def cut_middle(text: str, limit: int) -> str:
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


def window_before(offset_field: str, text_field: str = "arguments_text"):
    """An annotation: the WINDOW characters of a call's arguments (`text_field`)
    before the offset held in `offset_field`, cut out by the database so a page
    never loads a whole (possibly huge) arguments text."""
    start = Greatest(F(offset_field) - WINDOW + 1, Value(1))
    return Substr(text_field, start, Least(F(offset_field), Value(WINDOW)))


@dataclass
class FragmentRow:
    seq: int
    frame: int
    offset: int
    length: int
    fragment: str
    so_far: SafeString
    state: list[tuple[str, str]]
    anchor: str
    permalink: str
    focus: bool


@dataclass
class CallCard:
    call: Call
    anchor: str
    identity: dict[str, Any]
    first_seen: int | None
    timeline: list[TimelineRow]
    timeline_hidden: int
    final: str | None  # pretty-printed arguments
    final_note: str
    error: dict[str, Any] | None
    error_context: SafeString | None
    not_checked: str
    is_refusal_call: bool
    fragments: list[FragmentRow] = field(default_factory=list)
    fragment_pager: Pager | None = None
    fragment_links: dict[str, str] = field(default_factory=dict)


def pretty_arguments(text: str, length: int, shown: int = PRETTY_SHOWN) -> tuple[str, str]:
    """Pretty-printed arguments of a call that passed, at most `shown`
    characters, and a note when cut.  `text` is the head of the arguments
    (all of them when `length` fits)."""
    if length > len(text):
        head = text[:shown]
        return head + "\u2026", f"{length} characters; the first {len(head)} shown as received"
    try:
        pretty = json.dumps(json.loads(text or "{}"), indent=2, ensure_ascii=False)
    except ValueError:  # the strict parser accepted it; keep it as received
        pretty = text
    if len(pretty) > shown:
        return pretty[:shown] + "\n\u2026", f"cut at {shown} characters"
    return pretty, ""


AFTER_ERROR = 80  # characters shown after the offset where arguments went wrong


def _text_near(call: Call, offset: Any) -> str:
    """The arguments from WINDOW characters before `offset` to AFTER_ERROR
    after it (one query, for the one call that failed)."""
    if not isinstance(offset, int) or offset < 0:
        return ""
    start = max(0, offset - WINDOW)
    return (
        Call.objects.filter(pk=call.pk)
        .annotate(near=Substr("arguments_text", start + 1, offset - start + 1 + AFTER_ERROR))
        .values_list("near", flat=True)
        .get()
    )


def error_context(near: str, offset: Any) -> SafeString | None:
    """The arguments around the offset where they stopped being one JSON
    object; `near` starts WINDOW characters before it (fewer at the start)."""
    if not isinstance(offset, int) or offset < 0:
        return None
    at = min(offset, WINDOW)
    return format_html(
        '<span class="ellipsis">{}</span>{}<mark class="bad">{}</mark>{}',
        "\u2026" if offset > WINDOW else "",
        near[:at],
        near[at : at + 1] or "\u2205",
        near[at + 1 :],
    )


def call_cards(
    capture: Capture,
    strict: Assembly,
    page: Pager,
    *,
    fragment_pages: dict[int, int],
    focus: int | None,
    link,
) -> list[CallCard]:
    """The call cards of one page of strict calls, each with one page of its
    fragments: two queries whatever the number of calls or fragments.

    A call's fragment page is the one `fragment_pages` asks for (?call=&frag=),
    else at a frame permalink (`focus`) the page holding its fragment at that
    frame (its last one before, when the frame did not touch it), else the first.
    The calls on the page share FRAGMENT_ROWS fragment rows and PRETTY_PAGE
    characters of final arguments (`page_share`)."""
    on_page = page.stop - page.start
    per_page = page_share(FRAGMENT_ROWS, FRAGMENTS_PER_PAGE, on_page)
    pretty_shown = page_share(PRETTY_PAGE, PRETTY_SHOWN, on_page)
    calls = Call.objects.filter(
        assembly=strict, position__gte=page.start, position__lt=page.stop
    ).annotate(
        first_fragment_frame=Subquery(_first_fragment_frame()),
        args_length=Length("arguments_text"),
        args_head=Substr("arguments_text", 1, PRETTY_SHOWN),
    )
    if focus is not None:
        calls = calls.annotate(focus_seq=Subquery(_fragment_seq_at(focus)))
    calls = list(calls.order_by("position").defer("arguments", "arguments_text"))
    cards = [call_card(capture, strict, call, pretty_shown) for call in calls]
    pagers = {
        card.call.pk: pager(
            fragment_pages.get(card.call.position, _focus_page(card.call, per_page)),
            per_page,
            card.call.fragment_count,
        )
        for card in cards
    }
    condition = Q(pk__in=[])
    for call_pk, fragment_pager in pagers.items():
        condition |= Q(call_id=call_pk, seq__gte=fragment_pager.start, seq__lt=fragment_pager.stop)
    by_call: dict[int, list[Fragment]] = {}
    for fragment in Fragment.objects.filter(condition).order_by("call_id", "seq"):
        by_call.setdefault(fragment.call_id, []).append(fragment)
    prefixes = _prefixes({pk: rows[0] for pk, rows in by_call.items() if rows[0].offset})
    for card in cards:
        card.fragment_pager = pagers[card.call.pk]
        card.fragment_links = link(card.call.position, card.fragment_pager)
        before = prefixes.get(card.call.pk, "")
        card.fragments = []
        for fragment in by_call.get(card.call.pk, []):
            card.fragments.append(fragment_row(capture, card, fragment, focus, before))
            before = (before + fragment.text)[-WINDOW:]
    return cards


def _fragment_seq_at(n: int):
    """For a call (OuterRef), the seq of its first fragment in the last frame
    up to n that held one: the fragment a permalink to frame n points at."""
    return (
        Fragment.objects.filter(call=OuterRef("pk"), frame__lte=n)
        .order_by("-frame", "seq")
        .values("seq")[:1]
    )


def _focus_page(call: Call, per_page: int) -> int:
    """The fragment page holding `focus_seq` (when the call was read with it)."""
    seq = getattr(call, "focus_seq", None)
    return 1 if seq is None else page_holding(seq, per_page)


def _prefixes(first: dict[int, Fragment]) -> dict[int, str]:
    """For calls whose shown fragments don't start at offset 0, the text just
    before the first one: one query, only when some page is not the first.

    Read from the fragments by primary key, joined to their calls: asking the
    calls for `fragments__seq=` made SQLite scan each call's fragments."""
    if not first:
        return {}
    rows = (
        Fragment.objects.filter(pk__in=[fragment.pk for fragment in first.values()])
        .order_by()
        .annotate(before=window_before("offset", "call__arguments_text"))
        .values_list("call_id", "before")
    )
    return dict(rows)


def _first_fragment_frame():
    """For a call (OuterRef), the frame of its first fragment."""
    return Fragment.objects.filter(call=OuterRef("pk")).order_by("seq").values("frame")[:1]


def first_seen(call: Call) -> int | None:
    """The frame where a call was first seen: when it started, or earlier
    when its arguments came before its id and name."""
    frames = [f for f in (call.started_frame, call.first_fragment_frame) if f is not None]
    return min(frames, default=None)


def call_card(
    capture: Capture, strict: Assembly, call: Call, pretty_shown: int = PRETTY_SHOWN
) -> CallCard:
    is_refusal_call = strict.refusal_call == call.position
    timeline, hidden = timeline_rows(
        call.timeline, refusal_message=strict.refusal_message if is_refusal_call else ""
    )
    final = error = context = None
    note = not_checked = ""
    if call.invalid_at:
        error = call.invalid_at
        offset = error.get("offset")
        context = error_context(_text_near(call, offset), offset)
    elif strict.outcome == Capture.Outcome.OK:
        final, note = pretty_arguments(call.args_head, call.args_length, pretty_shown)
    elif is_refusal_call:
        not_checked = f"no final arguments: {strict.refusal_message}"
    elif strict.outcome == Capture.Outcome.REFUSED:
        not_checked = (
            f"not checked: the stream was refused ({strict.refusal_code}) "
            "before every call passed its checks"
        )
    else:
        not_checked = "not checked yet: the stream is still being captured"
    return CallCard(
        call=call,
        anchor=f"call-{call.position}",
        identity=identity_at(call.timeline),
        first_seen=first_seen(call),
        timeline=timeline,
        timeline_hidden=hidden,
        final=final,
        final_note=note,
        error=error,
        error_context=context,
        not_checked=not_checked,
        is_refusal_call=is_refusal_call,
    )


def fragment_anchor(position: int, seq: int) -> str:
    return f"frag-{position}-{seq}"


def fragment_permalink(slug: str, position: int, seq: int, frame: int) -> str:
    calls_page = page_holding(position, CALLS_PER_PAGE)
    query = f"?calls={calls_page}" if calls_page > 1 else ""
    return reverse("frame", args=[slug, frame]) + query + "#" + fragment_anchor(position, seq)


def fragment_row(
    capture: Capture, card: CallCard, fragment: Fragment, focus: int | None, before: str
) -> FragmentRow:
    position = card.call.position
    return FragmentRow(
        seq=fragment.seq,
        frame=fragment.frame,
        offset=fragment.offset,
        length=len(fragment.text),
        fragment=cut_middle(fragment.text, FRAGMENT_SHOWN),
        so_far=text_so_far(before, fragment.offset, fragment.text),
        state=json_state(fragment),
        anchor=fragment_anchor(position, fragment.seq),
        permalink=fragment_permalink(capture.slug, position, fragment.seq, fragment.frame),
        focus=fragment.frame == focus,
    )


# --- the state at one frame --------------------------------------------------------------


@dataclass
class CallState:
    position: int
    identity: dict[str, Any]
    index: int | None
    events: list[TimelineRow]
    events_hidden: int
    touched_here: bool
    fragments_so_far: int
    length_so_far: int
    so_far: SafeString | None
    state: list[tuple[str, str]]
    last_fragment_frame: int | None
    last_seq: int | None
    href: str


def state_at(
    capture: Capture, strict: Assembly, n: int, touched: list[int], call_link
) -> tuple[list[CallState], bool]:
    """Each call touched at or before frame n as it stood after frame n: two
    queries.  Returns the states and whether more calls were left out.

    The calls frame n touched come first, then the others by position, so the
    STATE_CALLS cap never leaves out a call the frame touched (unless it
    touched more than STATE_CALLS)."""
    last_fragment = Fragment.objects.filter(call=OuterRef("pk"), frame__lte=n).order_by(
        "-frame", "-seq"
    )
    calls = list(
        Call.objects.filter(assembly=strict)
        .annotate(
            first_fragment_frame=Subquery(_first_fragment_frame()),
            last_fragment_pk=Subquery(last_fragment.values("pk")[:1]),
            last_offset=Coalesce(Subquery(last_fragment.values("offset")[:1]), Value(0)),
            before=window_before("last_offset"),
        )
        .filter(Q(started_frame__lte=n) | Q(first_fragment_frame__lte=n))
        .annotate(untouched=Case(When(position__in=touched, then=Value(0)), default=Value(1)))
        .defer("arguments", "arguments_text")
        .order_by("untouched", "position")[: STATE_CALLS + 1]
    )
    more = len(calls) > STATE_CALLS
    calls = calls[:STATE_CALLS]
    pks = [call.last_fragment_pk for call in calls if call.last_fragment_pk is not None]
    fragments = {fragment.pk: fragment for fragment in Fragment.objects.filter(pk__in=pks)}
    states = []
    for call in calls:
        fragment = fragments.get(call.last_fragment_pk)
        events, hidden = timeline_rows(call.timeline, upto=n)
        end = fragment.offset + len(fragment.text) if fragment else 0
        states.append(
            CallState(
                position=call.position,
                identity=identity_at(call.timeline, n),
                index=call.index,
                events=events,
                events_hidden=hidden,
                touched_here=call.position in touched,
                fragments_so_far=fragment.seq + 1 if fragment else 0,
                length_so_far=end,
                so_far=(
                    text_so_far(call.before, fragment.offset, fragment.text) if fragment else None
                ),
                state=json_state(fragment) if fragment else [],
                last_fragment_frame=fragment.frame if fragment else None,
                last_seq=fragment.seq if fragment else None,
                href=call_link(call.position),
            )
        )
    return states, more


# --- where the policies disagree ---------------------------------------------------------


@dataclass
class LenientCall:
    position: int
    call_id: str
    name: str
    arguments: str
    arguments_cut: int
    invalid_at: dict[str, Any] | None
    guessed_frames: list[int]


def lenient_calls(lenient: Assembly) -> list[LenientCall]:
    calls = (
        Call.objects.filter(assembly=lenient)
        .order_by("position")
        .only("position", "call_id", "name", "invalid_at", "timeline")
        .annotate(
            args_head=Substr("arguments_text", 1, WINDOW), args_length=Length("arguments_text")
        )[:LENIENT_CALLS]
    )
    return [
        LenientCall(
            position=call.position,
            call_id=call.call_id,
            name=call.name,
            arguments=call.args_head,
            arguments_cut=max(0, call.args_length - WINDOW),
            invalid_at=call.invalid_at,
            guessed_frames=[
                entry["frame"]
                for entry in call.timeline
                if entry.get("event") == "guessed_continuation"
            ],
        )
        for call in calls
    ]
