"""Divergences of each lens from the assembler, spelled out, and the matrix
pages render."""

from __future__ import annotations

import pytest
from lens_streams import (
    DONE,
    OK,
    REPEATED_NAME,
    REUSED_INDEX,
    SPARSE_INDEX,
    chunk,
    frames,
    sse,
    tool,
)

from inspector.lenses import run_all, run_lens
from inspector.lenses.base import LensCall, LensResult
from inspector.lenses.compare import all_divergences, divergences, match_calls
from inspector.lenses.matrix import build_matrix, lens_matrix, request_tools

pytest.importorskip("openai")


def messages(data: bytes, name: str) -> list[str]:
    stream, strict = frames(data)
    return [entry["message"] for entry in divergences(run_lens(name, stream), strict)]


def test_a_clean_stream_has_no_divergence():
    stream, strict = frames(OK)
    assert all_divergences(run_all(stream), strict) == []


def test_litellm_would_run_the_merged_arguments_and_drop_the_first_call():
    data = sse(
        chunk(tool(0, "call_1", "read", '{"path":"/a"}')),
        chunk(tool(0, "call_2", "read", '{"path":"/b"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    stream, strict = frames(data)
    found = divergences(run_lens("litellm", stream), strict)
    assert [(entry["kind"], entry["call"], entry["lens_call"]) for entry in found] == [
        ("arguments", 1, 0),
        ("missing", 0, None),
    ]
    assert found[0]["message"].startswith('LiteLLM would run read with {"path":"/a"}{"path":"/b"}')
    assert "does not parse" in found[0]["message"]
    assert found[1]["message"] == "LiteLLM would drop call_1"
    assert all(entry["lens"] == "litellm" for entry in found)


def test_the_sdk_would_raise_index_error():
    assert messages(SPARSE_INDEX, "openai") == [
        "the OpenAI SDK would raise IndexError: list index out of range"
    ]


def test_vercel_would_drop_a_call_of_a_second_choice():
    two = [
        {"index": 0, "delta": {"tool_calls": [tool(0, "call_1", "read", "{}")]}},
        {"index": 1, "delta": {"tool_calls": [tool(0, "call_2", "read", "{}")]}},
    ]
    data = sse(
        chunk(choices=two),
        chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        chunk(choices=[{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]),
        DONE,
    )
    assert messages(data, "vercel") == ["Vercel would drop call_2"]


def test_langchain_would_name_it_twice():
    assert messages(REPEATED_NAME, "langchain") == ["LangChain would name it read_fileread_file"]


def test_the_sdk_would_change_the_id_and_the_name():
    assert messages(REPEATED_NAME, "openai") == [
        "the OpenAI SDK would give call_x the id call_xcall_x",
        "the OpenAI SDK would name it read_fileread_file",
    ]


def test_strict_refuses_but_a_lens_would_run_something():
    data = sse(
        chunk(tool(0, "A", "read", '{"a":')),
        chunk(tool(0, "B", "read", '{"b":')),
        chunk(tool(0, args="1}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    found = messages(data, "litellm")
    assert len(found) == 1
    assert found[0].startswith(
        'strict refuses AMBIGUOUS_CONTINUATION; LiteLLM would run read with {"a":{"b":1}'
    )
    # LangChain repairs the truncated one and says how it read it.
    assert messages(data, "langchain") == [
        'strict refuses AMBIGUOUS_CONTINUATION; LangChain would run read with {"a":1}',
        'strict refuses AMBIGUOUS_CONTINUATION; LangChain would run read with {"b": (read as {})',
    ]


def test_when_both_fail_they_agree():
    data = sse(chunk(tool(0, "A", args="{}")), chunk(finish="stop"))
    # strict refuses (a call without a name); Vercel throws: no divergence.
    assert messages(data + DONE.encode(), "vercel") == []


def test_empty_and_empty_object_arguments_agree():
    data = sse(chunk(tool(0, "t1", "snooze", "")), chunk(finish="tool_calls"), DONE)
    assert messages(data, "litellm") == []  # "{}" vs "": both {}
    assert messages(data, "vercel") == []


def test_a_lens_that_parses_itself_would_not_run_bad_arguments():
    stream, strict = frames(
        sse(chunk(tool(0, "c", "read", '{"a":1}')), chunk(finish="tool_calls"), DONE)
    )
    lens = LensResult("vercel", "x", "y", gates_on_parse=True)
    lens.calls = [LensCall("c", "read", '{"a":1', None, "InvalidToolInputError: nope")]
    [entry] = divergences(lens, strict)
    assert entry["kind"] == "unparsed"
    assert entry["message"] == (
        'Vercel would not run read: its arguments {"a":1 do not parse (InvalidToolInputError: nope)'
    )


def test_the_strict_result_can_be_a_document_and_a_lenient_one_is_named():
    stream, strict = frames(REUSED_INDEX)
    lens = run_lens("openai", stream)
    assert divergences(lens, strict.to_dict()) == divergences(lens, strict)
    document = {**strict.to_dict(), "policy": "lenient", "refusal": {"code": "X"}}
    assert divergences(lens, document)[0]["message"].startswith("lenient refuses X; ")


def test_an_unavailable_lens_has_no_divergence():
    stream, strict = frames(SPARSE_INDEX)
    lens = LensResult("openai", "openai-python", "not installed", available=False)
    assert divergences(lens, strict) == []


def test_calls_are_matched_by_id_then_by_position():
    strict_calls = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    lens_calls = [LensCall("c", "x", "{}"), LensCall(None, "x", "{}"), LensCall("zz", "x", "{}")]
    assert match_calls(strict_calls, lens_calls) == {0: 2, 1: 1}


def cell_messages(table: dict, cell: dict) -> list[str]:
    return [table["divergences"][number]["message"] for number in cell["divergences"]]


def test_the_matrix_rows_are_calls_and_columns_are_lenses():
    table = build_matrix(REUSED_INDEX, "sse")
    assert [column["key"] for column in table["columns"]] == [
        "strict",
        "openai",
        "vercel",
        "litellm",
        "langchain",
    ]
    assert [row["label"] for row in table["rows"]] == ["call_a", "call_b"]
    first, second = table["rows"]
    assert first["cells"]["strict"]["arguments"] == {"path": "/a"}
    assert first["cells"]["vercel"]["diverges"] is False
    # A cell carries the numbers of its divergence records, never their joined text.
    dropped = first["cells"]["litellm"]
    assert dropped == {"present": False, "diverges": True, "divergences": dropped["divergences"]}
    assert cell_messages(table, dropped) == ["LiteLLM would drop call_a"]
    assert second["cells"]["litellm"]["diverges"] is True
    (ran,) = cell_messages(table, second["cells"]["litellm"])
    assert ran.startswith("LiteLLM would run read with")
    assert first["cells"]["openai"]["id"] == "call_acall_b"
    assert table["strict"] == {"outcome": "ok", "refusal": None}
    assert set(table["lenses"]) == {"openai", "vercel", "litellm", "langchain"}


def test_the_matrix_marks_a_raising_lens_and_rows_for_lens_only_calls():
    table = build_matrix(SPARSE_INDEX, "sse")
    openai_column = table["columns"][1]
    assert openai_column["error"] == "IndexError: list index out of range"
    assert openai_column["diverges"] is True
    cell = table["rows"][0]["cells"]["openai"]
    assert cell["snapshot"] is True and cell["diverges"] is True
    extra = build_matrix(
        sse(chunk(tool(None, "g1", "read", '{"p":')), chunk(tool(None, args="1}")), DONE), "sse"
    )
    lens_only = [row for row in extra["rows"] if row["strict_position"] is None]
    assert len(lens_only) == 1
    assert lens_only[0]["cells"]["langchain"]["present"] is True
    assert lens_only[0]["cells"]["strict"]["present"] is False


class _Capture:
    def __init__(self, raw, stream_format="sse", request_json=""):
        self.raw = memoryview(raw)  # what a BinaryField may hand back
        self.stream_format = stream_format
        self.request_json = request_json


def test_lens_matrix_reads_a_capture_and_its_request_tools():
    tools = [{"type": "function", "function": {"name": "read", "strict": True}}]
    request = '{"model": "m", "tools": ' + __import__("json").dumps(tools) + "}"
    assert request_tools(request) == tools
    assert request_tools("not json") is None
    table = lens_matrix(_Capture(OK, request_json=request))
    assert table["rows"][0]["cells"]["openai"]["arguments"] == {"path": "/a"}
    assert table["divergences"] == []


def test_the_lens_modules_import_neither_django_nor_the_sdk():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys; import inspector.lenses, inspector.lenses.compare, inspector.lenses.matrix; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'openai'}))"
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        check=True,
    )
    assert out.stdout.strip() == "[]"
