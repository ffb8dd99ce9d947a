"""The LiteLLM lens runs LiteLLM itself: `litellm.completion(stream=True)`
served our frames (an OpenAI client on chat; LiteLLM's `HTTPHandler` on the
Responses bridge and on Anthropic), its `CustomStreamWrapper` read to the
end, then `litellm.stream_chunk_builder`.  The streams are written here; each
test pins what LiteLLM documents or does at the pinned version
(`pyproject.toml`, extra `lenses`): one map by index per choice, the last
truthy id and name win, calls without an id or a name dropped, empty
arguments as "{}", custom tool calls kept with their free-text input, and a
chat stream that ends without a finish reason is an error."""

from __future__ import annotations

import os
import socket
import subprocess
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

pytest.importorskip("litellm")

FINISH = chunk(finish="tool_calls")


def lens(data: bytes, dialect: str = "chat"):
    stream, _ = frames(data)
    return run_lens("litellm", stream, dialect=dialect)


# -- chat: an OpenAI client of ours ------------------------------------------------------


def test_a_plain_stream_names_the_version_that_ran():
    result = lens(OK)
    assert result.error is None and result.calls_from == "final"
    assert not result.gates_on_parse
    assert calls(result) == [("call_A", "read", '{"path":"/a"}')]
    assert result.version == version("litellm") == LENSES["litellm"].current_version()
    assert LENSES["litellm"].runs_library


def test_two_ids_sharing_index_0_merge_keeping_the_last_id_and_name():
    result = lens(REUSED_INDEX)
    assert calls(result) == [("call_b", "read", '{"path":"/a"}{"path":"/b"}')]
    assert not result.calls[0].parsed


def test_a_later_name_overwrites_and_a_repeated_one_is_harmless():
    data = sse(chunk(tool(0, "c1", "first", '{"a":')), chunk(tool(0, name="second", args="1}")))
    assert calls(lens(data + sse(FINISH, DONE))) == [("c1", "second", '{"a":1}')]
    assert calls(lens(REPEATED_NAME)) == [("call_x", "read_file", '{"path":"/a"}')]


def test_a_call_without_an_id_is_dropped_silently():
    data = sse(
        chunk(tool(0, "c0", "read", "{}")),
        chunk(tool(1, MISSING, "write", '{"x":1}')),
        FINISH,
        DONE,
    )
    result = lens(data)
    assert result.error is None
    assert calls(result) == [("c0", "read", "{}")]


def test_empty_arguments_become_an_empty_object():
    data = sse(chunk(tool(0, "t1", "snooze", "")), chunk(tool(0, args="")), FINISH, DONE)
    result = lens(data)
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
    data = sse(chunk(tool(2, "c2", "b", "{}"), tool(0, "c0", "a", "{}")), FINISH, DONE)
    assert calls(lens(data)) == [("c0", "a", "{}"), ("c2", "b", "{}")]


def test_each_choice_keeps_its_own_calls():
    two = [
        {"index": 0, "delta": {"tool_calls": [tool(0, "c0", "f", "{}")]}},
        {"index": 1, "delta": {"tool_calls": [tool(0, "c1", "g", "{}")]}},
    ]
    result = lens(sse(chunk(choices=two), FINISH, DONE))
    assert [(call.choice, call.id, call.name) for call in result.calls] == [
        (0, "c0", "f"),
        (1, "c1", "g"),
    ]


def test_an_entry_without_a_function_is_skipped():
    data = sse(
        chunk(tool(0, "c1", "read", "{}")),
        chunk({"index": 0, "id": "other", "extra_content": {"google": {}}}),
        FINISH,
        DONE,
    )
    result = lens(data)
    assert result.error is None
    assert calls(result) == [("c1", "read", "{}")]


def test_a_custom_tool_call_keeps_its_free_text_input():
    first = {"index": 0, "id": "ct1", "type": "custom", "custom": {"name": "patch", "input": "*a"}}
    rest = {"index": 0, "type": "custom", "custom": {"input": "b\n"}}
    result = lens(sse(chunk(first), chunk(rest), FINISH, DONE))
    [call] = result.calls
    assert (call.id, call.name, call.arguments_text, call.kind) == (
        "ct1",
        "patch",
        "*ab\n",
        "custom",
    )
    assert not call.parsed


def test_truncated_arguments_are_handed_on_and_fail_the_callers_json_loads():
    data = sse(chunk(tool(0, "c1", "read", '{"path":"src/ma')), chunk(finish="length"), DONE)
    result = lens(data)
    assert result.error is None
    assert calls(result) == [("c1", "read", '{"path":"src/ma')]
    assert result.calls[0].parse_error.startswith("JSONDecodeError")


