"""`manage.py minimize PATH`: progress on stderr, the stream on stdout (or
--out), --export writes a case; exit 0 minimized, 2 unreadable or ok."""

from __future__ import annotations

import json
from pathlib import Path

import gemini_arrays
import pytest
from command_line import manage as run_manage
from command_line import one_line_error
from django.core.management import call_command
from django.core.management.base import CommandError
from minimize_streams import CASES, DONE, OK, ROLE, USAGE, calls, chunk, sse, tool

from inspector.assembly import assemble
from inspector.assembly.jsontext import dumps
from inspector.lenses import openai_sdk
from inspector.minimize import failure_signature, minimize
from inspector.minimize.export import expectation
from inspector.minimize.lens import lens_target
from inspector.minimize.signature import CAUSE_UNCLOSED

BY_NAME = {(code, variant): data for code, variant, _, data in CASES}


def manage(*args: str, stdin: bytes = b""):
    return run_manage("minimize", *args, stdin=stdin, timeout=120)


def strict_code(data: bytes) -> str | None:
    refusal = assemble(data, fmt="sse").refusal
    return refusal.code if refusal else None


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
    line = one_line_error(manage(str(path)))
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
    one_line_error(manage(*args))


def test_a_har_that_is_not_json_exits_2(tmp_path):
    path = tmp_path / "broken.har"
    path.write_bytes(b"{not json")
    assert "HAR" in one_line_error(manage(str(path)))


# --- --lens: keep a lens's divergence, on a stream strict accepts too ----------------------

# Two calls sharing index 0 (Ollama), with noise: strict accepts two calls,
# LiteLLM (index only) merges them into one.
MERGED = sse(
    ROLE,
    calls(tool(0, "call_a", "read", '{"path":"/a"}')),
    chunk({"content": "and"}),
    calls(tool(0, "call_b", "read", '{"path":"/b"}')),
    chunk(None, finish="tool_calls"),
    USAGE,
    DONE,
)


@pytest.fixture
def merged(tmp_path) -> Path:
    path = tmp_path / "merged.sse"
    path.write_bytes(MERGED)
    return path


def test_lens_keeps_the_divergence_and_exports_the_strict_expectation(merged, tmp_path):
    cases = tmp_path / "cases"
    proc = manage(str(merged), "--lens", "litellm", "--export", str(cases), "--name", "merge")
    assert proc.returncode == 0, proc.stderr
    target = lens_target("litellm", MERGED, "sse")
    assert proc.stdout == minimize(MERGED, "sse", target=target, keeps=target.description).data
    assert target(proc.stdout) and len(proc.stdout) < len(MERGED)
    assert "keeps LiteLLM diverges: merges calls" in proc.stderr.decode().splitlines()[-2]

    assert (cases / "merge.sse").read_bytes() == proc.stdout
    case = json.loads((cases / "merge.expect.json").read_text())
    assert "keeps LiteLLM diverges: merges calls" in case["about"]
    # The expectation is what strict makes of the minimized stream: two calls, ok.
    assert case["expect"] == json.loads(dumps(expectation(assemble(proc.stdout, fmt="sse"))))
    assert case["expect"]["outcome"] == "ok"
    ids = [call["id"] for call in case["expect"]["calls"]]  # shortened, still two
    assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)


def test_lens_on_a_refused_stream_keeps_the_refusal_too(refused):
    proc = manage(str(refused), "--lens", "litellm", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert strict_code(proc.stdout) == "INVALID_ARGUMENTS"
    assert "runs a call strict refuses (INVALID_ARGUMENTS)" in proc.stderr.decode()


@pytest.mark.parametrize(
    ("lens", "reason"),
    [
        ("vercel", "Vercel agrees with strict on this stream: no divergence to keep"),
        (
            "nope",
            "unknown lens 'nope': use one of openai, anthropic, google-genai, vercel, litellm",
        ),
    ],
)
def test_lens_without_a_divergence_or_unknown_exits_2(merged, lens, reason):
    assert reason in one_line_error(manage(str(merged), "--lens", lens))


def test_lens_on_a_stream_every_lens_agrees_on_exits_2(tmp_path):
    path = tmp_path / "ok.sse"
    path.write_bytes(OK["one_call"])
    assert "LiteLLM agrees with strict" in one_line_error(manage(str(path), "--lens", "litellm"))


def test_an_unavailable_lens_exits_2(merged, monkeypatch):
    def missing():
        raise ImportError("No module named 'openai'")

    monkeypatch.setattr(openai_sdk, "_load", missing)
    with pytest.raises(CommandError, match="the openai lens is unavailable") as raised:
        call_command("minimize", str(merged), "--lens", "openai", "--quiet")
    assert raised.value.returncode == 2


# --- a JSON array (Gemini without alt=sse) ---------------------------------------------------


def test_a_json_array_comes_out_a_json_array_with_the_same_failure(tmp_path):
    path = tmp_path / "renamed.json"
    path.write_bytes(gemini_arrays.RENAMED)
    proc = manage(str(path), "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == minimize(gemini_arrays.RENAMED, "json-array").data
    elements = json.loads(proc.stdout)
    assert type(elements) is list and 0 < len(elements) < 7
    wanted = failure_signature(gemini_arrays.RENAMED, "json-array")
    assert failure_signature(proc.stdout, "json-array") == wanted
    assert "keeps IDENTITY_CONFLICT" in proc.stderr.decode()

    cases = tmp_path / "cases"
    proc = manage(str(path), "--quiet", "--export", str(cases), "--name", "renamed")
    assert proc.returncode == 0, proc.stderr
    case = json.loads((cases / "renamed.expect.json").read_text())
    assert case["expect"]["refusal"]["code"] == "IDENTITY_CONFLICT"
    sse_form = (cases / "renamed.sse").read_bytes()
    assert failure_signature(sse_form, "sse") == wanted


def test_an_unclosed_json_array_stays_unclosed_and_has_no_sse_export(tmp_path):
    path = tmp_path / "unclosed.json"
    path.write_bytes(gemini_arrays.UNCLOSED)
    proc = manage("-", "--format", "json-array", "--quiet", stdin=gemini_arrays.UNCLOSED)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(b"[") and not proc.stdout.endswith(b"]")
    assert failure_signature(proc.stdout, "json-array").cause == CAUSE_UNCLOSED
    export = manage(str(path), "--quiet", "--export", str(tmp_path / "cases"), "--name", "u")
    line = one_line_error(export)
    assert "can't export" in line and "no SSE form" in line
