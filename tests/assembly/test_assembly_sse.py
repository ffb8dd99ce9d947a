"""Section 1 of the assembly spec: frames from SSE, JSON Lines and HAR input."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest
from streams import DONE, calls, chunk, finish, jsonl, kinds, run, run_sse, sse, text, tool

from inspector.assembly import (
    FrameKind,
    JSONLReader,
    SSEReader,
    UnreadableInput,
    assemble,
    read_har,
)
from inspector.assembly.frames import classify

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def read_sse(data: bytes | str, *, pieces: int | None = None):
    """Every frame an SSEReader makes of `data` (fed whole or `pieces` bytes at a time)."""
    if isinstance(data, str):
        data = data.encode()
    reader = SSEReader()
    frames = []
    if pieces is None:
        frames += reader.feed(data)
    else:
        for start in range(0, len(data), pieces):
            frames += reader.feed(data[start : start + pieces])
    return frames + reader.close()


def read_jsonl(data: bytes | str):
    if isinstance(data, str):
        data = data.encode()
    reader = JSONLReader()
    return reader.feed(data) + reader.close()


def kind_of(data: str) -> FrameKind:
    return classify(0, data, data).kind


# -- SSE blocks ------------------------------------------------------------------------------


def test_data_lines_of_one_block_are_joined_with_a_line_feed():
    (frame,) = read_sse('data: {"a":\ndata: 1}\n\n')
    assert frame.data == '{"a":\n1}'
    assert frame.kind is FrameKind.CHUNK
    assert frame.payload == {"a": 1}


def test_only_one_space_after_the_data_colon_is_removed():
    (frame,) = read_sse("data:  two spaces\n\n")
    assert frame.data == " two spaces"
    (frame,) = read_sse('data:{"no":"space"}\n\n')
    assert frame.data == '{"no":"space"}'


def test_a_bare_data_line_is_an_empty_data_line():
    (frame,) = read_sse('data: {"a":\ndata\ndata: 1}\n\n')
    assert frame.data == '{"a":\n\n1}'
    assert frame.payload == {"a": 1}


def test_lines_starting_with_a_colon_are_comments_and_a_comment_block_is_a_frame():
    (frame,) = read_sse(": OPENROUTER PROCESSING\n\n")
    assert frame.kind is FrameKind.COMMENT
    assert frame.data == ""


def test_comment_lines_do_not_add_to_the_data_of_a_block():
    (frame,) = read_sse(': keep-alive\ndata: {"a":1}\n: more\n\n')
    assert frame.kind is FrameKind.CHUNK
    assert frame.data == '{"a":1}'


def test_event_id_retry_and_unknown_fields_are_ignored():
    (frame,) = read_sse('event: message\nid: 7\nretry: 1000\nfoo: bar\ndata: {"a":1}\n\n')
    assert frame.data == '{"a":1}'
    assert frame.kind is FrameKind.CHUNK


def test_a_block_with_neither_data_nor_comment_makes_no_frame():
    frames = read_sse('event: ping\n\nid: 3\nretry: 10\n\ndata:\n\ndata: {"a":1}\n\n')
    assert [frame.number for frame in frames] == [0]
    assert frames[0].payload == {"a": 1}


def test_blocks_without_data_or_comment_do_not_count_as_frames_in_the_result():
    result = run(b"event: ping\n\ndata:\n\n" + sse(text("Hi", finish="stop"), DONE))
    assert result["frames"] == 2
    assert result["events"][0]["frame"] == 0


def test_extra_blank_lines_between_blocks_make_no_frames():
    assert len(read_sse('\n\n\ndata: {"a":1}\n\n\n\n\ndata: [DONE]\n\n\n')) == 2


def test_one_byte_order_mark_at_the_start_is_dropped():
    (frame,) = read_sse('\ufeffdata: {"a":1}\n\n')
    assert frame.kind is FrameKind.CHUNK


def test_the_byte_order_mark_is_dropped_even_when_its_bytes_arrive_one_at_a_time():
    frames = read_sse('\ufeffdata: {"a":1}\n\n', pieces=1)
    assert [frame.kind for frame in frames] == [FrameKind.CHUNK]


def test_only_the_first_byte_order_mark_is_dropped():
    # The second U+FEFF starts the first line, which is then no `data` field.
    assert read_sse('\ufeff\ufeffdata: {"a":1}\n\n') == []


def test_a_byte_order_mark_later_in_the_stream_is_kept():
    (frame,) = read_sse('data: {"a":"\ufeff"}\n\n')
    assert frame.payload == {"a": "\ufeff"}


def test_a_later_byte_order_mark_is_kept_even_when_it_starts_a_feed():
    (frame,) = read_sse('data: {"a":"\ufeff"}\n\n', pieces=1)
    assert frame.payload == {"a": "\ufeff"}


def test_invalid_utf8_bytes_become_replacement_characters():
    (frame,) = read_sse(b'data: {"a":"\xff\xc3"}\n\n')
    assert frame.payload == {"a": "\ufffd\ufffd"}


def test_a_multibyte_character_cut_between_feeds_is_decoded_whole():
    frames = read_sse('data: {"a":"Zürich 東京"}\n\n', pieces=1)
    assert frames[0].payload == {"a": "Zürich 東京"}


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_lf_crlf_and_cr_line_endings_all_end_lines(newline):
    data = 'data: {"a":\ndata: 1}\n\n: note\n\ndata: [DONE]\n\n'.replace("\n", newline)
    frames = read_sse(data)
    assert [frame.kind for frame in frames] == [FrameKind.CHUNK, FrameKind.COMMENT, FrameKind.DONE]
    assert frames[0].data == '{"a":\n1}'
    assert not any(frame.unterminated for frame in frames)


def test_a_crlf_cut_between_its_cr_and_lf_is_one_line_ending():
    data = b'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n'
    cut = data.index(b"\r\n") + 1
    reader = SSEReader()
    frames = reader.feed(data[:cut]) + reader.feed(data[cut:]) + reader.close()
    assert [frame.kind for frame in frames] == [FrameKind.CHUNK, FrameKind.DONE]


def test_two_crs_are_two_line_endings_and_end_a_block():
    frames = read_sse('data: {"a":1}\r\rdata: {"b":2}\r\r')
    assert [frame.payload for frame in frames] == [{"a": 1}, {"b": 2}]


def test_an_unterminated_last_block_is_still_a_frame():
    frames = read_sse('data: {"a":1}\n\ndata: {"b":2}')
    assert [frame.payload for frame in frames] == [{"a": 1}, {"b": 2}]
    assert [frame.unterminated for frame in frames] == [False, True]


def test_a_last_block_ended_by_one_newline_but_no_blank_line_is_unterminated():
    (frame,) = read_sse('data: {"a":1}\n')
    assert frame.unterminated


def test_an_unterminated_last_block_gives_the_unterminated_frame_anomaly():
    result = run(sse(text("Hi", finish="stop")) + b"data: [DONE]")
    assert result["outcome"] == "ok"
    assert result["anomalies"] == [{"frame": 1, "kind": "unterminated_frame"}]
    assert "missing_done" not in kinds(result)


def test_an_unterminated_comment_only_block_is_a_comment_frame_marked_unterminated():
    result = run(sse(text("Hi", finish="stop"), DONE) + b": bye")
    # After done the anomaly is not recorded; the frame still counts.
    assert result["frames"] == 3
    (frame,) = read_sse(": bye")
    assert frame.kind is FrameKind.COMMENT and frame.unterminated


def test_frames_are_numbered_from_zero_including_comments_and_frames_after_done():
    data = sse(
        ": keep-alive\n\n",
        text("Hi"),
        ": keep-alive\n\n",
        text("!", finish="stop"),
        DONE,
        ": trailing\n\n",
        text("ignored"),
    )
    frames = read_sse(data)
    assert [frame.number for frame in frames] == list(range(7))
    result = run(data)
    assert result["frames"] == 7
    assert [e["frame"] for e in result["events"] if e["type"] == "text_delta"] == [1, 3]
    assert result["text"] == "Hi!"


# -- frame kinds -----------------------------------------------------------------------------


@pytest.mark.parametrize("data", ["[DONE]", " [DONE] ", "\t[DONE]\n"])
def test_data_that_is_done_after_stripping_white_space_is_the_done_frame(data):
    assert kind_of(data) is FrameKind.DONE


def test_done_inside_sse_must_not_be_quoted():
    assert kind_of('"[DONE]"') is FrameKind.INVALID


@pytest.mark.parametrize(
    "payload",
    [
        {"error": {"message": "Rate limit reached", "code": 429}},
        {"error": "overloaded"},
        {"error": True},
        {"object": "error", "message": "Internal error"},
        {"object": "error", "error": None},
    ],
)
def test_an_object_with_a_real_error_or_object_error_is_an_error_frame(payload):
    assert kind_of(orjson.dumps(payload).decode()) is FrameKind.ERROR


def test_an_error_value_of_zero_is_not_empty():
    # docs/assembly-decisions.md, 7: only null, false, "", {} and [] are empty.
    assert kind_of('{"error": 0}') is FrameKind.ERROR


@pytest.mark.parametrize(
    "payload",
    [
        {"error": None, "choices": []},
        {"error": False, "choices": []},
        {"error": "", "choices": []},
        {"error": {}, "choices": []},
        {"error": [], "choices": []},
        {"object": "chat.completion.chunk", "choices": []},
        {},
    ],
)
def test_an_object_whose_error_is_null_false_or_empty_is_a_chunk(payload):
    assert kind_of(orjson.dumps(payload).decode()) is FrameKind.CHUNK


def test_error_null_on_every_chunk_does_not_refuse_the_stream():
    payload = {**text("Hi", finish="stop"), "error": None}
    result = run_sse(payload, DONE)
    assert result["outcome"] == "ok"
    assert result["text"] == "Hi"


@pytest.mark.parametrize(
    "data",
    [
        "not json",
        "[1, 2]",
        '"a string"',
        "42",
        "null",
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": -Infinity}',
        '{"a": "\\ud800"}',
        '{"a": "\\udc00 low alone"}',
        '{"a": 1,}',
        "{'a': 1}",
        '{"a": 1} {"b": 2}',
    ],
)
def test_data_that_is_not_strict_json_or_not_an_object_is_invalid(data):
    assert kind_of(data) is FrameKind.INVALID


def test_a_surrogate_pair_escape_is_valid_json():
    frame = classify(0, "", '{"a": "\\ud83d\\ude00"}')
    assert frame.kind is FrameKind.CHUNK
    assert frame.payload == {"a": "😀"}


def nested(depth: int) -> str:
    """An object nested `depth` levels deep in all (the root counts as one)."""
    return '{"a":' * depth + "1" + "}" * depth


def test_nesting_of_1024_levels_is_valid():
    assert kind_of(nested(1024)) is FrameKind.CHUNK


def test_nesting_deeper_than_1024_levels_is_invalid():
    assert kind_of(nested(1025)) is FrameKind.INVALID


def test_of_duplicate_keys_the_last_wins():
    data = orjson.dumps(text("first")).decode()[:-1] + ',"choices":[{"delta":{"content":"last"}}]}'
    frame = classify(0, data, data)
    assert frame.payload["choices"] == [{"delta": {"content": "last"}}]
    result = run(f"data: {data}\n\ndata: [DONE]\n\n")
    assert result["text"] == "last"


def test_a_terminated_frame_that_is_not_an_object_refuses_invalid_frame():
    result = run(sse(text("Hi"), "data: [1,2]\n\n", finish("stop"), DONE))
    assert result["refusal"]["code"] == "INVALID_FRAME"
    assert result["refusal"]["frame"] == 1


# -- JSON Lines ------------------------------------------------------------------------------


def test_each_non_blank_json_line_is_one_frame_and_blank_lines_are_skipped():
    frames = read_jsonl('{"a":1}\n\n   \n\t\n{"b":2}\n[DONE]\n')
    assert [frame.number for frame in frames] == [0, 1, 2]
    assert [frame.kind for frame in frames] == [FrameKind.CHUNK, FrameKind.CHUNK, FrameKind.DONE]


@pytest.mark.parametrize("done", ["[DONE]", '"[DONE]"', '  "[DONE]"  '])
def test_json_lines_accept_bare_and_quoted_done(done):
    result = run(jsonl(text("Hi", finish="stop"), done), fmt="jsonl")
    assert result["outcome"] == "ok"
    assert result["anomalies"] == []
    assert [e["type"] for e in result["events"]][-1] == "done"


def test_json_lines_classify_like_sse_data():
    frames = read_jsonl('{"error":{"message":"boom"}}\n{"error":null}\nnope\n[1]\n')
    kinds_ = [FrameKind.ERROR, FrameKind.CHUNK, FrameKind.INVALID, FrameKind.INVALID]
    assert [frame.kind for frame in frames] == kinds_


def test_json_lines_never_record_unterminated_frame():
    data = jsonl(text("Hi", finish="stop")) + b"[DONE]"
    result = run(data, fmt="jsonl")
    assert result["outcome"] == "ok"
    assert "unterminated_frame" not in kinds(result)
    assert not any(frame.unterminated for frame in read_jsonl(data))


def test_an_unparseable_last_json_line_is_invalid_frame_not_a_cut():
    # docs/assembly-decisions.md, 14: JSON Lines has no cut frames.
    result = run(jsonl(text("Hi", finish="stop")) + b'{"choices":[', fmt="jsonl")
    assert result["refusal"]["code"] == "INVALID_FRAME"
    assert result["refusal"]["frame"] == 1


def test_json_lines_accept_crlf_and_a_byte_order_mark():
    data = b"\xef\xbb\xbf" + jsonl(text("Hi", finish="stop"), "[DONE]").replace(b"\n", b"\r\n")
    result = run(data, fmt="jsonl")
    assert result["outcome"] == "ok"
    assert result["frames"] == 2


def test_the_jsonl_fixture_assembles_like_its_sse_twin():
    from_sse = run((FIXTURES / "weather_call.sse").read_bytes())
    from_jsonl = run((FIXTURES / "weather_call.jsonl").read_bytes(), fmt="jsonl")
    # The SSE twin holds one more frame (a keep-alive comment) before the arguments.
    assert from_jsonl["outcome"] == from_sse["outcome"] == "ok"
    assert from_jsonl["calls"][0]["arguments"] == from_sse["calls"][0]["arguments"]
    assert from_jsonl["usage"] == from_sse["usage"]
    assert from_jsonl["frames"] == from_sse["frames"] - 1


# -- HAR -------------------------------------------------------------------------------------


def har_entry(mime, body: str, *, encoding: str | None = None, url: str = "https://x.test/v1"):
    content = {"mimeType": mime, "text": body, "size": len(body)}
    if encoding:
        content["encoding"] = encoding
    return {
        "startedDateTime": "2024-06-10T09:00:00.000Z",
        "request": {"method": "POST", "url": url, "headers": []},
        "response": {"status": 200, "content": content},
    }


def har(*entries) -> bytes:
    return orjson.dumps({"log": {"version": "1.2", "entries": list(entries)}})


STREAM = sse(text("Hello", finish="stop"), DONE).decode()


@pytest.mark.parametrize(
    "mime",
    ["text/event-stream", "text/event-stream; charset=utf-8", "TEXT/Event-Stream ;charset=UTF-8"],
)
def test_a_har_entry_is_an_event_stream_by_its_mime_type_before_the_semicolon(mime):
    (stream,) = read_har(har(har_entry(mime, STREAM)))
    assert stream.body == STREAM.encode()


@pytest.mark.parametrize("mime", ["application/json", "text/plain", "text/event-streams", None])
def test_har_entries_of_other_mime_types_are_skipped(mime):
    data = har(har_entry(mime, STREAM), har_entry("text/event-stream", STREAM, url="b"))
    (stream,) = read_har(data)
    assert stream.url == "b"


def test_a_base64_har_body_is_decoded():
    body = base64.b64encode(STREAM.encode()).decode()
    (stream,) = read_har(har(har_entry("text/event-stream", body, encoding="base64")))
    assert stream.body == STREAM.encode()
    result = assemble(har(har_entry("text/event-stream", body, encoding="base64")), fmt="har")
    assert result.to_dict()["text"] == "Hello"


def test_a_har_with_several_event_streams_lists_them_in_file_order():
    streams = read_har((FIXTURES / "two_streams.har").read_bytes())
    assert [stream.position for stream in streams] == [0, 1]
    assert [stream.url.rsplit("/", 1)[-1] for stream in streams] == ["completions"] * 2


def test_the_har_entry_option_selects_an_event_stream_counted_from_zero():
    data = (FIXTURES / "two_streams.har").read_bytes()
    first = assemble(data, fmt="har").to_dict()
    second = assemble(data, fmt="har", entry=1).to_dict()
    assert first["calls"][0]["name"] == "get_weather"
    assert second["calls"] == []
    assert second["text"] == "Hello, world."


def test_a_har_entry_out_of_range_is_unreadable():
    with pytest.raises(UnreadableInput, match="out of range"):
        assemble((FIXTURES / "two_streams.har").read_bytes(), fmt="har", entry=2)


@pytest.mark.parametrize(
    "data",
    [
        b"not json at all",
        b'{"log": ',
        b"[1, 2, 3]",
        b'{"log": {"entries": "nope"}}',
        b'{"log": {"entries": []}}',
        har(har_entry("application/json", "{}")),
    ],
    ids=["not-json", "cut-json", "not-object", "entries-not-list", "no-entries", "no-stream"],
)
def test_a_har_that_is_not_json_or_holds_no_event_stream_is_unreadable(data):
    with pytest.raises(UnreadableInput):
        read_har(data)
    with pytest.raises(UnreadableInput):
        assemble(data, fmt="har")


def test_a_har_event_stream_entry_without_text_is_an_empty_stream():
    entry = har_entry("text/event-stream", "")
    del entry["response"]["content"]["text"]
    (stream,) = read_har(har(entry))
    assert stream.body == b""
    result = assemble(har(entry), fmt="har").to_dict()
    assert (result["frames"], result["refusal"]["code"]) == (0, "INCOMPLETE_STREAM")


def test_a_har_body_is_read_as_sse_with_its_calls():
    body = sse(calls(tool(0, "call_h", "get_time", '{"tz":"UTC"}')), finish(), DONE).decode()
    result = assemble(har(har_entry("text/event-stream", body)), fmt="har").to_dict()
    assert result["calls"][0]["arguments"] == {"tz": "UTC"}


def test_the_sse_reader_gives_the_same_frames_for_a_chunk_however_it_is_cut():
    data = sse(chunk({"content": "ü"}), ": c\n\n", DONE)
    whole = [(f.number, f.kind, f.data) for f in read_sse(data)]
    assert whole == [(f.number, f.kind, f.data) for f in read_sse(data, pieces=1)]
    assert whole == [(f.number, f.kind, f.data) for f in read_sse(data, pieces=7)]