def test_a_stream_that_ends_without_a_finish_reason_raises():
    result = lens(sse(chunk(tool(0, "c1", "read", "{}")), DONE))
    assert result.error.startswith("MidStreamFallbackError")
    assert "Stream ended before a finish_reason was received" in result.error
    assert result.calls_from == "snapshot" and result.delivered_calls == []
    assert calls(result) == [("c1", "read", "{}")]


def test_an_error_chunk_and_bad_json_raise():
    error = lens(sse(chunk(tool(0, "c1", "read", "{}")), {"error": {"message": "boom"}}, DONE))
    assert error.error.startswith("MidStreamFallbackError") and "boom" in error.error
    broken = lens(sse(chunk(tool(0, "c1", "read", "{}")), "data: {nope\n\n", DONE))
    assert "Expecting property name" in broken.error
    assert broken.calls_from == "snapshot"


# -- responses: the chat-to-Responses bridge ---------------------------------------------


def responses_call(call_id: str, final: str) -> bytes:
    events = other.function_call_events(['{"path":', '"/a"}'], '{"path":"/a"}')
    for event in events:
        if "item" in event:
            event["item"] = {**event["item"], "call_id": call_id}
    completed = {**other.function_call(final), "call_id": call_id}
    return other.responses_stream(*events, final=[completed])


def test_responses_gives_the_call_id_and_the_streamed_arguments():
    result = lens(responses_call("call_Zx9q", '{"path":"/b"}'), "responses")
    assert result.error is None
    assert calls(result) == [("call_Zx9q", "read", '{"path":"/a"}')]


def test_responses_takes_the_item_id_for_a_call_id_of_the_form_call_digits():
    # LiteLLM reads `call_<n>` as a per-response index (Bedrock Mantle) and
    # hands over the item's id instead.
    result = lens(responses_call("call_1", '{"path":"/a"}'), "responses")
    assert calls(result) == [("fc_1", "read", '{"path":"/a"}')]


def test_responses_without_a_terminal_event_raises():
    data = other.responses_stream(
        *other.function_call_events(['{"path":"/a"}'], '{"path":"/a"}'), final=None
    )
    result = lens(data, "responses")
    assert "before any terminal event" in result.error
    assert result.calls_from == "snapshot"


# -- messages: LiteLLM's Anthropic handler -----------------------------------------------


def test_messages_give_tool_use_blocks_with_their_text_and_leave_server_tools_out():
    result = lens(other.MESSAGES_OK, "messages")
    assert result.error is None
    assert calls(result) == [("toolu_A", "read", '{"path": "/a"}')]


def test_messages_cut_mid_input_raise_for_the_missing_stop_reason():
    data = other.sse(
        other.message_start(),
        other.tool_use(0, "toolu_A", "read"),
        other.input_delta(0, '{"path": "/a", "n'),
    )
    result = lens(data, "messages")
    assert "Stream ended before a finish_reason" in result.error
    assert calls(result) == [("toolu_A", "read", '{"path": "/a", "n')]
    assert result.calls_from == "snapshot"


def test_messages_error_event_raises():
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    data = other.sse(other.message_start(), ("error", overloaded))
    assert "Overloaded" in lens(data, "messages").error


# -- no network, and a missing library ---------------------------------------------------


def test_no_dialect_reaches_the_network(monkeypatch):
    tried = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise OSError("the lens tried the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    streams = {
        "chat": OK,
        "responses": responses_call("call_Zx9q", '{"path":"/a"}'),
        "messages": other.MESSAGES_OK,
    }
    results = {dialect: lens(data, dialect) for dialect, data in streams.items()}
    assert tried == []
    assert {dialect: result.error for dialect, result in results.items()} == dict.fromkeys(streams)


def test_gemini_has_no_litellm_column():
    assert "gemini" not in LENSES["litellm"].dialects


def test_a_missing_litellm_makes_the_lens_unavailable_not_a_crash(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)  # `import litellm` fails
    assert not LENSES["litellm"].available()
    result = run_lens("litellm", frames(OK)[0])
    assert not result.available and result.calls == []
    assert "not installed" in result.notes[0] and "[lenses]" in result.notes[0]


def test_importing_the_lenses_keeps_litellm_off_the_network():
    """Whatever imports LiteLLM first in a process that imports the lenses,
    it finds its cost map told to stay local (it fetches it from GitHub
    otherwise)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    script = "import os, inspector.lenses; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])"
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "True", done.stderr
