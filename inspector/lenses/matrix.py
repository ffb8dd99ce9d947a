"""The lens matrix a capture page renders: calls by lenses.

    lens_matrix(capture)     # a Capture (anything with .raw, .stream_format)
    build_matrix(body, fmt)  # the same from bytes

returns plain dicts:

    {
      "columns": [{"key": "strict", "title": ..., "available": True, "error": ...},
                  {"key": "openai", "title": "the OpenAI SDK", "library": ..., "version": ...,
                   "available": ..., "error": ..., "calls_from": ..., "notes": [...],
                   "diverges": bool, "divergences": [numbers]},
                  ... vercel, litellm, langchain],
      "rows": [{"key": "strict-0", "label": "call_A", "strict_position": 0,
                "cells": {"strict": cell, "openai": cell, ...}}, ...],
      "divergences": [{"lens", "call", "lens_call", "kind", "message"}, ...],
      "strict": {"outcome": ..., "refusal": ...},
      "lenses": {name: LensResult.to_dict()},
    }

Rows are the assembler's calls in its order, then the calls only a lens
produced (one row per call; lenses' extra calls with the same id share a
row).  A cell is

    {"present": True, "id", "name", "arguments_text", "arguments", "parsed",
     "parse_error", "snapshot": bool, "diverges": bool, "divergences": [numbers]}

or `{"present": False, "diverges": bool, "divergences": [...]}` where the
column has no such call.  `divergences` are the numbers (0-based positions in
the matrix's "divergences") of the records that cell shows, as records, never
joined into one text; a lens that would raise where the assembler is ok marks
its column and each of its cells with that one.  The lenient policy is not a
column.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from typing import Any

import orjson

from inspector.assembly import Result

from . import LENSES, read_frames_and_result, run_all, title
from .base import SNAPSHOT, LensCall, LensResult
from .compare import Divergence, all_divergences, match_calls, strict_document


def request_tools(request_json: str | None) -> list[dict[str, Any]] | None:
    """The `tools` of a recorded request (its JSON text), when there are any."""
    if not request_json:
        return None
    try:
        request = orjson.loads(request_json)
    except orjson.JSONDecodeError:
        return None
    tools = request.get("tools") if isinstance(request, dict) else None
    if not isinstance(tools, list):
        return None
    return [tool for tool in tools if isinstance(tool, dict)] or None


def capture_lenses(capture: Any) -> tuple[Result, dict[str, LensResult]]:
    """The assembler's strict result and every lens's, computed from a
    capture's stored bytes (`raw`, read as `stream_format`)."""
    body = bytes(capture.raw or b"")
    frames, strict = read_frames_and_result(body, capture.stream_format)
    tools = request_tools(getattr(capture, "request_json", None))
    return strict, run_all(frames, tools=tools, dialect=strict.dialect)


def lens_matrix(capture: Any) -> dict[str, Any]:
    strict, results = capture_lenses(capture)
    return matrix(strict, results)


