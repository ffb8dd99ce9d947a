"""`manage.py minimize PATH`: progress on stderr, the stream on stdout (or
--out), --export writes a case; exit 0 minimized, 2 unreadable or ok."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from minimize_streams import CASES, OK

from inspector.minimize import minimize

PROJECT = Path(__file__).resolve().parents[2]
BY_NAME = {(code, variant): data for code, variant, _, data in CASES}


def manage(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, "manage.py", "minimize", *args],
        input=stdin,
        capture_output=True,
        cwd=PROJECT,
        env=env,
        timeout=120,
    )


def assert_exit_2(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0]
    return lines[0]


@pytest.fixture
def refused(tmp_path) -> Path:
    path = tmp_path / "stray.sse"
    path.write_bytes(BY_NAME["INVALID_ARGUMENTS", "stray_brace"])
    return path


def test_prints_the_minimized_stream_and_progress(refused):
    proc = manage(str(refused))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == minimize(refused.read_bytes(), "sse").data
    err = proc.stderr.decode().splitlines()
    assert any(line.startswith("minimize: round 1 frames") for line in err)
    assert any("tests," in line and "bytes," in line and "frames" in line for line in err)
    assert "keeps INVALID_ARGUMENTS" in err[-1]


def test_out_and_export(refused, tmp_path):
    out = tmp_path / "small.sse"
    cases = tmp_path / "cases"
    proc = manage(
        str(refused), "--out", str(out), "--export", str(cases), "--name", "stray_brace", "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert out.read_bytes() == minimize(refused.read_bytes(), "sse").data
    assert (cases / "stray_brace.sse").read_bytes() == out.read_bytes()
    case = json.loads((cases / "stray_brace.expect.json").read_text())
    assert case["expect"]["refusal"]["code"] == "INVALID_ARGUMENTS"
    assert "stray.sse" in case["about"]


def test_jsonl_from_stdin_with_seconds():
    data = BY_NAME["AMBIGUOUS_CONTINUATION", "no_index_jsonl"]
    proc = manage("-", "--format", "jsonl", "--seconds", "5", stdin=data)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == minimize(data, "jsonl").data


def test_an_ok_stream_exits_2(tmp_path):
    path = tmp_path / "ok.sse"
    path.write_bytes(OK["one_call"])
    line = assert_exit_2(manage(str(path)))
    assert "not refused" in line and "nothing to minimize" in line


@pytest.mark.parametrize(
    "args",
    [
        ["/nonexistent/stream.sse"],
        ["--seconds", "0", "{path}"],
        ["--seconds", "soon", "{path}"],
        ["--format", "xml", "{path}"],
        ["--name", "x", "{path}"],
        ["--export", "{tmp}", "--name", "../escape", "{path}"],
    ],
)
def test_unreadable_or_bad_arguments_exit_2(args, refused, tmp_path):
    args = [a.format(path=refused, tmp=tmp_path) for a in args]
    assert_exit_2(manage(*args))


def test_a_har_that_is_not_json_exits_2(tmp_path):
    path = tmp_path / "broken.har"
    path.write_bytes(b"{not json")
    assert "HAR" in assert_exit_2(manage(str(path)))
