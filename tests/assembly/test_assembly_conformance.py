"""Every conformance case under tests/conformance/<dialect>/ (NAME.<sse|jsonl|json>
and NAME.expect.json, the format of the shared conformance checker) assembled
in-process: the result must match `expect` by recursive subset, keep the event
invariants, and not change when the bytes are cut in small pieces or, for
SSE, when LF line endings become CRLF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inspector.assembly import assemble

CASES = Path(__file__).resolve().parents[1] / "conformance"
INPUT_EXTENSIONS = (".sse", ".jsonl", ".json", ".har")
EXPECT = ".expect.json"


def find_cases() -> list[tuple[str, Path, Path]]:
    cases = []
    for expect in sorted(CASES.glob(f"*/*{EXPECT}")):
        stem = expect.name[: -len(EXPECT)]
        inputs = [expect.with_name(stem + ext) for ext in INPUT_EXTENSIONS]
        (source,) = [path for path in inputs if path.exists()]
        cases.append((f"{expect.parent.name}/{stem}", source, expect))
    return cases


def first_mismatch(expected: Any, got: Any, path: str = "$") -> str | None:
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"{path}: expected an object, got {got!r}"
        for key, value in expected.items():
            if key not in got:
                return f"{path}.{key}: missing"
            found = first_mismatch(value, got[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return f"{path}: expected {len(expected)} items, got {got!r}"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            found = first_mismatch(e, g, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, bool) or isinstance(got, bool):
        same = type(expected) is type(got) and expected == got
    elif isinstance(expected, int | float) and isinstance(got, int | float):
        same = expected == got
    else:
        same = type(expected) is type(got) and expected == got
    return None if same else f"{path}: expected {expected!r}, got {got!r}"


def options(argv: list[str]) -> dict[str, Any]:
    """The command-line options a case passes, as `assemble` keywords."""
    out: dict[str, Any] = {}
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        key = flag.removeprefix("--").replace("-", "_")
        out["fmt" if key == "format" else key] = int(value) if key == "entry" else value
    return out


def run(data: bytes, name: str, argv: list[str], chunk_bytes: int | None = None) -> dict:
    return assemble(data, name=name, chunk_bytes=chunk_bytes, **options(argv)).to_dict()


def check_events(result: dict) -> None:
    calls, events = result["calls"], result["events"]
    starts = [e["call"] for e in events if e["type"] == "toolcall_start"]
    assert starts == [n for n, c in enumerate(calls) if c["started_frame"] is not None]
    refusals = [i for i, e in enumerate(events) if e["type"] == "refusal"]
    ends = [e["call"] for e in events if e["type"] == "toolcall_end"]
    if result["outcome"] == "refused":
        assert refusals == [len(events) - 1] and ends == []
    else:
        assert refusals == [] and ends == list(range(len(calls)))


ALL_CASES = find_cases()


def test_every_dialect_has_at_least_fifteen_cases():
    folders = {case.split("/")[0] for case, _, _ in ALL_CASES}
    assert {"responses", "messages", "gemini"} <= folders
    for folder in folders:
        assert sum(case.startswith(folder + "/") for case, _, _ in ALL_CASES) >= 15, folder


@pytest.mark.parametrize(("case", "source", "expect"), ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_conformance_case(case: str, source: Path, expect: Path):
    spec = json.loads(expect.read_text(encoding="utf-8"))
    data = source.read_bytes()
    argv = spec.get("argv", [])
    result = run(data, source.name, argv)
    mismatch = first_mismatch(spec["expect"], result)
    assert mismatch is None, mismatch
    check_events(result)
    assert run(data, source.name, argv, chunk_bytes=3) == result
    if source.suffix == ".sse":
        crlf = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        assert run(crlf, source.name, argv) == result