def build_matrix(
    body: bytes, fmt: str, *, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    frames, strict = read_frames_and_result(body, fmt)
    return matrix(strict, run_all(frames, tools=tools, dialect=strict.dialect))


def _strict_cell(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "present": True,
        "id": call.get("id"),
        "name": call.get("name"),
        "arguments_text": call.get("arguments_text"),
        "arguments": call.get("arguments"),
        "parsed": call.get("arguments") is not None,
        "parse_error": None,
        "snapshot": False,
        "diverges": False,
        "divergences": [],
    }


def _lens_cell(call: LensCall, result: LensResult) -> dict[str, Any]:
    return {
        "present": True,
        "id": call.id,
        "name": call.name,
        "arguments_text": call.arguments_text,
        "arguments": call.arguments,
        "parsed": call.parsed,
        "parse_error": call.parse_error,
        "snapshot": result.calls_from == SNAPSHOT,
        "diverges": False,
        "divergences": [],
    }


def _absent() -> dict[str, Any]:
    return {"present": False, "diverges": False, "divergences": []}


def _mark(cell: dict[str, Any], number: int) -> None:
    """The cell (or column) shows divergence `number` of the matrix's list."""
    cell["diverges"] = True
    cell["divergences"].append(number)


def _row(key: str, label: str, strict_position: int | None, names: list[str]) -> dict[str, Any]:
    cells = {"strict": _absent()}
    cells.update((name, _absent()) for name in names)
    return {"key": key, "label": label, "strict_position": strict_position, "cells": cells}


def _extra_row(
    extra_by_id: dict[str, list[dict[str, Any]]], name: str, call: LensCall
) -> dict[str, Any] | None:
    """A lens-only row this call joins: another lens's extra call with its id
    (the lens-only rows by label, so a stream of 50,000 such calls is not
    quadratic)."""
    for row in extra_by_id.get(call.id or "", ()):
        if call.id and not row["cells"][name]["present"]:
            return row
    return None


def _place_lens_calls(
    name: str,
    result: LensResult,
    strict_calls: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    extra_rows: list[dict[str, Any]],
    names: list[str],
    extra_by_id: dict[str, list[dict[str, Any]]],
) -> dict[int, dict[str, Any]]:
    """Put each of a lens's calls in its row (the strict call it pairs with,
    else a lens-only row); lens position -> row."""
    placed: dict[int, dict[str, Any]] = {}
    pairs = match_calls(strict_calls, result.calls)
    for lens_pos, call in enumerate(result.calls):
        strict_pos = pairs.get(lens_pos)
        row = rows[strict_pos] if strict_pos is not None else _extra_row(extra_by_id, name, call)
        if row is None:
            label = call.id or f"{title(name)} call {lens_pos}"
            row = _row(f"{name}-{lens_pos}", label, None, names)
            extra_rows.append(row)
            extra_by_id.setdefault(label, []).append(row)
        row["cells"][name] = _lens_cell(call, result)
        placed[lens_pos] = row
    return placed


def _strict_column(document: dict[str, Any]) -> dict[str, Any]:
    refusal = document.get("refusal")
    return {
        "key": "strict",
        "title": document.get("policy") or "strict",
        "library": "Stream Inspector",
        "version": None,
        "available": True,
        "error": (f"{refusal['code']}: {refusal['message']}" if refusal else None),
        "calls_from": "final",
        "notes": [],
        "diverges": False,
        "divergences": [],
    }


def _lens_column(name: str, result: LensResult) -> dict[str, Any]:
    return {
        "key": name,
        "title": title(name),
        "emulated": name in LENSES and not LENSES[name].runs_library,
        "library": result.library,
        "version": result.version,
        "available": result.available,
        "error": result.error,
        "calls_from": result.calls_from if result.calls else None,
        "gates_on_parse": result.gates_on_parse,
        "notes": list(result.notes),
        "diverges": False,
        "divergences": [],
    }


def _mark_divergences(
    divergences: list[Divergence],
    columns: dict[str, dict[str, Any]],
    rows: list[dict[str, Any]],
    placed: dict[str, dict[int, dict[str, Any]]],
) -> None:
    """Mark where each divergence shows: the lens's cell of its call, or
    (about the whole stream) the lens's column and each of its cells."""
    for number, entry in enumerate(divergences):
        name = entry["lens"]
        if entry["lens_call"] is not None:
            _mark(placed[name][entry["lens_call"]]["cells"][name], number)
        elif entry["call"] is not None:
            _mark(rows[entry["call"]]["cells"][name], number)
        else:
            _mark(columns[name], number)
            for row in rows:
                _mark(row["cells"][name], number)


def matrix(strict: Any, results: dict[str, LensResult]) -> dict[str, Any]:
    document = strict_document(strict)
    strict_calls: list[dict[str, Any]] = document.get("calls") or []
    divergences = all_divergences(results, document)
    names = [name for name in LENSES if name in results]

    rows = []
    for position, call in enumerate(strict_calls):
        row = _row(f"strict-{position}", call.get("id") or f"call {position}", position, names)
        row["cells"]["strict"] = _strict_cell(call)
        rows.append(row)
    extra_rows: list[dict[str, Any]] = []
    extra_by_id: dict[str, list[dict[str, Any]]] = {}
    placed = {
        name: _place_lens_calls(
            name, results[name], strict_calls, rows, extra_rows, names, extra_by_id
        )
        for name in names
    }
    rows.extend(extra_rows)
    columns = {name: _lens_column(name, results[name]) for name in names}
    _mark_divergences(divergences, columns, rows, placed)
    return {
        "columns": [_strict_column(document), *columns.values()],
        "rows": rows,
        "divergences": divergences,
        "strict": {"outcome": document.get("outcome"), "refusal": document.get("refusal")},
        "lenses": {name: results[name].to_dict() for name in names},
    }
