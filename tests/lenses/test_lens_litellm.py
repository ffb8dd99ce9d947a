"""The LiteLLM lens: `stream_chunk_builder`'s index map (index only, later
id and name overwrite, missing index as 0, id- or name-less calls dropped,
empty arguments as "{}")."""

from __future__ import annotations

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

from inspector.lenses import litellm, run_lens


def lens(data: bytes):
    stream, _ = frames(data)
    return run_lens("litellm", stream)


def test_the_module_names_the_upstream_file_and_version():
    assert "streaming_chunk_builder_utils.py" in litellm.__doc__
    assert "47fdbd55" in litellm.__doc__


def test_a_plain_stream():
    result = lens(OK)
    assert result.error is None
    assert not result.gates_on_parse
    assert calls(result) == [("call_A", "read", '{"path":"/a"}')]


def test_two_ids_sharing_index_0_merge_keeping_the_last_id_and_name():
    result = lens(REUSED_INDEX)
    assert calls(result) == [("call_b", "read", '{"path":"/a"}{"path":"/b"}')]
    assert not result.calls[0].parsed


def test_a_later_name_overwrites():
    data = sse(
        chunk(tool(0, "c1", "first", '{"a":')),
        chunk(tool(0, name="second", args="1}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("c1", "second", '{"a":1}')]


def test_a_repeated_name_and_id_are_harmless():
    assert calls(lens(REPEATED_NAME)) == [("call_x", "read_file", '{"path":"/a"}')]


def test_a_call_without_an_id_is_dropped_silently():
    data = sse(
        chunk(tool(0, "c0", "read", "{}")),
        chunk(tool(1, MISSING, "write", '{"x":1}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error is None
    assert calls(result) == [("c0", "read", "{}")]
    assert result.notes == ["index 1 dropped: it has no id (LiteLLM drops it silently)"]


def test_empty_arguments_become_an_empty_object():
    data = sse(
        chunk(tool(0, "t1", "snooze", "")), chunk(tool(0, args="")), chunk(finish="tool_calls")
    )
    result = lens(data + DONE.encode())
    assert calls(result) == [("t1", "snooze", "{}")]
    assert result.calls[0].arguments == {}


def test_a_missing_index_counts_as_0():
    data = sse(
        chunk(tool(MISSING, "g1", "read", '{"p":')),
        chunk(tool(MISSING, args="1}")),
        chunk(tool(0, args=" ")),
        chunk(finish="stop"),
        DONE,
    )
    assert calls(lens(data)) == [("g1", "read", '{"p":1} ')]


def test_calls_come_out_by_index_and_sparse_indexes_are_fine():
    assert calls(lens(SPARSE_INDEX)) == [("toolu_1", "read_file", '{"path": "a.txt"}')]
    data = sse(
        chunk(tool(2, "c2", "b", "{}"), tool(0, "c0", "a", "{}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("c0", "a", "{}"), ("c2", "b", "{}")]


def test_every_choice_feeds_the_same_index_map():
    two = [
        {"index": 0, "delta": {"tool_calls": [tool(0, "c0", "f", "{}")]}},
        {"index": 1, "delta": {"tool_calls": [tool(0, "c1", "g", "{}")]}},
    ]
    assert calls(lens(sse(chunk(choices=two), DONE))) == [("c1", "g", "{}{}")]


def test_an_entry_without_a_function_is_skipped():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")),
        chunk({"index": 0, "id": "other", "extra_content": {"google": {}}}),
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("c1", "read", "{}")]


def test_an_arguments_object_is_serialised_by_json_dumps():
    data = sse(chunk(tool(0, "c1", "get_weather", {"city": "Paris"})), DONE)
    assert calls(lens(data)) == [("c1", "get_weather", '{"city": "Paris"}')]


def test_no_finish_reason_and_no_done_are_not_checked():
    assert calls(lens(sse(chunk(tool(0, "c1", "read", "{}"))))) == [("c1", "read", "{}")]


def test_an_error_chunk_raises_api_error_and_bad_json_raises_json_decode_error():
    error = lens(sse(chunk(tool(0, "c1", "read", "{}")), {"error": {"message": "boom"}}, DONE))
    assert error.error == "APIError: boom"
    assert error.calls == []
    broken = lens(sse(chunk(tool(0, "c1", "read", "{}")), "data: {nope\n\n", DONE))
    assert broken.error.startswith("JSONDecodeError")
