"""The OpenAI SDK lens: the real `ChatCompletionStreamState`, fed the way the
SDK feeds it, pinned by the behaviours the peer notes cite."""

from __future__ import annotations

import sys

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

from inspector.lenses import openai_sdk, run_lens

pytest.importorskip("openai")


def lens(data: bytes, **kwargs):
    stream, _ = frames(data)
    return run_lens("openai", stream, **kwargs)


def test_a_plain_stream_gives_the_call_as_the_sdk_assembles_it():
    result = lens(OK)
    assert result.available
    assert result.library == "openai-python"
    import openai

    assert result.version == openai.__version__
    assert result.error is None
    assert result.calls_from == "final"
    assert calls(result) == [("call_A", "read", '{"path":"/a"}')]
    assert result.calls[0].arguments == {"path": "/a"}


def test_a_name_and_id_repeated_on_every_chunk_are_doubled():
    result = lens(REPEATED_NAME)
    assert result.error is None
    assert calls(result) == [("call_xcall_x", "read_fileread_file", '{"path":"/a"}')]


def test_an_index_reused_by_a_new_id_merges_both_calls_into_one():
    result = lens(REUSED_INDEX)
    assert calls(result) == [("call_acall_b", "readread", '{"path":"/a"}{"path":"/b"}')]
    assert not result.calls[0].parsed
    assert result.calls[0].parse_error.startswith("JSONDecodeError: Extra data")


def test_a_first_call_at_index_1_raises_index_error():
    result = lens(SPARSE_INDEX)
    assert result.error == "IndexError: list index out of range"
    # The caller gets nothing; the state held the call when it raised.
    assert result.calls_from == "snapshot"
    assert result.delivered_calls == []
    assert [call.id for call in result.calls] == ["toolu_1"]


def test_index_null_raises_type_error():
    result = lens(sse(chunk(tool(None, "c1", "read", '{"a":1}')), chunk(finish="tool_calls"), DONE))
    assert result.error.startswith("TypeError: ")
    assert "index" in result.error


def test_a_missing_index_raises_type_error():
    data = sse(
        chunk(tool(MISSING, "c1", "read", '{"a":')),
        chunk(tool(MISSING, args="1}")),
        chunk(finish="stop"),
        DONE,
    )
    result = lens(data)
    assert result.error == "TypeError: list indices must be integers or slices, not NoneType"


def test_length_raises_length_finish_reason_error_from_get_final_completion():
    data = sse(chunk(tool(0, "c1", "read", '{"path":"src/ma')), chunk(finish="length"), DONE)
    result = lens(data)
    assert result.error.startswith("LengthFinishReasonError")
    assert result.calls_from == "snapshot"
    assert calls(result) == [("c1", "read", '{"path":"src/ma')]


def test_empty_arguments_stay_empty_and_do_not_json_load():
    data = sse(
        chunk(tool(0, "t1", "snooze", "")), chunk(tool(0, args="")), chunk(finish="tool_calls")
    )
    result = lens(data + DONE.encode())
    assert calls(result) == [("t1", "snooze", "")]
    assert not result.calls[0].parsed


def test_a_truthy_error_key_raises_api_error_with_its_message():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")),
        {"error": {"message": "The server had an error", "type": "server_error"}},
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error == "APIError: The server had an error"
    assert result.calls_from == "snapshot"


def test_an_error_without_a_message_gets_the_sdks_default():
    result = lens(sse({"error": {"code": 502}}, DONE))
    assert result.error == "APIError: An error occurred during streaming"


def test_chunks_that_are_not_chat_completion_chunks_are_skipped():
    azure = {
        "id": "",
        "object": "",
        "created": 0,
        "model": "",
        "choices": [],
        "prompt_filter_results": [],
    }
    result = lens(
        sse(azure, *[chunk(tool(0, "c1", "read", "{}")), chunk(finish="tool_calls")], DONE)
    )
    assert result.error is None
    assert calls(result) == [("c1", "read", "{}")]
    assert any("frame 0 skipped" in note for note in result.notes)


def test_data_that_is_not_json_raises_json_decode_error():
    result = lens(sse(chunk(tool(0, "c1", "read", "{}")), "data: {oops\n\n", DONE))
    assert result.error.startswith("JSONDecodeError")


def test_frames_after_done_are_not_read():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")), chunk(finish="tool_calls"), DONE, {"error": "late"}
    )
    result = lens(data)
    assert result.error is None
    assert calls(result) == [("c1", "read", "{}")]


def test_an_unterminated_last_block_is_never_dispatched():
    data = sse(chunk(tool(0, "c1", "read", '{"a":1}'))) + b'data: {"choices":[]}'
    result = lens(data)
    assert any("skipped" in note and "blank line" in note for note in result.notes)
    assert calls(result) == [("c1", "read", '{"a":1}')]


def test_strict_input_tools_are_parsed_by_the_sdk_and_bad_json_raises():
    tools = [{"type": "function", "function": {"name": "read", "strict": True, "parameters": {}}}]
    good = sse(
        chunk(tool(0, "c", "read", '{"path":"/a"}', type="function")), chunk(finish="tool_calls")
    )
    result = lens(good + DONE.encode(), tools=tools)
    assert result.error is None
    assert result.calls[0].arguments == {"path": "/a"}
    bad = sse(
        chunk(tool(0, "c", "read", '{"path":"/a"}', type="function")),
        chunk(tool(0, args='{"path":"/b"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(bad, tools=tools)
    assert result.error.startswith("JSONDecodeError: Extra data")


def test_an_empty_stream_gives_no_calls():
    result = lens(b"")
    assert result.error is None
    assert result.calls == []


def test_without_the_sdk_installed_the_lens_says_it_is_unavailable(monkeypatch):
    # `import openai` fails while sys.modules holds None for it.
    monkeypatch.setitem(sys.modules, "openai", None)
    stream, _ = frames(OK)
    result = openai_sdk.run(stream)
    assert result.available is False
    assert result.calls == []
    assert result.error is None
    assert result.version == "not installed"
    assert "stream-inspector[lenses]" in result.notes[0]
    assert result.to_dict()["available"] is False
