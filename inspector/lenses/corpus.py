"""A corpus of other projects' streams, checked against the lens of each
project's library (`manage.py lens_check DIR`).

A corpus folder holds `NAME.sse` (or `.jsonl`, `.json`) with `NAME.expect.json`;
its `peer_expects` is what that project's own test expects of its library.
The prefix of NAME before `__` names the project; `PROJECT_LENSES` says which
lens stands for it (`pi` and the `issue` threads have none).

    for check in check_folder(Path("corpus")):
        check.verdict      # "agreed", "disagreed" or "no lens"
        check.differences  # one sentence per field that differs

Each lens is entered where its project's tests enter the library
(`Lens.run_as_tested`): LiteLLM's tests call its chunk builder on chunks made
from JSON, not `completion()`'s stream wrapper, so there the check does too
(and says so); every other lens runs as in the matrix.

What is compared is what a lens reports: the outcome (an error or not), the
error's text, the calls (id, name, the arguments text, the parsed arguments,
a custom call's input, whichever the peer names), LangChain's count of
invalid tool calls and the number of choices that carry calls.  Text,
reasoning and refusal text are not part of a lens's result: they are listed
as not compared, never counted as agreement.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import LENSES, read_frames_and_result
from .base import LensCall, LensResult

# The project (a file name's prefix before "__") -> the lens of its library.
PROJECT_LENSES: dict[str, str | None] = {
    "vercel": "vercel",
    "openai_python": "openai",
    "litellm": "litellm",
    "langchain": "langchain",
    "pi": None,
    "issue": None,
}
STREAM_FORMATS = {".sse": "sse", ".jsonl": "jsonl", ".json": "json"}
NOT_COMPARED = ("text", "reasoning", "refusal_text")
AGREED, DISAGREED, NO_LENS = "agreed", "disagreed", "no lens"


@dataclass
class StreamCheck:
    """One corpus stream: its name, the lens that read it and the verdict."""

    name: str
    project: str
    lens: str | None
    verdict: str
    differences: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)
    note: str = ""


def corpus_streams(folder: Path) -> Iterator[tuple[str, Path, Path]]:
    """(name, stream file, expect file) for every expect file with a stream, by name."""
    for expect in sorted(folder.glob("*.expect.json")):
        name = expect.name[: -len(".expect.json")]
        for suffix in STREAM_FORMATS:
            stream = folder / f"{name}{suffix}"
            if stream.is_file():
                yield name, stream, expect
                break


def check_folder(folder: Path) -> list[StreamCheck]:
    return [check_stream(name, stream, expect) for name, stream, expect in corpus_streams(folder)]


def check_stream(name: str, stream: Path, expect: Path) -> StreamCheck:
    """Run the stream through its project's lens and compare with `peer_expects`."""
    project = name.split("__", 1)[0] if "__" in name else ""
    lens = PROJECT_LENSES.get(project)
    peer = json.loads(expect.read_text(encoding="utf-8")).get("peer_expects") or {}
    check = StreamCheck(name, project, lens, NO_LENS, note=str(peer.get("note") or ""))
    if lens is None:
        return check
    frames, strict = read_frames_and_result(stream.read_bytes(), STREAM_FORMATS[stream.suffix])
    tested = LENSES[lens].run_as_tested(frames, dialect=strict.dialect)
    check.differences = differences(tested, peer)
    check.not_compared = [key for key in NOT_COMPARED if key in peer]
    check.verdict = DISAGREED if check.differences else AGREED
    return check


def differences(result: LensResult, peer: dict[str, Any]) -> list[str]:
    """What the lens's result says differently from the peer's own test."""
    out = _outcome_differences(result, peer)
    invalid = [call for call in result.delivered_calls if _held_back(result, call, peer)]
    handed = [call for call in result.delivered_calls if call not in invalid]
    if "calls" in peer:
        out.extend(_call_differences(handed, peer["calls"] or []))
    if "invalid_tool_calls" in peer and len(invalid) != peer["invalid_tool_calls"]:
        out.append(f"invalid tool calls: peer {peer['invalid_tool_calls']}, lens {len(invalid)}")
    if peer.get("choices") and len(result.calls) > 0:
        choices = len({call.choice for call in result.calls})
        if choices != peer["choices"]:
            out.append(f"choices with calls: peer {peer['choices']}, lens {choices}")
    return out


def _held_back(result: LensResult, call: LensCall, peer: dict[str, Any]) -> bool:
    """A call the library keeps apart as invalid (LangChain's
    `invalid_tool_calls`), when the peer counts those."""
    return "invalid_tool_calls" in peer and result.gates_on_parse and not call.parsed


def _outcome_differences(result: LensResult, peer: dict[str, Any]) -> list[str]:
    expected = str(peer.get("outcome") or "ok").rstrip("*")
    expects_error = expected == "error"
    if expects_error != (result.error is not None):
        said = result.error or "no error"
        return [f"outcome: peer {expected}, lens {'error' if result.error else 'ok'} ({said})"]
    wanted = peer.get("error")
    if expects_error and wanted and not error_agrees(str(wanted), result.error or ""):
        return [f"error: peer {wanted!r}, lens {result.error!r}"]
    return []


def error_agrees(peer_error: str, lens_error: str) -> bool:
    """The peer's error names the lens's: its text appears in the lens's
    report.  Vercel's errors carry an `AI_` prefix in their `name`
    (`AI_JSONParseError`) that the lens's "Type: message" leaves out."""
    wanted = peer_error.strip().lower()
    said = lens_error.lower()
    return wanted in said or wanted.removeprefix("ai_") in said


def _call_differences(calls: list[LensCall], peer_calls: list[dict[str, Any]]) -> list[str]:
    out = []
    if len(calls) != len(peer_calls):
        ids = [call.id for call in calls]
        wanted = [call.get("id") for call in peer_calls]
        out.append(f"calls: peer {len(peer_calls)} {wanted}, lens {len(calls)} {ids}")
    for position, (call, wanted) in enumerate(zip(calls, peer_calls, strict=False)):
        for key, peer_value, lens_value in _call_fields(call, wanted):
            if peer_value != lens_value:
                out.append(
                    f"call {position} {key}: peer {_short(peer_value)}, lens {_short(lens_value)}"
                )
    return out


def _call_fields(call: LensCall, wanted: dict[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """(field, the peer's value, the lens's) for each field the peer names."""
    lens_values = {
        "id": call.id,
        "name": call.name,
        "arguments_text": call.arguments_text,
        "arguments": call.arguments,
        "custom_input": call.arguments_text if call.kind == "custom" else None,
    }
    for key, value in wanted.items():
        if key in lens_values:
            yield key, value, lens_values[key]


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "\u2026"


def tally(checks: list[StreamCheck]) -> dict[str, dict[str, int]]:
    """Per lens ("no lens" for the projects without one): how many streams
    agreed, disagreed, or had no lens."""
    counts: dict[str, dict[str, int]] = {}
    for check in checks:
        row = counts.setdefault(check.lens or NO_LENS, {AGREED: 0, DISAGREED: 0, NO_LENS: 0})
        row[check.verdict] += 1
    return counts
