"""A strict call's argument fragments as Fragment rows, made one pass at a
time: the scanner's state after each fragment (and, for Gemini path pieces,
the arguments object after it), scanned once here so pages never scan.

A live recording writes a started call's new fragments with a batch of
frames every `writer.FRAGMENT_SECONDS`, or a recorder's side lane apart
from its batches (`FragmentLog.new_rows`): a started
call keeps its position in the strict result, so its rows never need its
Call row, which exists only once the capture closes.  The close then writes only what is left
(`FragmentLog.rest`), which is what keeps a long stream's close short.  An
upload writes them all at its close, from a log that wrote nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from inspector.assembly import ArgumentScanner
from inspector.assembly import Call as AssembledCall

from .call_forms import PATH_PIECES, PieceStates, argument_form

Rows = Iterator[tuple]

# A Fragment row's columns in the order the rows are made.
FRAGMENT_FIELDS = (
    "capture",
    "position",
    "seq",
    "frame",
    "offset",
    "text",
    "depth",
    "in_string",
    "complete",
    "invalid_from",
    "state",
)
# What `FragmentScan.take` makes of each fragment: the row without its capture and call.
SCAN_FIELDS = FRAGMENT_FIELDS[2:]


def fragment_text(text: str) -> str:
    """A fragment's text as stored (NUL as U+FFFD: PostgreSQL's text holds no NUL)."""
    if "\x00" in text:
        return text.replace("\x00", "\ufffd")
    return text


class FragmentScan:
    """One call's fragments, taken in order: `take()` gives the values of
    SCAN_FIELDS of those not taken yet.  `form` is the call's argument form
    (`call_forms.call_columns`), which says whether its fragments are path
    pieces."""

    __slots__ = ("call", "form", "scanner", "pieces", "count")

    def __init__(self, call: AssembledCall, form: str) -> None:
        self.call = call
        self.form = form
        self.scanner = ArgumentScanner()
        self.pieces = PieceStates() if form == PATH_PIECES else None
        self.count = 0  # fragments taken

    @property
    def behind(self) -> bool:
        """Whether the call holds fragments not taken yet."""
        return len(self.call.fragment_frames) != self.count

    def take(self) -> Iterator[tuple]:
        scanner, pieces = self.scanner, self.pieces
        for frame, offset, text in self.call.iter_fragments(self.count):
            scanner.feed(text)
            yield (
                self.count, frame, offset, fragment_text(text), scanner.depth, scanner.in_string,
                scanner.closed, scanner.invalid_at, pieces.add(text) if pieces is not None else "",
            )  # fmt: skip
            self.count += 1


class FragmentLog:
    """What of a capture's strict fragments is written: per call position, the
    scan that wrote them.  `known=False`: rows may be stored that this log did
    not write (another process appended, a recording died), so the close
    deletes them all and writes every call's again."""

    def __init__(self, *, known: bool = True) -> None:
        self.scans: dict[int, FragmentScan] = {}
        self.known = known

    def forget(self) -> None:
        """Stop writing as the stream goes: the close writes everything again."""
        self.scans.clear()
        self.known = False

    def new_rows(self, capture_pk: int, started: Sequence[AssembledCall], dialect: str) -> Rows:
        """The rows of the started calls' fragments not written yet (nothing
        once `forget` was called), the calls read in `dialect`."""
        return self._rows(capture_pk, started, dialect) if self.known else iter(())

    def stale(self, calls: Sequence[AssembledCall], dialect: str) -> list[int] | None:
        """At the close, the positions whose written rows must go before
        `rest` writes them again: a call written as another object or form
        than the result's (the assembler read held frames again), or a
        position the result does not have.  None: every row of the capture."""
        if not self.known:
            return None
        stale = []
        for position, scan in list(self.scans.items()):
            call = calls[position] if position < len(calls) else None
            if call is not scan.call or argument_form(call, dialect) != scan.form:
                stale.append(position)
                del self.scans[position]
        return stale

    def rest(self, capture_pk: int, calls: Sequence[AssembledCall], dialect: str) -> Rows:
        """The rows of every call's fragments not written yet (after `stale`)."""
        self.known = True
        return self._rows(capture_pk, calls, dialect)

    def _rows(self, capture_pk: int, calls: Sequence[AssembledCall], dialect: str) -> Rows:
        scans = self.scans
        for position, call in enumerate(calls):
            scan = scans.get(position)
            if scan is None:
                scan = scans[position] = FragmentScan(call, argument_form(call, dialect))
            elif not scan.behind:
                continue
            head = (capture_pk, position)
            for values in scan.take():
                yield head + values
