"""The LangChain lens runs LangChain itself: each dialect's chat model
(`ChatOpenAI`, `ChatOpenAI(use_responses_api=True)`, `ChatAnthropic`,
`ChatGoogleGenerativeAI`) streams frames served by our transport, and the
chunks are added up with `+` as an agent does.  The streams are written here;
each test pins what LangChain documents or does at the pinned versions
(`pyproject.toml`, extra `lenses`): tool-call chunks merged by index unless
ids conflict, strings concatenated, arguments read by `parse_partial_json`
(so truncated arguments come out repaired, and text that is no object makes
an invalid tool call)."""

from __future__ import annotations

import re
import sys
from importlib.metadata import version

import pytest
import test_lens_sdk_dialects as other
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

from inspector.lenses import LENSES, run_lens
from inspector.lenses.compare import divergences

pytest.importorskip("langchain_openai")
pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_google_genai")


def lens(data: bytes, dialect: str = "chat"):
    stream, _ = frames(data)
    return run_lens("langchain", stream, dialect=dialect)


# -- chat: ChatOpenAI --------------------------------------------------------------------


def test_a_plain_stream_names_the_versions_that_ran():
    result = lens(OK)
    assert result.error is None and result.calls_from == "final"
    assert result.gates_on_parse
    assert calls(result) == [("call_A", "read", '{"path":"/a"}')]
    assert result.calls[0].arguments == {"path": "/a"}
    assert result.library == "langchain-core + langchain-openai"
    core, partner = version("langchain-core"), version("langchain-openai")
    assert result.version == f"langchain-core {core}, langchain-openai {partner}"
    assert LENSES["langchain"].runs_library


def test_the_same_index_with_conflicting_ids_stays_two_calls():
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


def test_a_missing_index_keeps_each_chunk_apart_and_the_tail_is_invalid():
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


def test_truncated_arguments_are_repaired_into_a_valid_call():
    data = sse(chunk(tool(0, "c1", "read", '{"path":"src/ma')), chunk(finish="length"), DONE)
    result = lens(data)
    assert result.error is None
    assert result.calls[0].arguments == {"path": "src/ma"}


def test_a_mismatched_bracket_makes_an_invalid_tool_call_that_is_held_back():
    data = sse(chunk(tool(0, "c1", "read", '{"a":]')), chunk(finish="tool_calls"), DONE)
    [call] = lens(data).calls
    assert (call.id, call.arguments_text, call.parsed) == ("c1", '{"a":]', False)
    assert call.parse_error.startswith("invalid tool call")


def test_an_entry_without_function_raises_attribute_error_and_leaves_a_snapshot():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")),
        chunk({"index": 0, "extra_content": {"google": {"thought_signature": "s"}}}),
        chunk(finish="tool_calls"),
        DONE,
    )
    result = lens(data)
    assert result.error == "AttributeError: 'NoneType' object has no attribute 'get'"
    assert result.calls_from == "snapshot" and result.delivered_calls == []


def test_a_custom_tool_call_has_no_function_so_it_raises_too():
    custom = {"index": 0, "id": "ct1", "type": "custom", "custom": {"name": "patch", "input": "x"}}
    result = lens(sse(chunk(custom), chunk(finish="tool_calls"), DONE))
    assert result.error.startswith("AttributeError")


def test_an_arguments_object_fails_pydantic_validation():
    result = lens(sse(chunk(tool(0, "c1", "get_weather", {"city": "Paris"})), DONE))
    assert result.error.startswith("ValidationError")
    assert "tool_call_chunks.0.args" in result.error


def test_only_the_first_choice_is_read():
    two = [
        {"index": 0, "delta": {"tool_calls": [tool(0, "c0", "f", "{}")]}},
        {"index": 1, "delta": {"tool_calls": [tool(0, "c1", "g", "{}")]}},
    ]
    assert calls(lens(sse(chunk(choices=two), DONE))) == [("c0", "f", "{}")]


def test_an_error_chunk_raises_api_error_and_bad_json_a_decode_error():
    assert lens(sse({"error": {"message": "boom"}}, DONE)).error == "APIError: boom"
    broken = lens(sse(chunk(tool(0, "c1", "read", "{}")), "data: {nope\n\n", DONE))
    assert broken.error.startswith("JSONDecodeError")
    assert broken.calls_from == "snapshot"


def test_a_stream_with_no_chunk_at_all_raises():
    assert lens(sse(DONE)).error == "ValueError: No generation chunks were returned"


# -- responses: ChatOpenAI(use_responses_api=True) ---------------------------------------


def test_responses_calls_come_from_the_deltas_not_the_completed_copy():
    data = other.responses_stream(
        *other.function_call_events(['{"path":', '"/a"}'], '{"path":"/a"}'),
        final=[other.function_call('{"path":"/b"}')],
    )
    result = lens(data, "responses")
    assert result.error is None
    assert result.library == "langchain-core + langchain-openai"
    # The OpenAI SDK hands over the completed copy ("/b"); LangChain's chunks
    # are built from the stream's events, so its agent runs "/a".
    assert calls(result) == [("call_1", "read", '{"path":"/a"}')]
    assert run_lens("openai", frames(data)[0], dialect="responses").calls[0].arguments == {
        "path": "/b"
    }


