"""The LangChain lens: langchain-openai's tool-call chunks merged by index
unless ids conflict, names concatenated, arguments read by
`parse_partial_json`."""

from __future__ import annotations

import pytest
from lens_streams import (
    DONE,
    MISSING,
    OK,
    REPEATED_NAME,
    REUSED_INDEX,
    SPARSE_INDEX,
    calls,
    chunk,
    frames,
    sse,
    tool,
)

from inspector.lenses import langchain, run_lens


def lens(data: bytes):
    stream, _ = frames(data)
    return run_lens("langchain", stream)


def test_the_module_names_the_upstream_files_and_versions():
    assert "_merge.py" in langchain.__doc__
    assert "0448fad2" in langchain.__doc__


def test_a_plain_stream():
    result = lens(OK)
    assert result.error is None
    assert result.gates_on_parse
    assert calls(result) == [("call_A", "read", '{"path":"/a"}')]
    assert result.calls[0].arguments == {"path": "/a"}


def test_the_same_index_with_conflicting_ids_stays_two_calls():
    # #35281: "same index, different ids" no longer merge.
    assert calls(lens(REUSED_INDEX)) == [
        ("call_a", "read", '{"path":"/a"}'),
        ("call_b", "read", '{"path":"/b"}'),
    ]


def test_a_repeated_name_is_concatenated_and_a_repeated_id_is_not():
    assert calls(lens(REPEATED_NAME)) == [("call_x", "read_fileread_file", '{"path":"/a"}')]


def test_id_less_continuations_merge_into_the_first_call_holding_the_index():
    data = sse(
        chunk(tool(0, "A", "read", '{"a":')),
        chunk(tool(0, "B", "read", '{"b":')),
        chunk(tool(0, args="1}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert calls(result) == [("A", "read", '{"a":1}'), ("B", "read", '{"b":')]
    # The truncated one comes out "repaired": {"b": -> {}.
    assert result.calls[1].arguments == {}


def test_an_id_that_changes_mid_call_splits_it_into_a_nameless_second_call():
    data = sse(
        chunk(tool(0, "call_A", "bash", "")),
        chunk(tool(0, "call_B", args='{"cmd":"ls"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert calls(result) == [("call_A", "bash", ""), ("call_B", "", '{"cmd":"ls"}')]
    assert [call.arguments for call in result.calls] == [{}, {"cmd": "ls"}]


def test_sparse_indexes_are_fine():
    assert calls(lens(SPARSE_INDEX)) == [("toolu_1", "read_file", '{"path": "a.txt"}')]


def test_a_missing_index_arrives_as_none_so_each_chunk_stays_apart():
    # Through the SDK's model_dump() the key is there, as None: no KeyError.
    data = sse(
        chunk(tool(MISSING, "g1", "read", '{"p":')),
        chunk(tool(MISSING, args="1}")),
        chunk(finish="stop"),
        DONE,
    )
    result = lens(data)
    assert result.error is None
    assert calls(result) == [("g1", "read", '{"p":'), (None, None, "1}")]
    assert result.calls[0].arguments == {}
    assert not result.calls[1].parsed
    assert result.calls[1].parse_error.startswith("invalid tool call")


def test_duplicate_indexes_inside_the_first_chunk_stay_separate():
    data = sse(
        chunk(tool(0, "f:0", "list_files"), tool(0, args=' {"')),
        chunk(tool(0, args='path": "."}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert calls(result) == [("f:0", "list_files", 'path": "."}'), (None, "", ' {"')]
    assert not result.calls[0].parsed


def test_truncated_arguments_are_repaired_into_a_valid_call():
    data = sse(chunk(tool(0, "c1", "read", '{"path":"src/ma')), chunk(finish="length"), DONE)
    result = lens(data)
    assert result.error is None
    assert result.calls[0].arguments == {"path": "src/ma"}


def test_a_mismatched_bracket_makes_an_invalid_tool_call():
    data = sse(chunk(tool(0, "c1", "read", '{"a":]')), chunk(finish="tool_calls"), DONE)
    result = lens(data)
    assert not result.calls[0].parsed
    assert result.calls[0].parse_error == "invalid tool call: parse_partial_json gives None"


def test_an_entry_without_function_raises_attribute_error():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")),
        chunk({"index": 0, "extra_content": {"google": {"thought_signature": "s"}}}),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error == "AttributeError: 'NoneType' object has no attribute 'get'"
    assert result.calls == []


def test_an_arguments_object_fails_pydantic_validation():
    result = lens(sse(chunk(tool(0, "c1", "get_weather", {"city": "Paris"})), DONE))
    assert result.error.startswith("ValidationError")


def test_only_the_first_choice_is_read():
    two = [
        {"index": 0, "delta": {"tool_calls": [tool(0, "c0", "f", "{}")]}},
        {"index": 1, "delta": {"tool_calls": [tool(0, "c1", "g", "{}")]}},
    ]
    assert calls(lens(sse(chunk(choices=two), DONE))) == [("c0", "f", "{}")]


def test_an_error_chunk_raises_api_error():
    assert lens(sse({"error": {"message": "boom"}}, DONE)).error == "APIError: boom"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ('{"a": 1}', {"a": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": "x', {"a": "x"}),
        ('{"a":', {}),
        ('{"a":1}{"a":2}', {"a": 1}),
        ('{"a": "line\nbreak"}', {"a": "line\nbreak"}),
        ('{"a":]', None),
        ('{"a": "x\\', {"a": "x"}),
        ('{"a":' + " " * 5000, {}),
        ('{"a": 1, "b": ' + "x" * 50_000, {"a": 1}),
    ],
)
def test_parse_partial_json(text, parsed):
    assert langchain.parse_partial_json(text) == parsed
