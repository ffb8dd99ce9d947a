"""The rows of a capture still being recorded, rendered by the capture
page's own templates from the assembler's state: each call's card
(`_call_card.html`, built by `calls.call_card` and `calls.fragment_row`),
the refusal (`_refusal.html`), and which calls and marks each new frame row
carries (`frames.live_frame_row`).  A live viewer only inserts them
(`static/inspector/live.js`), so a live row and the stored one come from one
renderer and say the same.

The recording writes a call's fragments with the scanner state after each
(`fragment_rows`); here the same second scan runs as the cards are
rendered, one `FragmentTrail` per call, keeping the newest page of
fragments only.  While fragments stream in, a call's card is rendered
again at most every RENDER_INTERVAL seconds and a batch renders at most
CARDS_PER_BATCH cards (the rest go out with a later batch, when the stream
pauses, or when the capture closes), so a fast stream costs a bounded
number of renders, spread over its batches; a recorder's throttled cards
also share one budget with every other recording of the process
(`CardBudget`), so many captures at once cost no more.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from django.template.loader import get_template
from django.urls import reverse

from inspector.assembly import Call as AssembledCall
from inspector.assembly.result import Anomaly, Event, Refusal

from ..call_forms import argument_form
from ..fragment_rows import SCAN_FIELDS, FragmentScan, fragment_text
from ..models import Assembly, Call, Capture, Fragment
from ..store import call_fields
from ..timeline_data import frame_marks
from ..timelines import Timelines, add_event, add_refusal, new_timelines
from .calls import (
    CALLS_PER_PAGE,
    FRAGMENT_ROWS,
    FRAGMENTS_PER_PAGE,
    call_card,
    fragment_row,
    near_range,
)
from .dialect_terms import dialect_note
from .fragment_text import WINDOW
from .frames import frame_permalink
from .paging import page_share, pager, pager_links

CARD_TEMPLATE = "inspector/_call_card.html"
REFUSAL_TEMPLATE = "inspector/_refusal.html"
DIALECT_TEMPLATE = "inspector/_dialect_note.html"
RENDER_INTERVAL = 0.5  # seconds between two renders of one call's card, at least
CARDS_PER_BATCH = 1  # cards rendered for one batch of frames while they stream, at most
# While fragments stream, rendering cards takes at most about a tenth of a
# recording's time: after a render that took t, the next waits CARD_SPACING * t
# (a card of a long call takes several ms; a recorder renders them beside its
# frames' batches, in its side lane, and they compete for the interpreter).
CARD_SPACING = 9


class CardBudget:
    """The spacing of throttled cards: after cards that took t to render,
    none before CARD_SPACING * t has passed.  One render at a time: `take`
    closes the budget until `spent` says what it cost.  Each recording's
    cards have one (`LiveCards`), and a process's recorders share another
    (`PROCESS_CARDS`), so however many captures stream calls at once, their
    cards take about a tenth of the process's time (ten captures at 150
    frames/s spent a quarter of it on cards, each rendering each call's card
    every RENDER_INTERVAL: bench/README.md, issue 13's twelfth stop).  A
    stream that pauses gets its held cards whatever the budgets
    (`LiveCapture.held_cards`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._free_at = 0.0
        self._taken_at = 0.0
        self._lock = threading.Lock()

    def open(self, now: float | None = None) -> bool:
        """Whether cards may be rendered at `now` (the budget's clock's by default)."""
        return (self.clock() if now is None else now) >= self._free_at

    def take(self, now: float | None = None) -> bool:
        """Whether cards may be rendered now; if so, none elsewhere until `spent`."""
        with self._lock:
            now = self.clock() if now is None else now
            if now < self._free_at:
                return False
            self._taken_at, self._free_at = now, math.inf
            return True

    def spent(self, seconds: float) -> None:
        """The cards `take` let out cost `seconds` (0: none were rendered)."""
        with self._lock:
            self._free_at = self._taken_at + (CARD_SPACING + 1) * seconds


PROCESS_CARDS = CardBudget()  # the recorders' (`LiveCapture.due_cards`)

# A frame row's notes: (the calls it touched, its marks).
FrameNotes = dict[int, tuple[list[int], list[str]]]


@dataclass
class Rendered:
    """A call's card as a live viewer gets it: its place and its HTML;
    `per_page`: the fragments a page of it showed (fewer as more calls share
    the page of cards: `page_share`)."""

    position: int
    html: str
    per_page: int = 0


@dataclass(frozen=True)
class CardToRender:
    """A call's card to render: the context its template reads, taken from
    the assembler beforehand (`LiveCards.cards_to_render`), and its newest
    page of fragments as copied then (`FragmentTrail.page`), made into rows
    here: out of the recording's lock, as the template is."""

    position: int
    context: dict[str, Any]
    fragments: list[tuple[tuple, str]] = field(default_factory=list)
    per_page: int = 0  # (`Rendered.per_page`)

    def render(self) -> Rendered:
        card, capture = self.context["card"], self.context["capture"]
        for fields, before in self.fragments:
            fragment = Fragment(**dict(zip(SCAN_FIELDS, fields, strict=True)))
            card.fragments.append(fragment_row(capture, card, fragment, None, before))
        html = str(get_template(CARD_TEMPLATE).render(self.context)).strip()
        return Rendered(self.position, html, self.per_page)


class FragmentTrail:
    """One call's fragments as its card shows them, taken as they arrive:
    their rows as the store writes them (`FragmentScan`), the text just
    before each, and the newest page of them."""

    def __init__(self, call: AssembledCall, form: str) -> None:
        self.scan = FragmentScan(call, form)
        self.length = 0  # characters of arguments so far
        self.first_frame: int | None = None
        self.tail = ""  # the last WINDOW characters so far
        # The newest page: each fragment's SCAN_FIELDS as a tuple (a model
        # instance is made only for a row shown: most are pushed out unseen)
        # and the text before it.
        self.newest: deque[tuple[tuple, str]] = deque(maxlen=FRAGMENTS_PER_PAGE)

    @property
    def count(self) -> int:
        return self.scan.count

    def take(self) -> None:
        """The call's fragments not taken yet."""
        for fields in self.scan.take():
            _, frame, _, stored, *_ = fields
            self.newest.append((fields, self.tail))
            self.tail = (self.tail + stored)[-WINDOW:]
            self.length += len(stored)
            if self.first_frame is None:
                self.first_frame = frame

    def page(self, start: int) -> list[tuple[tuple, str]]:
        """The fragments from seq `start` on (their SCAN_FIELDS), each with
        the text before it: copies (`CardToRender` makes them rows)."""
        return [(fields, before) for fields, before in self.newest if fields[0] >= start]


class LiveCards:
    """The rows of one live capture, read from its strict assembler after
    each step.  `read()` takes the events since the last one; then
    `frame_notes` says what each new frame row carries and `cards` renders
    the cards of the calls that changed."""

    def __init__(self, slug: str, assembler: Any, *, clock: Callable[[], float] = time.monotonic):
        self.slug = slug
        self.assembler = assembler
        self.clock = clock  # what the throttle reads
        self._seen = 0  # events read
        self._waiting: list[Event] = []  # events naming a call not numbered yet
        self._timelines: Timelines = new_timelines()
        self._trails: dict[int, FragmentTrail] = {}
        self._changed: set[int] = set()  # calls whose card is not rendered as it is now
        self._touched: set[int] = set()  # calls the last read's events touched
        self._rendered_at: dict[int, float] = {}
        # The card the watching viewers were sent last, by call (the newest page's):
        # what a viewer who joins is given first (`cards_for_joiner`).
        self._sent: dict[int, Rendered] = {}
        self._per_page = 0  # the fragments a card's page showed at the last read
        self._spacing = CardBudget()  # its throttled cards' (read at `clock`'s times)
        self._marks_seen = (0, 0)  # dropped deltas and anomalies noted on frame rows
        self._refusal_noted = False
        self._refusal_shown: tuple[Refusal | None, str] = (None, "")
        self._dialect_shown: tuple[str, str] = ("", "")

    # -- reading the assembler -------------------------------------------------------------

    def read(self) -> None:
        """Take the events the assembler logged since the last read."""
        items = self.assembler.events.items
        new, self._seen = items[self._seen :], len(items)
        events, self._waiting = self._waiting, []
        self._touched = set()
        for item in events + new:
            if type(item) is tuple:  # a fragment: (frame, position, text)
                self._touched.add(item[1])
            elif _unnumbered(item):
                self._waiting.append(item)
            else:
                self._note(item)
        refusal = self.assembler.refusal
        if refusal is not None and refusal.call is not None and refusal.call.position is not None:
            self._touched.add(refusal.call.position)
        # Calls numbered only when the stream ended (never started) get no card here.
        self._touched = {p for p in self._touched if p < len(self.assembler.started)}
        self._changed |= self._touched
        self._reshare_page()
        # Each touched call's trail takes its new fragments now, a batch's worth: a
        # card's context, taken under the recording's lock, scanned half a second's
        # (milliseconds for a fast call) and the frames waited for it.
        dialect = self.assembler.dialect
        for position in self._touched:
            self._trail(self.assembler.started[position], dialect)

    def _reshare_page(self) -> None:
        """When more calls share the page of cards (a 5th to 10th call
        started), every card of the page is rendered again, as changed: those
        shown (by this process, or another one before it took the capture
        over) have a longer page of fragments than a reload would."""
        per_page = self._fragments_per_page()
        if per_page != self._per_page:
            self._per_page = per_page
            self._changed.update(self._newest())

    def caught_up(self) -> None:
        """Read what the assembler holds now as already shown: bytes another
        process appended (and sent the rows of) were just replayed."""
        self.read()
        self._changed, self._touched = set(), set()
        self._marks_seen = (len(self.assembler.dropped), len(self.assembler.anomalies))
        self._refusal_noted = self.assembler.refusal is not None

    def _note(self, event: Event) -> None:
        record = event.to_dict()
        add_event(self._timelines, record)
        for position in (record.get("call"), (record.get("anomaly") or {}).get("call")):
            if position is not None:
                self._touched.add(position)

    def frame_notes(self, numbers: Iterable[int]) -> FrameNotes:
        """The calls and marks of the frame rows `numbers` (the frames of the
        last read), as the stored rows will carry them."""
        wanted = set(numbers)
        notes: FrameNotes = {number: ([], []) for number in wanted}
        if not wanted:
            return notes
        first = min(wanted)
        # Every started call: a frame may touch one without an event (a final copy).
        for position, call in enumerate(self.assembler.started):
            if not call.frames or call.frames[-1] < first:
                continue
            self._changed.add(position)
            for number in _frames_from(call.frames, first):
                if number in notes and position not in notes[number][0]:
                    notes[number][0].append(position)
        for number, marks in self._new_marks().items():
            if number in notes:
                notes[number][1].extend(marks)
        return notes

    def _new_marks(self) -> dict[int, list[str]]:
        """The marks logged since the last call (as `frame_marks` orders them)."""
        assembler = self.assembler
        dropped, anomalies = self._marks_seen
        self._marks_seen = (len(assembler.dropped), len(assembler.anomalies))
        refusal = None
        if assembler.refusal is not None and not self._refusal_noted:
            self._refusal_noted = True
            refusal = assembler.refusal
        return frame_marks(
            SimpleNamespace(
                dropped=assembler.dropped[dropped:],
                anomalies=assembler.anomalies[anomalies:],
                refusal=refusal,
            )
        )

    # -- rendering -------------------------------------------------------------------------

    @property
    def held_back(self) -> bool:
        """Whether a call changed since its card was last rendered."""
        return bool(self._changed)

    @property
    def card_due(self) -> bool:
        """Whether `cards()` (throttled) would render a card now (under the
        recording's lock: the set of changed calls changes in its threads)."""
        now = self.clock()
        if not self._changed or not self._spacing.open(now):
            return False
        return any(now - self._last_render(p) >= RENDER_INTERVAL for p in self._changed)

    def cards(self, *, every: bool = False, throttle: bool = True) -> list[Rendered]:
        """The cards of the calls changed since they were last rendered
        (`every`: of the newest CALLS_PER_PAGE calls, as many as a page of
        cards, for a viewer who joins; older ones come when they change, and
        all on the finished page).  With `throttle`
        (False: the stream paused, or a viewer joins) none rendered less
        than RENDER_INTERVAL ago, and at most CARDS_PER_BATCH, those
        rendered longest ago: a batch's cost stays bounded however many
        calls stream at once; and none until the spacing after the last
        throttled render (CARD_SPACING) has passed."""
        started = time.perf_counter()  # the render's cost, in seconds whatever `clock` is
        cards = self.cards_to_render(every=every, throttle=throttle)
        try:
            return [card.render() for card in cards]
        finally:
            if throttle and cards:
                self.rendered(time.perf_counter() - started)

    def cards_to_render(self, *, every: bool = False, throttle: bool = True) -> list[CardToRender]:
        """`cards` in two halves: here the cards it would render, each with
        the context its template reads, taken from the assembler now (under
        the recording's lock); `CardToRender.render` reads nothing else, so
        it may run once the lock is let go.  With `throttle`, once they are
        rendered, `rendered` must be told what it all cost: no throttled card
        is due until then."""
        now = self.clock()
        if throttle and not self._spacing.take(now):
            return []
        out: list[CardToRender] = []
        taken = False
        try:
            positions = self._newest() if every else sorted(self._changed)
            if throttle:
                due = [p for p in positions if now - self._last_render(p) >= RENDER_INTERVAL]
                positions = sorted(sorted(due, key=self._last_render)[:CARDS_PER_BATCH])
            for position in positions:
                self._changed.discard(position)
                self._rendered_at[position] = now
                out.append(self.card_to_render(position))
            taken = bool(out)
        finally:
            if throttle and not taken:
                self._spacing.spent(0.0)  # none taken: open again
        return out

    def rendered(self, seconds: float) -> None:
        """The throttled cards `cards_to_render` gave were taken and rendered
        in `seconds`: the next wait CARD_SPACING times that."""
        self._spacing.spent(seconds)

    def sent(self, cards: Iterable[Rendered]) -> None:
        """These cards went to the watching viewers (under the recording's
        lock): a viewer who joins is given them too (`cards_for_joiner`).
        Told in the order they were rendered, newest last (one thread renders
        a recording's cards: its side lane, or the appending one for HTTP
        ingest)."""
        newest = self._newest()
        for card in cards:
            self._sent[card.position] = card
        for position in [p for p in self._sent if p not in newest]:
            del self._sent[position]

    def cards_for_joiner(self) -> list[Rendered | CardToRender]:
        """The cards of the newest CALLS_PER_PAGE calls for a viewer who
        joins, without touching the throttle: the card the watching viewers
        were sent last, when its call has not changed since or it was
        rendered less than RENDER_INTERVAL ago (the joiner then gets the
        newer one with the watchers, when it is due: the call is still
        changed), and its page of fragments is as long as now; else the
        card's context, to render once the recording's lock is let go.
        Rendering every card for a joiner took about 3 ms a card of a long
        call, and the stream's next frames waited for them (bench/README.md,
        issue 13's fourteenth stop)."""
        now = self.clock()
        per_page = self._fragments_per_page()
        out: list[Rendered | CardToRender] = []
        for position in self._newest():
            sent = self._sent.get(position)
            recent = now - self._last_render(position) < RENDER_INTERVAL
            current = sent is not None and sent.per_page == per_page
            if current and (position not in self._changed or recent):
                out.append(sent)
            else:
                out.append(self.card_to_render(position))
        return out

    def taken_back(self, positions: Iterable[int]) -> None:
        """The cards of these calls were taken to render and never sent (the
        render failed): their calls are changed again, rendered when due."""
        self._changed.update(positions)

    def _fragments_per_page(self) -> int:
        """The fragments a card's page shows now (`Rendered.per_page`)."""
        on_page = min(len(self.assembler.started), CALLS_PER_PAGE)
        return page_share(FRAGMENT_ROWS, FRAGMENTS_PER_PAGE, on_page)

    def _newest(self) -> range:
        """The positions of the newest CALLS_PER_PAGE calls (a page of cards)."""
        count = len(self.assembler.started)
        return range(max(0, count - CALLS_PER_PAGE), count)

    def _last_render(self, position: int) -> float:
        return self._rendered_at.get(position, -1e9)

    def card_html(self, position: int) -> str:
        """The card of the call at `position`, as it is now."""
        return self.card_to_render(position).render().html

    def card_to_render(self, position: int) -> CardToRender:
        """What the card template reads for the call at `position`, as it is
        now: copies only, none of the assembler's objects (`cards_to_render`)."""
        call = self.assembler.started[position]
        capture = SimpleNamespace(slug=self.slug, dialect=self.assembler.dialect)
        trail = self._trail(call, capture.dialect)
        strict = self.assembly()
        row = Call(**call_fields(call, capture.dialect), timeline=self._timeline(position))
        row.first_fragment_frame = trail.first_frame
        row.args_length = len(call.final_text) if call.final_text is not None else trail.length
        row.args_head = ""  # final arguments are shown once the capture closed
        card = call_card(capture, strict, row, text_near=_near_in(call))
        per_page = self._fragments_per_page()
        newest_page = max(1, -(-trail.count // per_page))
        card.fragment_pager = pager(newest_page, per_page, trail.count)
        card.fragment_links = pager_links(card.fragment_pager, self._fragments_page(position))
        context = {"card": card, "capture": capture, "strict": strict}
        fragments = trail.page(card.fragment_pager.start)
        return CardToRender(position, context, fragments, per_page)

    def refusal_html(self) -> str:
        """The refusal decided so far, as the capture page shows it ("" for none)."""
        refusal = self.assembler.refusal
        if refusal is None:
            return ""
        if self._refusal_shown[0] is not refusal:
            self._refusal_shown = (refusal, self._render_refusal())
        return self._refusal_shown[1]

    def _render_refusal(self) -> str:
        strict = self.assembly()
        context = {
            "strict": strict,
            "refusal_link": (
                frame_permalink(self.slug, strict.refusal_frame)
                if strict.refusal_frame is not None
                else ""
            ),
            "refusal_call_link": (
                f"#call-{strict.refusal_call}" if strict.refusal_call is not None else ""
            ),
        }
        return str(get_template(REFUSAL_TEMPLATE).render(context)).strip()

    def dialect_html(self, basis: str) -> str:
        """The page's note on the dialect the stream is read in and why, when
        it changed since the last call ("" otherwise): the page was rendered
        before the first frames told it."""
        shown = (self.assembler.dialect, basis)
        if shown == self._dialect_shown:
            return ""
        self._dialect_shown = shown
        return self.current_dialect_html(basis)

    def current_dialect_html(self, basis: str) -> str:
        """The page's note on the dialect as it is now (for a viewer who
        joins; `dialect_html` notes what the watching viewers were told)."""
        dialect = self.assembler.dialect
        context = {"dialect": dialect, "basis": basis, "note": dialect_note(dialect, basis)}
        return str(get_template(DIALECT_TEMPLATE).render(context)).strip()

    def assembly(self) -> Assembly:
        """The strict assembly so far, as the pages read a stored one
        (unsaved: outcome live, the refusal decided so far)."""
        refusal: Refusal | None = self.assembler.refusal
        if refusal is None:
            return Assembly(outcome=Capture.Outcome.LIVE)
        record = refusal.to_dict()
        return Assembly(
            outcome=Capture.Outcome.LIVE,
            refusal_code=record["code"],
            refusal_message=fragment_text(record["message"]),
            refusal_frame=record["frame"],
            refusal_call=record["call"],
            refusal_choice=record["choice"],
            refusal_retryable=record["retryable"],
        )

    def _trail(self, call: AssembledCall, dialect: str) -> FragmentTrail:
        trail = self._trails.get(call.position)
        if trail is None:
            trail = self._trails[call.position] = FragmentTrail(call, argument_form(call, dialect))
        trail.take()
        return trail

    def _timeline(self, position: int) -> list[dict[str, Any]]:
        """The call's timeline so far, the refusal last (as the store adds it)."""
        timeline = list(self._timelines.get(position, []))
        refusal = self.assembler.refusal
        if refusal is not None and refusal.call is not None and refusal.call.position == position:
            add_refusal({position: timeline}, refusal.to_dict())
        return timeline

    def _fragments_page(self, position: int) -> Callable[[int], str]:
        url = reverse("capture", args=[self.slug])
        return lambda number: f"{url}?call={position}&frag={number}#call-{position}"


def _unnumbered(event: Event) -> bool:
    """Whether the event names a call that has no position yet (one not
    started: its events wait until it starts, as `EventLog.drain` does)."""
    calls = [event.call]
    if type(event.fields) is dict:
        calls += [v.call for v in event.fields.values() if type(v) in (Anomaly, Refusal)]
    return any(call is not None and call.position is None for call in calls)


def _frames_from(frames: Any, first: int) -> list[int]:
    """The numbers in a call's (sorted) frames from `first` on, read from the end."""
    out = []
    for number in reversed(frames):
        if number < first:
            break
        out.append(number)
    return out[::-1]


def _near_in(call: AssembledCall) -> Callable[[Call, Any], str]:
    """A live call's arguments around an offset (they are in memory)."""

    def near(_row: Call, offset: Any) -> str:
        if not isinstance(offset, int) or offset < 0:
            return ""
        start, stop = near_range(offset)
        return fragment_text(call.arguments_text[start:stop])

    return near
