"""The lens matrix page: what client libraries would have done with a
capture (`/c/<slug>/lenses/`).

Each lens's result is computed once and stored (`lens_cache.py`); the first
visit starts the runs and waits at most INSPECTOR_LENS_WAIT_SECONDS for
them, then shows "computing…" with a reload link (and, on the page of its
own, a refresh every few seconds: no JavaScript needed).  The capture page
never computes it: it links here and static/inspector/reproducers.js loads
this page's `?partial=1` fragment into place, asking again while it is
computing.

The matrix also offers, for each lens that parts from strict, a plain form
posting `lens=NAME` to the minimizer (`pages/minimize.py`): it then keeps that
lens's divergence (`inspector/minimize/lens.py`) instead of the refusal.  Each
form names its run (`job`) and shows its progress as the capture page's
Minimize does: the same registry (`minimize_jobs`), status route, template
partial (`_minimize_job.html`) and script (reproducers.js, which this page
loads too).

Stream content is untrusted: templates autoescape everything shown here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe

from inspector.lenses import title
from inspector.lenses.compare import Divergence

from .. import minimize_jobs
from ..lens_cache import (
    STATUS_TEXT,
    any_pending,
    current_runs,
    lens_runs,
    stored_matrix,
    strict_document,
)
from ..lens_runs import LensRun
from ..models import Capture
from .paging import Pager, page_holding, pager

LENS_ROWS = 50  # calls (rows of the matrix) per page
DIVERGENCES_SHOWN = 200  # divergence sentences listed
CELL_TEXT = 60  # characters of a call's id or name shown in a cell
CELL_ARGUMENTS = 160  # characters of its arguments
HEADER_TEXT = 300  # characters of a lens's error or note
# The capture page loads the matrix by itself (reproducers.js) up to this size;
# a larger capture shows a button, as computing the lenses reads the whole stream.
LENS_AUTOLOAD_BYTES = 2 * 1024 * 1024


def cut(value: Any, limit: int) -> str:
    """A short text for a cell: cut at `limit` characters with an ellipsis."""
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "\u2026"


# --- the lens matrix ---------------------------------------------------------------------


@dataclass
class LensCell:
    key: str  # the column
    available: bool
    present: bool
    status_text: str = ""  # "too large for this lens", … when the run has no result
    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    arguments_length: int = 0
    parsed: bool = False
    parse_error: str = ""
    snapshot: bool = False
    diverges: bool = False
    refs: list[int] = field(default_factory=list)  # numbers of its divergence sentences
    messages: list[str] = field(default_factory=list)  # those sentences (its title)


@dataclass
class LensRow:
    label: str
    anchor: str
    strict_position: int | None
    cells: list[LensCell]


@dataclass
class LensColumn:
    key: str
    title: str
    library: str
    library_short: str  # the library, and its version when short
    version: str
    available: bool
    error: str
    error_cut: bool
    notes: list[str]
    calls_from: str | None
    gates_on_parse: bool
    diverges: bool
    emulated: bool = False  # a port of the library's rules, not the library
    refs: list[int] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    status: str = "done"  # its run's status (LensRun.Status)
    status_text: str = ""  # what a cell says when the run has no result


@dataclass
class Sentence:
    number: int
    lens: str
    lens_title: str
    kind: str
    row_label: str
    row_href: str  # the row of its call, on this page or another
    message: str


def _row_anchor(key: str) -> str:
    return "lens-row-" + re.sub(r"[^A-Za-z0-9_-]", "_", key)


def _refs(cell: dict[str, Any]) -> list[int]:
    """The sentence numbers (1-based) of the divergences a cell or column shows."""
    return [number + 1 for number in cell.get("divergences") or []]


def _messages(cell: dict[str, Any], divergences: list[Divergence]) -> list[str]:
    return [divergences[number]["message"] for number in cell.get("divergences") or []]


def _lens_column(column: dict[str, Any], divergences: list[Divergence]) -> LensColumn:
    error = column.get("error") or ""
    library, version = column.get("library") or "", column.get("version") or ""
    named = f"{library} {version}" if version and len(version) <= 12 else library
    return LensColumn(
        key=column["key"],
        title=column["title"],
        library=library,
        library_short=cut(named, 40),
        version=version,
        available=column["available"],
        error=cut(error, HEADER_TEXT),
        error_cut=len(error) > HEADER_TEXT,
        notes=[cut(note, HEADER_TEXT) for note in column.get("notes") or []],
        calls_from=column.get("calls_from"),
        gates_on_parse=bool(column.get("gates_on_parse")),
        diverges=column["diverges"],
        emulated=bool(column.get("emulated")),
        refs=_refs(column),
        messages=_messages(column, divergences),
        status=column.get("status") or "done",
        status_text=STATUS_TEXT.get(column.get("status") or "done", ""),
    )


def _lens_cell(column: LensColumn, cell: dict[str, Any], divergences: list[Divergence]) -> LensCell:
    shown = LensCell(
        key=column.key,
        available=column.available,
        present=cell["present"],
        status_text=column.status_text,
    )
    if cell["present"]:
        arguments = cell.get("arguments_text")
        shown.id = None if cell.get("id") is None else cut(cell["id"], CELL_TEXT)
        shown.name = None if cell.get("name") is None else cut(cell["name"], CELL_TEXT)
        shown.arguments = None if arguments is None else cut(arguments, CELL_ARGUMENTS)
        shown.arguments_length = len(arguments or "")
        shown.parsed = bool(cell.get("parsed"))
        shown.parse_error = cut(cell.get("parse_error") or "", HEADER_TEXT)
        shown.snapshot = bool(cell.get("snapshot"))
    shown.diverges = bool(cell.get("diverges"))
    shown.refs = _refs(cell)
    shown.messages = _messages(cell, divergences)
    return shown


def _lens_row(
    row: dict[str, Any], columns: list[LensColumn], divergences: list[Divergence]
) -> LensRow:
    absent = {"present": False}
    return LensRow(
        label=cut(row["label"], CELL_TEXT),
        anchor=_row_anchor(row["key"]),
        strict_position=row["strict_position"],
        cells=[
            _lens_cell(column, row["cells"].get(column.key) or absent, divergences)
            for column in columns
        ],
    )


def _sentences(
    matrix: dict[str, Any], columns: list[LensColumn], page: Pager, base: str
) -> list[Sentence]:
    """The first DIVERGENCES_SHOWN divergences, numbered from 1, each linking
    the row of its call (on this page or another)."""
    titles = {column.key: column.title for column in columns}
    rows_all = matrix["rows"]
    labels = {
        row["strict_position"]: (at, row)
        for at, row in enumerate(rows_all)
        if row["strict_position"] is not None
    }
    sentences = []
    for number, entry in enumerate(matrix["divergences"][:DIVERGENCES_SHOWN], start=1):
        at, row = labels.get(entry["call"], (None, None))
        href = ""
        if row is not None:
            href = "#" + _row_anchor(row["key"])
            if not page.start <= at < page.stop:
                href = f"{base}?page={page_holding(at, page.per_page)}{href}"
        sentences.append(
            Sentence(
                number=number,
                lens=entry["lens"],
                lens_title=titles.get(entry["lens"], entry["lens"]),
                kind=entry["kind"],
                row_label=cut(row["label"], CELL_TEXT) if row else "",
                row_href=href,
                message=entry["message"],
            )
        )
    return sentences


def lens_table(matrix: dict[str, Any], page: Pager, base: str) -> dict[str, Any]:
    """The matrix as the template shows it: one page of rows, each cell cut
    short; every divergence a numbered sentence, each diverging cell naming
    the numbers of its sentences (carried as numbers from the matrix)."""
    divergences = matrix["divergences"]
    columns = [_lens_column(column, divergences) for column in matrix["columns"]]
    rows_all = matrix["rows"]
    total = len(divergences)
    return {
        "columns": columns,
        "minimizable": minimizable(columns, divergences),
        "rows": [_lens_row(row, columns, divergences) for row in rows_all[page.start : page.stop]],
        "sentences": _sentences(matrix, columns, page, base),
        "divergence_count": total,
        "divergences_hidden": max(0, total - DIVERGENCES_SHOWN),
        "strict": matrix["strict"],
        "row_total": len(rows_all),
    }


def minimizable(columns: list[LensColumn], divergences: list[Divergence]) -> list[LensColumn]:
    """The lens columns a "minimize keeping this divergence" form is offered
    for: available lenses that part from strict here (what `lens_target` keeps)."""
    diverging = {entry["lens"] for entry in divergences}
    return [
        column
        for column in columns
        if column.key != "strict" and column.available and column.key in diverging
    ]


def lens_matrix(capture: Capture, runs: dict[str, LensRun]) -> dict[str, Any]:
    """The matrix of the capture's stored lens runs and strict result."""
    return stored_matrix(strict_document(capture) or {}, runs)