def test_responses_without_response_completed_still_gives_the_call():
    data = other.responses_stream(
        *other.function_call_events(['{"path":"/a"}'], '{"path":"/a"}'), final=None
    )
    result = lens(data, "responses")
    assert result.error is None and result.calls_from == "final"
    assert calls(result) == [("call_1", "read", '{"path":"/a"}')]


# -- messages: ChatAnthropic -------------------------------------------------------------


def test_messages_give_tool_use_blocks_and_leave_server_tools_out():
    result = lens(other.MESSAGES_OK, "messages")
    assert result.error is None
    assert result.library == "langchain-core + langchain-anthropic"
    assert f"langchain-anthropic {version('langchain-anthropic')}" in result.version
    assert calls(result) == [("toolu_A", "read", '{"path": "/a"}')]


def test_messages_input_cut_mid_object_is_repaired_and_would_run():
    data = other.sse(
        other.message_start(),
        other.tool_use(0, "toolu_A", "read"),
        other.input_delta(0, '{"path": "/a", "n'),
    )
    stream, strict = frames(data)
    result = run_lens("langchain", stream, dialect="messages")
    assert result.error is None
    assert [(call.id, call.arguments) for call in result.calls] == [("toolu_A", {"path": "/a"})]
    assert "runs_despite_refusal" in {entry["kind"] for entry in divergences(result, strict)}


def test_messages_error_event_raises_with_the_calls_so_far_as_a_snapshot():
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    data = other.sse(
        other.message_start(),
        other.tool_use(0, "toolu_A", "read"),
        other.input_delta(0, '{"path": "/a"}'),
        ("error", overloaded),
    )
    result = lens(data, "messages")
    assert result.error.startswith("APIStatusError") and "Overloaded" in result.error
    assert result.calls_from == "snapshot"
    assert [call.id for call in result.calls] == ["toolu_A"]


# -- gemini: ChatGoogleGenerativeAI ------------------------------------------------------

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_gemini_calls_keep_their_id_and_an_id_less_one_gets_a_uuid():
    read = {"id": "fc_a", "name": "read", "args": {"path": "/a"}}
    stat = {"name": "stat", "args": {"path": "/b"}}
    data = other.sse(
        other.gemini_chunk({"functionCall": read}),
        other.gemini_chunk({"functionCall": stat}, finish="STOP"),
    )
    result = lens(data, "gemini")
    assert result.error is None
    assert result.library == "langchain-core + langchain-google-genai"
    assert [(call.name, call.arguments) for call in result.calls] == [
        ("read", {"path": "/a"}),
        ("stat", {"path": "/b"}),
    ]
    assert result.calls[0].id == "fc_a"
    assert UUID.match(result.calls[1].id)


def test_gemini_partial_args_pieces_come_out_as_separate_empty_calls():
    data = other.sse(
        other.gemini_chunk({"functionCall": {"name": "read", "willContinue": True}}),
        other.gemini_chunk(
            {"functionCall": {"partialArgs": [{"jsonPath": "$.path", "stringValue": "/a"}]}}
        ),
        other.gemini_chunk(finish="STOP"),
    )
    result = lens(data, "gemini")
    assert [(call.name, call.arguments) for call in result.calls] == [("read", {}), ("", {})]


def test_gemini_error_chunk_raises():
    error = {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
    data = other.sse(
        other.gemini_chunk({"functionCall": {"id": "fc_a", "name": "read", "args": {}}}),
        (None, error),
    )
    result = lens(data, "gemini")
    assert "overloaded" in result.error and result.calls_from == "snapshot"


# -- a missing library -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "dialect"),
    [
        ("langchain_core", "chat"),
        ("langchain_openai", "responses"),
        ("langchain_anthropic", "messages"),
        ("langchain_google_genai", "gemini"),
    ],
)
def test_a_missing_package_makes_the_lens_unavailable_not_a_crash(monkeypatch, module, dialect):
    monkeypatch.setitem(sys.modules, module, None)  # importing it fails
    result = run_lens("langchain", frames(OK)[0], dialect=dialect)
    assert not result.available and result.calls == []
    assert "not installed" in result.notes[0] and "[lenses]" in result.notes[0]
    assert LENSES["langchain"].available() is (
        module in ("langchain_anthropic", "langchain_google_genai")
    )


def test_responses_interleaved_argument_deltas_of_two_calls_split_apart():
    # langchain-openai starts a new chunk index whenever the output index
    # changes, so deltas that alternate between two calls never merge.
    def item(n: int, name: str, status: str = "in_progress", arguments: str = ""):
        return {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{name}",
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    def delta(n: int, piece: str):
        return {
            "type": "response.function_call_arguments.delta",
            "item_id": f"fc_{n}",
            "output_index": n,
            "delta": piece,
        }

    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item(0, "read")},
        {"type": "response.output_item.added", "output_index": 1, "item": item(1, "stat")},
        delta(0, '{"p":'),
        delta(1, '{"q":'),
        delta(0, "1}"),
        delta(1, "2}"),
    ]
    final = [item(0, "read", "completed", '{"p":1}'), item(1, "stat", "completed", '{"q":2}')]
    result = lens(other.responses_stream(*events, final=final), "responses")
    assert result.error is None
    assert calls(result)[:2] == [("call_read", "read", ""), ("call_stat", "stat", "")]
    assert [call.arguments for call in result.calls[:2]] == [{}, {}]
    assert [call.arguments_text for call in result.calls[2:]] == ['{"p":', '{"q":', "1}", "2}"]
