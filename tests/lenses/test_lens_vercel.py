"""The Vercel AI SDK lens: the streaming tool-call tracker (id, then index,
then the latest call) behind the openai-compatible provider's pending buffer
and chunk schema."""

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

from inspector.lenses import run_lens, vercel


def lens(data: bytes):
    stream, _ = frames(data)
    return run_lens("vercel", stream)


def test_the_module_names_the_upstream_file_and_version():
    assert "streaming-tool-call-tracker.ts" in vercel.__doc__
    assert "ed857f50" in vercel.__doc__
    assert lens(OK).version == vercel.LENS.version


def test_a_plain_stream():
    result = lens(OK)
    assert result.error is None
    assert result.gates_on_parse
    assert calls(result) == [("call_A", "read", '{"path":"/a"}')]
    assert result.calls[0].arguments == {"path": "/a"}


def test_a_new_id_at_a_reused_index_is_a_new_call():
    # "keep distinct tool calls that reuse an index": the id comes first.
    result = lens(REUSED_INDEX)
    assert calls(result) == [
        ("call_a", "read", '{"path":"/a"}'),
        ("call_b", "read", '{"path":"/b"}'),
    ]


def test_a_repeated_id_finds_its_call_and_a_repeated_name_is_ignored():
    result = lens(REPEATED_NAME)
    assert calls(result) == [("call_x", "read_file", '{"path":"/a"}')]


def test_non_zero_and_non_contiguous_indexes_are_fine():
    result = lens(SPARSE_INDEX)
    assert result.error is None
    assert calls(result) == [("toolu_1", "read_file", '{"path": "a.txt"}')]


def test_id_less_deltas_follow_the_index_then_the_latest_call():
    data = sse(
        chunk(tool(0, "a", "f", '{"x":'), tool(1, "b", "g", '{"y":')),
        chunk(tool(0, args="1}")),  # by index: a
        chunk(tool(MISSING, args="2")),  # no index: the latest call, which index 0 just made a
        chunk(tool(1, args="3}")),  # by index: b
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("a", "f", '{"x":1}2'), ("b", "g", '{"y":3}')]


def test_an_empty_continuation_id_falls_back_to_the_index():
    data = sse(
        chunk(tool(0, "call_q", "rag", "")),
        chunk(tool(0, "", "", '{"q": 1}', type="function")),
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("call_q", "rag", '{"q": 1}')]


def test_an_id_that_changes_mid_call_without_a_name_throws():
    data = sse(
        chunk(tool(0, "call_A", "bash", "")),
        chunk(tool(0, "call_B", args='{"cmd":"ls"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error == "InvalidResponseDataError: Expected 'function.name' to be a string."
    assert result.calls == []  # the stream errors before flush hands any call over


def test_a_new_call_without_an_id_throws():
    result = lens(
        sse(chunk(tool(MISSING, MISSING, "read", "{}")), chunk(finish="tool_calls"), DONE)
    )
    assert result.error == "InvalidResponseDataError: Expected 'id' to be a string."


def test_arguments_before_the_name_wait_in_the_pending_buffer():
    data = sse(
        chunk(tool(0, "call_late", args="")),
        chunk(tool(0, "call_late", "test-tool", '{"')),
        chunk(tool(0, args='value":1}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("call_late", "test-tool", '{"value":1}')]


def test_a_pending_call_that_never_gets_a_name_throws_at_flush():
    data = sse(chunk(tool(0, "c1", args='{"a":1}')), chunk(finish="tool_calls"), DONE)
    result = lens(data)
    assert result.error == "InvalidResponseDataError: Expected 'function.name' to be a string."


def test_an_empty_first_name_counts_as_known_and_sticks():
    # vercel/ai#16507: the call finalizes with the tool name "".
    data = sse(
        chunk(tool(0, "c1", "", '{"q"')),
        chunk(tool(0, name="search", args=":1}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    assert calls(lens(data)) == [("c1", "", '{"q":1}')]


def test_a_stream_without_a_finish_reason_is_an_error_after_the_calls():
    result = lens(sse(chunk(tool(0, "c1", "read", "{}")), DONE))
    assert result.error == (
        "InvalidResponseDataError: Response stream ended without a finish reason."
    )
    assert calls(result) == [("c1", "read", "{}")]


def test_blank_arguments_are_an_empty_object_and_bad_json_is_invalid_input():
    blank = lens(sse(chunk(tool(0, "t", "snooze", " ")), chunk(finish="tool_calls"), DONE))
    assert blank.calls[0].arguments == {}
    bad = lens(sse(chunk(tool(0, "t", "read", '{"a":1}{"a":2}')), chunk(finish="tool_calls"), DONE))
    assert not bad.calls[0].parsed
    assert bad.calls[0].parse_error.startswith("InvalidToolInputError")


def test_an_error_chunk_is_an_error_part_and_the_stream_goes_on():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")),
        {"error": {"message": "Provider disconnected", "code": 502}},
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error == "error part: Provider disconnected"
    assert calls(result) == [("c1", "read", "{}")]


def test_a_chunk_failing_the_schema_is_an_error_part_and_is_skipped():
    # llama.cpp's arguments object; the whole chunk is dropped.
    data = sse(
        chunk(tool(0, "c1", "get_weather", {"city": "Paris"})),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error.startswith("error part: TypeValidationError")
    assert "arguments is not a string" in result.error
    assert result.calls == []


def test_only_the_first_choice_is_read():
    two = [
        {"index": 0, "delta": {"tool_calls": [tool(0, "c0", "f", "{}")]}},
        {"index": 1, "delta": {"tool_calls": [tool(0, "c1", "g", "{}")]}},
    ]
    result = lens(sse(chunk(choices=two), chunk(finish="tool_calls"), DONE))
    assert calls(result) == [("c0", "f", "{}")]
    assert any("choices[0]" in note for note in result.notes)
