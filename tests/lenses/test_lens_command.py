"""`manage.py assemble --lens NAME`: a lens's result as JSON."""

from __future__ import annotations

import base64
import json

import orjson
import pytest
from command_line import manage as run_manage
from command_line import one_line_error
from django.core.management import call_command
from django.core.management.base import CommandError
from lens_streams import OK, REUSED_INDEX, chunk, sse, tool


def test_a_lens_prints_its_result_and_divergences(tmp_path):
    path = tmp_path / "reused.sse"
    path.write_bytes(REUSED_INDEX)
    proc = manage(str(path), "--lens", "litellm")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") == 1
    document = orjson.loads(proc.stdout)
    assert list(document)[:4] == ["lens", "library", "version", "available"]
    assert document["lens"] == "litellm"
    assert document["available"] is True
    assert document["error"] is None
    assert [call["id"] for call in document["calls"]] == ["call_b"]
    assert document["calls"][0]["arguments_text"] == '{"path":"/a"}{"path":"/b"}'
    assert document["calls"][0]["parsed"] is False
    kinds = [entry["kind"] for entry in document["divergences"]]
    assert kinds == ["arguments", "missing"]


def test_a_refused_stream_still_exits_0_with_a_lens():
    cut = sse(chunk(tool(0, "call_B", "write", '{"x":')))
    proc = manage("-", "--lens", "langchain", "--format", "sse", stdin=cut)
    assert proc.returncode == 0, proc.stderr
    document = orjson.loads(proc.stdout)
    assert document["calls"][0]["arguments"] == {}
    assert document["divergences"][0]["message"].startswith(
        "strict refuses INCOMPLETE_STREAM; LangChain would run write with"
    )


def test_the_openai_lens_through_the_command():
    pytest.importorskip("openai")
    proc = manage("-", "--lens", "openai", stdin=OK)
    assert proc.returncode == 0, proc.stderr
    document = orjson.loads(proc.stdout)
    assert document["library"] == "openai-python"
    assert document["calls"][0]["arguments"] == {"path": "/a"}
    assert document["divergences"] == []


def test_an_unknown_lens_is_one_line_and_exit_2():
    line = one_line_error(manage("-", "--lens", "nope", stdin=OK))
    assert "--lens" in line and "nope" in line


def test_unreadable_input_with_a_lens_is_exit_2(tmp_path):
    line = one_line_error(manage(str(tmp_path / "missing.sse"), "--lens", "vercel"))
    assert "can't read" in line
    line = one_line_error(manage("-", "--lens", "vercel", stdin=b"garbage that is no format"))
    assert "format" in line


def test_a_har_entry_and_json_lines_work_with_a_lens():
    body = OK.decode()
    har = {
        "log": {
            "entries": [
                {
                    "request": {"url": "https://example.test/v1/chat/completions"},
                    "response": {
                        "content": {
                            "mimeType": "text/event-stream",
                            "encoding": "base64",
                            "text": base64.b64encode(body.encode()).decode(),
                        }
                    },
                }
            ]
        }
    }
    proc = manage("-", "--lens", "vercel", "--format", "har", stdin=json.dumps(har).encode())
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["calls"][0]["id"] == "call_A"
    lines = b"".join(
        json.dumps(item).encode() + b"\n"
        for item in (chunk(tool(0, "j1", "read", "{}")), chunk(finish="tool_calls"), "[DONE]")
    )
    proc = manage("-", "--lens", "litellm", "--format", "jsonl", stdin=lines)
    assert orjson.loads(proc.stdout)["calls"][0]["id"] == "j1"


def test_without_a_lens_the_command_is_unchanged():
    proc = manage("-", stdin=REUSED_INDEX)
    assert proc.returncode == 0
    document = orjson.loads(proc.stdout)
    assert document["policy"] == "strict"
    assert "lens" not in document
    refused = manage("-", stdin=sse(chunk(tool(0, "c", "w", '{"x":'))))
    assert refused.returncode == 1


def test_in_process_with_chunk_bytes_and_an_unknown_lens(tmp_path, capsys):
    path = tmp_path / "ok.sse"
    path.write_bytes(OK)
    call_command("assemble", str(path), lens="vercel", chunk_bytes=3)
    document = orjson.loads(capsys.readouterr().out)
    assert document["calls"][0]["arguments"] == {"path": "/a"}
    with pytest.raises(CommandError) as raised:
        call_command("assemble", str(path), lens="nope")
    assert raised.value.returncode == 2


def manage(*args: str, stdin: bytes = b""):
    return run_manage("assemble", *args, stdin=stdin)
