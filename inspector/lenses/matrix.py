"""The lens matrix a capture page renders: calls by lenses.

    lens_matrix(capture)     # a Capture (anything with .raw, .stream_format)
    build_matrix(body, fmt)  # the same from bytes

returns plain dicts:

    {
      "columns": [{"key": "strict", "title": ..., "available": True, "error": ...},
                  {"key": "openai", "title": "the OpenAI SDK", "library": ..., "version": ...,
                   "available": ..., "error": ..., "calls_from": ..., "notes": [...],
                   "diverges": bool, "message": "the OpenAI SDK would raise ..." | None},
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
     "parse_error", "snapshot": bool, "diverges": bool, "message": str | None}

or `{"present": False, "diverges": bool, "message": ...}` where the column
has no such call.  `message` joins the divergences of that cell; a lens that
would raise where the assembler is ok marks each of its cells with that
error.  The lenient policy is not a column.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from typing import Any

import orjson

from inspector.assembly import Result

from . import LENSES, TITLES, read_stream, run_all
from .base import SNAPSHOT, LensCall, LensResult
from .compare import all_divergences, match_calls, strict_document


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
    frames, strict = read_stream(body, capture.stream_format)
    tools = request_tools(getattr(capture, "request_json", None))
    return strict, run_all(frames, tools=tools)


def lens_matrix(capture: Any) -> dict[str, Any]:
    strict, results = capture_lenses(capture)
    return matrix(strict, results)


def build_matrix(
    body: bytes, fmt: str, *, tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    frames, strict = read_stream(body, fmt)
    return matrix(strict, run_all(frames, tools=tools))


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
        "message": None,
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
        "message": None,
    }


def _absent() -> dict[str, Any]:
    return {"present": False, "diverges": False, "message": None}


def _mark(cell: dict[str, Any], message: str) -> None:
    cell["diverges"] = True
    cell["message"] = message if not cell["message"] else f"{cell['message']}; {message}"


def matrix(strict: Any, results: dict[str, LensResult]) -> dict[str, Any]:
    document = strict_document(strict)
    strict_calls: list[dict[str, Any]] = document.get("calls") or []
    refusal = document.get("refusal")
    divergences = all_divergences(results, document)
    names = [name for name in LENSES if name in results]

    rows: list[dict[str, Any]] = []
    for position, call in enumerate(strict_calls):
        cells = {"strict": _strict_cell(call)}
        cells.update((name, _absent()) for name in names)
        rows.append(
            {
                "key": f"strict-{position}",
                "label": call.get("id") or f"call {position}",
                "strict_position": position,
                "cells": cells,
            }
        )
    # lens name -> lens position -> row
    placed: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in names}
    extra_rows: list[dict[str, Any]] = []
    for name in names:
        result = results[name]
        pairs = match_calls(strict_calls, result.calls)
        for lens_pos, call in enumerate(result.calls):
            strict_pos = pairs.get(lens_pos)
            if strict_pos is not None:
                row = rows[strict_pos]
            else:
                row = next(
                    (
                        candidate
                        for candidate in extra_rows
                        if call.id
                        and candidate["label"] == call.id
                        and not candidate["cells"][name]["present"]
                    ),
                    None,
                )
                if row is None:
                    cells = {"strict": _absent()}
                    cells.update((other, _absent()) for other in names)
                    row = {
                        "key": f"{name}-{lens_pos}",
                        "label": call.id or f"{TITLES.get(name, name)} call {lens_pos}",
                        "strict_position": None,
                        "cells": cells,
                    }
                    extra_rows.append(row)
            row["cells"][name] = _lens_cell(call, result)
            placed[name][lens_pos] = row
    rows.extend(extra_rows)

    columns: list[dict[str, Any]] = [
        {
            "key": "strict",
            "title": document.get("policy") or "strict",
            "library": "Stream Inspector",
            "version": None,
            "available": True,
            "error": (f"{refusal['code']}: {refusal['message']}" if refusal else None),
            "calls_from": "final",
            "notes": [],
            "diverges": False,
            "message": None,
        }
    ]
    for name in names:
        result = results[name]
        column = {
            "key": name,
            "title": TITLES.get(name, name),
            "library": result.library,
            "version": result.version,
            "available": result.available,
            "error": result.error,
            "calls_from": result.calls_from if result.calls else None,
            "gates_on_parse": result.gates_on_parse,
            "notes": list(result.notes),
            "diverges": False,
            "message": None,
        }
        columns.append(column)
        for entry in divergences:
            if entry["lens"] != name:
                continue
            if entry["lens_call"] is not None:
                _mark(placed[name][entry["lens_call"]]["cells"][name], entry["message"])
            elif entry["call"] is not None:
                _mark(rows[entry["call"]]["cells"][name], entry["message"])
            else:  # about the whole stream: the column, and each of its cells
                _mark(column, entry["message"])
                for row in rows:
                    _mark(row["cells"][name], entry["message"])
    return {
        "columns": columns,
        "rows": rows,
        "divergences": divergences,
        "strict": {"outcome": document.get("outcome"), "refusal": refusal},
        "lenses": {name: results[name].to_dict() for name in names},
    }
