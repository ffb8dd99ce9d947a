"""regression_case(): the exported `.sse` + expectation pass the conformance
checker's logic (a copy of it, written here: subset match, exit code,
event invariants, CRLF gives the same result)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from minimize_streams import CASES, DONE, OK, ROLE, calls, chunk, jsonl, sse, tool

from inspector.assembly import assemble
from inspector.minimize import minimize, regression_case, to_sse
from inspector.minimize.export import case_files

PROJECT = Path(__file__).resolve().parents[2]


# -- a copy of the checking logic ---------------------------------------------------------


def same_scalar(expected, got) -> bool:
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return expected == got
    return type(expected) is type(got) and expected == got


def mismatch(expected, got, path="$"):
    """Where `got` fails the recursive subset match of `expected`, or None."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return path
        for key, value in expected.items():
            if key not in got:
                return f"{path}.{key} missing"
            found = mismatch(value, got[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(got, list) or len(expected) != len(got):
            return f"{path} length"
        for i, (e, g) in enumerate(zip(expected, got, strict=True)):
            found = mismatch(e, g, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if same_scalar(expected, got) else f"{path}: {expected!r} != {got!r}"


def check_invariants(result: dict, exit_code: int) -> None:
    outcome = result["outcome"]
    assert outcome in ("ok", "refused")
    assert exit_code == (0 if outcome == "ok" else 1)
    calls_, events = result["calls"], result["events"]

    def positions(kind, call=None):
        return [
            i
            for i, e in enumerate(events)
            if e["type"] == kind and (call is None or e.get("call") == call)
        ]

    for n, call in enumerate(calls_):
        wanted = 0 if call["started_frame"] is None else 1
        assert len(positions("toolcall_start", n)) == wanted
    refusals, ends = positions("refusal"), positions("toolcall_end")
    if outcome == "refused":
        assert refusals == [len(events) - 1]
        assert not ends
    else:
        assert not refusals
        for n in range(len(calls_)):
            call_ends, call_starts = positions("toolcall_end", n), positions("toolcall_start", n)
            assert len(call_ends) == 1 and call_starts and call_ends[0] > call_starts[0]
        assert len(ends) == len(calls_)


def policy_of(case: dict) -> str:
    argv = case.get("argv", [])
    return argv[argv.index("--policy") + 1] if "--policy" in argv else "strict"


def check_case(data: bytes, case: dict) -> None:
    """What the checker does with one case, with our assembler in-process."""
    assert set(case) <= {"about", "argv", "expect"} and "expect" in case
    policy = policy_of(case)
    result = assemble(data, fmt="sse", policy=policy).to_dict()
    assert mismatch(case["expect"], result) is None, mismatch(case["expect"], result)
    check_invariants(result, 0 if result["outcome"] == "ok" else 1)
    crlf = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    assert assemble(crlf, fmt="sse", policy=policy).to_dict() == result


# -- the cases ------------------------------------------------------------------------------

EXPORTS = [
    *[(f"{code}-{variant}", fmt, data, "strict") for code, variant, fmt, data in CASES],
    *[
        (name, "jsonl" if name.endswith("_jsonl") else "sse", data, "strict")
        for name, data in OK.items()
    ],
    *[
        (f"{code}-{variant}-lenient", fmt, data, "lenient")
        for code, variant, fmt, data in CASES
        if code == "AMBIGUOUS_CONTINUATION"
    ],
]


@pytest.mark.parametrize(("name", "fmt", "data", "policy"), EXPORTS, ids=[e[0] for e in EXPORTS])
def test_exported_case_passes_the_checks(name, fmt, data, policy):
    sse_bytes, case = regression_case(data, fmt, name="case_1", about="why", policy=policy)
    assert case["about"] == "why"
    expect = case["expect"]
    for key in ("outcome", "refusal", "frames", "finish_reason", "calls", "dropped", "anomalies"):
        assert key in expect
    if policy == "lenient":
        assert case["argv"] == ["--policy", "lenient"]
        assert expect["policy"] == "lenient"
    else:
        assert "argv" not in case
    check_case(sse_bytes, case)
    # JSON round trip: what is written to NAME.expect.json reads back the same.
    files = case_files(data, fmt, name="case_1", about="why", policy=policy)
    assert set(files) == {"case_1.sse", "case_1.expect.json"}
    assert files["case_1.sse"] == sse_bytes
    assert json.loads(files["case_1.expect.json"]) == json.loads(json.dumps(case))


@pytest.mark.parametrize(
    ("code", "variant", "fmt", "data"), CASES, ids=[f"{c}-{v}" for c, v, _, _ in CASES]
)
def test_minimized_then_exported(code, variant, fmt, data):
    found = minimize(data, fmt)
    sse_bytes, case = regression_case(found.data, found.fmt, name="m", about="minimized")
    assert case["expect"]["refusal"]["code"] == code
    check_case(sse_bytes, case)


def test_refusal_fields_pinned_and_message_not():
    _, case = regression_case(OK["one_call"], "sse", name="ok", about="")
    assert case["expect"]["refusal"] is None and case["expect"]["outcome"] == "ok"
    data = dict(((c, v), d) for c, v, _, d in CASES)["EMPTY_RESPONSE", "nothing_said"]
    _, case = regression_case(data, "sse", name="empty", about="")
    assert case["expect"]["refusal"] == {
        "code": "EMPTY_RESPONSE",
        "frame": 5,
        "call": None,
        "choice": 0,
        "retryable": True,
    }


def test_invalid_at_offset_only_when_the_scan_found_it():
    by_name = dict(((c, v), d) for c, v, _, d in CASES)
    _, scan = regression_case(
        by_name["INVALID_ARGUMENTS", "stray_brace"], "sse", name="s", about=""
    )
    bad = scan["expect"]["calls"][1]
    assert bad["invalid_at"] == {"frame": 5, "offset": 15}  # just past the root
    assert "invalid_at" not in scan["expect"]["calls"][0]
    assert scan["expect"]["calls"][0]["arguments"] == {"path": "/ok"}

    _, parsed = regression_case(
        by_name["INVALID_ARGUMENTS", "parser_found_crlf"], "sse", name="p", about=""
    )
    call = parsed["expect"]["calls"][0]
    assert call["invalid_at"] == {"frame": 2}  # parsers differ on the offset: frame only
    assert call["arguments_text"] == '{"n":01}'

    cut = sse(
        ROLE,
        calls(tool(0, "c", "f", '{"a":')),
        calls(tool(0, args="1")),
        chunk(finish="stop"),
        DONE,
    )
    _, ended = regression_case(cut, "sse", name="e", about="")
    assert ended["expect"]["calls"][0]["invalid_at"] == {"frame": 2}  # unexpected end: the parser's


def test_jsonl_becomes_sse_with_the_same_frames():
    data = jsonl(
        ROLE, calls(tool(0, "c", "f", "{}")), chunk(finish="tool_calls"), '"[DONE]"', "   "
    )
    converted = to_sse(data, "jsonl")
    assert converted.endswith(b"data: [DONE]\n\n")
    assert converted.count(b"\n\n") == 4
    assert assemble(converted, fmt="sse").to_dict() == assemble(data, fmt="jsonl").to_dict()
    assert to_sse(OK["one_call"], "sse") is OK["one_call"]


def test_bad_names_are_refused():
    for name in ("", "../x", "a/b", ".hidden", "x" * 200):
        with pytest.raises(ValueError, match="case name"):
            regression_case(OK["one_call"], "sse", name=name, about="")
    with pytest.raises(ValueError, match="policy"):
        regression_case(OK["one_call"], "sse", name="x", about="", policy="loose")


def test_the_assemble_command_agrees(tmp_path):
    """The real thing, as the checker runs it: `manage.py assemble NAME.sse [argv]`."""
    by_name = dict(((c, v), d) for c, v, _, d in CASES)
    picks = [
        (by_name["INVALID_ARGUMENTS", "stray_brace"], "sse", "strict"),
        (by_name["AMBIGUOUS_CONTINUATION", "no_index_jsonl"], "jsonl", "lenient"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    for number, (data, fmt, policy) in enumerate(picks):
        name = f"exported_{number}"
        for file_name, content in case_files(data, fmt, name=name, about="", policy=policy).items():
            (tmp_path / file_name).write_bytes(content)
        case = json.loads((tmp_path / f"{name}.expect.json").read_text())
        proc = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "assemble",
                str(tmp_path / f"{name}.sse"),
                *case.get("argv", []),
            ],
            capture_output=True,
            cwd=PROJECT,
            env=env,
            timeout=60,
        )
        result = json.loads(proc.stdout)
        assert mismatch(case["expect"], result) is None
        check_invariants(result, proc.returncode)