def progress(runs: dict[str, LensRun]) -> list[dict[str, str]]:
    """Each lens and how far its run is, while one is computing."""
    return [
        {"title": title(name), "status": run.status, "text": STATUS_TEXT.get(run.status, "done")}
        for name, run in runs.items()
    ]


@require_safe
def lens_page(request, slug):
    """Calls by lenses: what the OpenAI SDK, Vercel AI SDK, LiteLLM and
    LangChain would have assembled from this capture's frames.  `?partial=1`
    gives only the matrix, for the capture page to load into place."""
    partial = request.GET.get("partial") == "1"
    template = "inspector/_lens_matrix.html" if partial else "inspector/lenses.html"
    stored = current_runs(slug)  # the usual visit: everything stored, one query
    if stored is not None:
        capture, runs, strict = stored
        context = {"capture": capture, "partial": partial, "error": ""}
        context.update(_matrix_context(request, capture, stored_matrix(strict or {}, runs)))
        return render(request, template, context)
    try:
        capture = Capture.objects.only(
            "id", "slug", "title", "stream_format", "frame_count", "outcome"
        ).get(slug=slug)
    except Capture.DoesNotExist:
        raise Http404("no such capture") from None
    context = {"capture": capture, "partial": partial, "error": ""}
    if capture.outcome == Capture.Outcome.LIVE:
        context["error"] = "This capture is still being recorded: the lenses read it once it ends."
        return render(request, template, context, status=409)
    runs = lens_runs(capture)
    if any_pending(runs):
        context["pending"] = progress(runs)
        return render(request, template, context)  # 200: the fragment says it is computing
    context.update(_matrix_context(request, capture, lens_matrix(capture, runs)))
    return render(request, template, context)


def _matrix_context(request, capture: Capture, matrix: dict[str, Any]) -> dict[str, Any]:
    shown = pager(request.GET.get("page"), LENS_ROWS, len(matrix["rows"]))
    base = reverse("capture-lenses", args=[capture.slug])
    context = lens_table(matrix, shown, base)
    context["pager"] = shown
    context["minimize_seconds"] = f"{float(settings.INSPECTOR_MINIMIZE_SECONDS):g}"
    # Each form names its run, as the capture page's Minimize does (pages/minimize.py).
    context["minimize_forms"] = [
        {"column": column, "job": minimize_jobs.new_job_id()} for column in context["minimizable"]
    ]
    context["links"] = {
        "previous": f"{base}?page={shown.previous}#lens-matrix" if shown.has_previous else "",
        "next": f"{base}?page={shown.next}#lens-matrix" if shown.has_next else "",
    }
    return context
