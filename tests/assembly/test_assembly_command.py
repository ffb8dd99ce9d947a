"""Section 7 of the assembly spec, the command side: `manage.py assemble`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from command_line import manage as run_manage
from django.core.management import call_command
from django.core.management.base import CommandError
from streams import DONE, calls, finish, jsonl, sse, text, tool

from inspector.assembly import UnreadableInput, detect_format

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def assert_unreadable(proc: subprocess.CompletedProcess) -> str:
    """Exit 2, nothing on stdout, one line on stderr and no traceback; the line."""
    assert proc.returncode == 2
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def call(*args, capsys, **options):
    """Run the command in-process; (exit status, parsed stdout)."""
    status = 0
    try:
        call_command("assemble", *args, **options)
    except SystemExit as exit_:
        status = exit_.code
    out = capsys.readouterr().out
    return status, orjson.loads(out)


# -- subprocess: exit codes, stdout, stderr --------------------------------------------------


def test_an_ok_stream_prints_one_json_document_and_exits_0():
    proc = manage(fixture("weather_call.sse"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") == 1
    result = orjson.loads(proc.stdout)
    assert result["outcome"] == "ok"
    assert result["calls"][0]["arguments"] == {"city": "Zürich", "unit": "celsius"}


def test_a_refused_stream_prints_its_result_and_exits_1():
    proc = manage(fixture("mismatched_bracket.sse"))
    assert proc.returncode == 1
    result = orjson.loads(proc.stdout)
    assert result["outcome"] == "refused"
    assert result["refusal"]["code"] == "INVALID_ARGUMENTS"


def test_a_dash_reads_standard_input_and_sniffs_the_format():
    proc = manage("-", stdin=(FIXTURES / "weather_call.jsonl").read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["frames"] == 8


def test_a_har_on_standard_input_is_sniffed_and_its_entry_chosen():
    proc = manage("-", "--entry", "1", stdin=(FIXTURES / "two_streams.har").read_bytes())
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["text"] == "Hello, world."


def test_a_missing_file_exits_2_with_one_line_on_stderr():
    line = assert_unreadable(manage(fixture("no_such_stream.sse")))
    assert "no_such_stream.sse" in line


def test_input_whose_format_cannot_be_told_exits_2():
    assert_unreadable(manage("-", stdin=b"HTTP/1.1 200 OK\r\n\r\nhello"))


def test_a_har_that_is_not_json_exits_2():
    assert_unreadable(manage("-", "--format", "har", stdin=b'{"log": {"entries": ['))


def test_a_har_without_an_event_stream_exits_2(tmp_path):
    path = tmp_path / "plain.har"
    path.write_bytes(orjson.dumps({"log": {"entries": [{"response": {"content": {}}}]}}))
    assert_unreadable(manage(str(path)))


def test_a_har_entry_out_of_range_exits_2():
    line = assert_unreadable(manage(fixture("two_streams.har"), "--entry", "2"))
    assert "out of range" in line


@pytest.mark.parametrize(
    "args",
    [("--format", "xml"), ("--entry", "-1"), ("--chunk-bytes", "0"), ("--policy", "loose")],
    ids=["unknown-format", "negative-entry", "zero-chunk-bytes", "unknown-policy"],
)
def test_a_usage_error_exits_2_with_a_one_line_reason(args):
    line = assert_unreadable(manage(fixture("weather_call.sse"), *args))
    assert args[0] in line


def test_a_json_lines_stream_opening_with_done_is_sniffed_on_standard_input():
    proc = manage("-", stdin=b'[DONE]\n{"choices":[]}\n')
    result = orjson.loads(proc.stdout)
    assert proc.returncode == 1
    # Read as JSON Lines: the done frame, then one frame after it.
    assert result["frames"] == 2
    assert [a["kind"] for a in result["anomalies"]] == ["data_after_done"]


# -- in-process: options ---------------------------------------------------------------------


def test_call_command_prints_the_result_and_returns_normally_when_ok(capsys):
    status, result = call(fixture("weather_call.sse"), capsys=capsys)
    assert status == 0
    assert result["outcome"] == "ok"


def test_call_command_exits_1_when_refused(capsys):
    status, result = call(fixture("mismatched_bracket.sse"), capsys=capsys)
    assert status == 1
    assert result["refusal"]["code"] == "INVALID_ARGUMENTS"


def test_the_format_option_overrides_the_extension(tmp_path, capsys):
    path = tmp_path / "stream.sse"
    path.write_bytes(jsonl(text("Hi", finish="stop"), "[DONE]"))
    status, result = call(str(path), capsys=capsys, format="jsonl")
    assert (status, result["text"], result["frames"]) == (0, "Hi", 2)
    # Read as SSE the same bytes hold no frame at all.
    status, result = call(str(path), capsys=capsys, format="sse")
    assert (status, result["frames"]) == (1, 0)


def test_auto_format_goes_by_content_before_the_extension(tmp_path, capsys):
    # JSON Lines recordings are often saved as *.chunks.txt.
    path = tmp_path / "provider.chunks.txt"
    path.write_bytes(jsonl(text("Hi", finish="stop"), "[DONE]"))
    status, result = call(str(path), capsys=capsys)
    assert (status, result["text"], result["frames"]) == (0, "Hi", 2)


def test_the_extension_tells_the_format(tmp_path, capsys):
    path = tmp_path / "stream.ndjson"
    path.write_bytes(jsonl(text("Hi", finish="stop"), '"[DONE]"'))
    status, result = call(str(path), capsys=capsys)
    assert (status, result["text"]) == (0, "Hi")


def test_the_policy_option_selects_lenient(capsys):
    status, strict = call(fixture("ambiguous_continuation.sse"), capsys=capsys)
    assert (status, strict["policy"], strict["refusal"]["code"]) == (
        1,
        "strict",
        "AMBIGUOUS_CONTINUATION",
    )
    status, lenient = call(fixture("ambiguous_continuation.sse"), capsys=capsys, policy="lenient")
    assert lenient["policy"] == "lenient"
    assert "guessed_continuation" in [a["kind"] for a in lenient["anomalies"]]


def test_the_entry_option_picks_a_har_event_stream(capsys):
    _, first = call(fixture("two_streams.har"), capsys=capsys)
    _, second = call(fixture("two_streams.har"), capsys=capsys, entry=1)
    assert first["calls"][0]["name"] == "get_weather"
    assert second["text"] == "Hello, world."


def test_the_entry_option_is_ignored_for_other_formats(capsys):
    status, result = call(fixture("weather_call.sse"), capsys=capsys, entry=5)
    assert (status, result["outcome"]) == (0, "ok")


@pytest.mark.parametrize("size", [1, 2, 3, 17, 4096])
def test_chunk_bytes_does_not_change_the_result(capsys, size):
    _, whole = call(fixture("weather_call.sse"), capsys=capsys)
    _, cut = call(fixture("weather_call.sse"), capsys=capsys, chunk_bytes=size)
    assert cut == whole


def test_indent_pretty_prints_the_same_document(capsys):
    _, compact = call(fixture("weather_call.sse"), capsys=capsys)
    call_command("assemble", fixture("weather_call.sse"), indent=True)
    pretty = capsys.readouterr().out
    assert "\n  " in pretty
    assert orjson.loads(pretty) == compact


@pytest.mark.parametrize(
    ("args", "options"),
    [
        (("/no/such/file.sse",), {}),
        ((fixture("two_streams.har"),), {"entry": 9}),
    ],
)
def test_unreadable_input_raises_command_error_with_return_code_2(args, options, capsys):
    with pytest.raises(CommandError) as raised:
        call_command("assemble", *args, **options)
    assert raised.value.returncode == 2
    assert "\n" not in str(raised.value)
    assert capsys.readouterr().out == ""


def test_a_stream_written_by_the_helpers_round_trips_through_a_file(tmp_path, capsys):
    path = tmp_path / "call.sse"
    path.write_bytes(sse(calls(tool(0, "call_A", "read", '{"path":"/a"}')), finish(), DONE))
    status, result = call(str(path), capsys=capsys)
    assert status == 0
    assert result["calls"][0]["arguments"] == {"path": "/a"}


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("capture.SSE", b"", "sse"),
        ("capture.txt", b"{}", "jsonl"),
        ("capture.jsonl", b"data: x", "sse"),
        ("capture.ndjson", b"", "jsonl"),
        ("capture.har", b"", "har"),
        ("broken.har", b"{not json", "har"),
        ("capture.json", b"", "json-array"),
        (None, b'[{"candidates": []}]', "json-array"),
        (None, b'{\n  "object": "chat.completion"\n}', "json-array"),
        (None, b"data: {}", "sse"),
        (None, b"\xef\xbb\xbf: keep-alive", "sse"),
        (None, b"event: message\n", "sse"),
        (None, b'  {"log": {"entries": []}}', "har"),
        (None, b'{"choices": []}', "jsonl"),
        (None, b"[DONE]\n", "jsonl"),
        (None, b'"[DONE]"\n', "jsonl"),
        (None, b"", "sse"),
    ],
)
def test_auto_format_goes_by_the_first_bytes_else_by_extension(name, head, expected):
    assert detect_format(name, head) == expected


def test_auto_format_refuses_to_guess_unknown_bytes():
    with pytest.raises(UnreadableInput):
        detect_format("capture.bin", b"<html>")


def test_a_usage_error_in_process_raises_command_error_with_return_code_2():
    with pytest.raises(CommandError) as raised:
        call_command("assemble", fixture("weather_call.sse"), "--format", "xml")
    assert raised.value.returncode == 2


def manage(*args: str, stdin: bytes = b""):
    return run_manage("assemble", *args, stdin=stdin)


# --- the command line runs without Django and streams its output ----------------------


def _many_fragments() -> bytes:
    """One call whose arguments come in 3,000 fragments: thousands of events."""
    pieces = ['{"items":[', *[f"{n}," for n in range(2999)], "2999]}"]
    head = calls(tool(0, "call_m", "many", pieces[0]))
    return sse(
        head, *[calls(tool(0, args=piece)) for piece in pieces[1:]], finish("tool_calls"), DONE
    )


def test_manage_py_assemble_imports_no_django(tmp_path):
    path = tmp_path / "s.sse"
    path.write_bytes(_many_fragments())
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "manage.py", "assemble", str(path)],
        capture_output=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = [line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines()]
    assert "inspector.assembly" in imported
    assert not [name for name in imported if name.split(".")[0] in ("django", "daphne", "twisted")]


def test_the_streamed_output_is_the_result_document_byte_for_byte(tmp_path):
    from inspector.assembly import assemble
    from inspector.assembly.jsontext import dumps

    data = _many_fragments()
    path = tmp_path / "s.sse"
    path.write_bytes(data)
    proc = manage(str(path))
    result = assemble(data, fmt="sse")
    assert len(result.events.items) > 3000
    assert proc.stdout == dumps(result.to_dict()) + b"\n"


def test_no_events_leaves_the_event_list_out(tmp_path):
    data = _many_fragments()
    path = tmp_path / "s.sse"
    path.write_bytes(data)
    full = orjson.loads(manage(str(path)).stdout)
    short = orjson.loads(manage(str(path), "--no-events").stdout)
    assert "events" not in short and full.pop("events")
    assert short == full
