"""`manage.py lens_check DIR` over a small corpus this test writes itself, and
the LiteLLM custom tool call the real-world corpus showed the lens missing."""

from __future__ import annotations

import json

from command_line import manage
from lens_streams import DONE, OK, chunk, frames, sse, tool

from inspector.lenses import run_lens
from inspector.lenses.corpus import AGREED, DISAGREED, NO_LENS, check_folder, tally

# A custom (free-text) tool call as OpenAI streams it: no `function`, its
# input in `custom.input` fragments.
CUSTOM_CALL = sse(
    chunk({"index": 0, "id": "call_c", "type": "custom", "custom": {"name": "patch", "input": ""}}),
    chunk({"index": 0, "custom": {"input": "line one\n"}}),
    chunk({"index": 0, "custom": {"input": "line two\n"}}),
    chunk(finish="tool_calls"),
    DONE,
)
# No finish reason before [DONE]: the Vercel lens raises.
NO_FINISH = sse(chunk(tool(0, "call_A", "read", '{"path":"/a"}', type="function")), DONE)
OK_CALL = {"id": "call_A", "name": "read", "arguments_text": '{"path":"/a"}'}


def write_case(folder, name: str, stream: bytes, peer: dict) -> None:
    (folder / f"{name}.sse").write_bytes(stream)
    (folder / f"{name}.expect.json").write_text(json.dumps({"peer_expects": peer}))


def test_litellm_combines_a_custom_tool_calls_input():
    stream, _ = frames(CUSTOM_CALL)
    [call] = run_lens("litellm", stream).calls
    assert (call.id, call.name, call.kind) == ("call_c", "patch", "custom")
    assert call.arguments_text == "line one\nline two\n"
    assert call.parsed is False


def test_a_corpus_that_agrees_exits_0_with_counts_per_lens(tmp_path):
    write_case(tmp_path, "litellm__ok", OK, {"outcome": "ok", "calls": [OK_CALL]})
    write_case(
        tmp_path,
        "litellm__custom",
        CUSTOM_CALL,
        {"outcome": "ok", "calls": [{"id": "call_c", "custom_input": "line one\nline two\n"}]},
    )
    error = "InvalidResponseDataError: Response stream ended without a finish reason."
    write_case(tmp_path, "vercel__no_finish", NO_FINISH, {"outcome": "error", "error": error})
    write_case(tmp_path, "pi__anything", OK, {"outcome": "ok", "calls": []})
    proc = manage("lens_check", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.decode()
    assert "3 of 3 streams with a lens agree; 4 streams" in out
    counts = tally(check_folder(tmp_path))
    assert counts["litellm"] == {AGREED: 2, DISAGREED: 0, NO_LENS: 0}
    assert counts[NO_LENS][NO_LENS] == 1


def test_a_disagreement_exits_1_and_says_what_differed(tmp_path):
    wrong = {**OK_CALL, "name": "write"}
    write_case(tmp_path, "langchain__renamed", OK, {"outcome": "ok", "calls": [wrong]})
    write_case(tmp_path, "vercel__no_finish", NO_FINISH, {"outcome": "ok", "calls": [OK_CALL]})
    proc = manage("lens_check", str(tmp_path))
    assert proc.returncode == 1
    out = proc.stdout.decode()
    assert 'call 0 name: peer "write", lens "read"' in out
    assert "outcome: peer ok, lens error" in out
    assert "0 of 2 streams with a lens agree" in out


def test_an_invalid_call_counts_apart_for_langchain(tmp_path):
    bad = sse(
        chunk(tool(0, "call_bad", "f", "not-json", type="function")),
        chunk(finish="tool_calls"),
        DONE,
    )
    write_case(
        tmp_path,
        "langchain__bad",
        bad,
        {"outcome": "invalid", "calls": [], "invalid_tool_calls": 1},
    )
    [check] = check_folder(tmp_path)
    assert (check.verdict, check.differences) == (AGREED, [])


def test_litellm_is_checked_where_its_tests_enter_it_the_chunk_builder(tmp_path):
    """LiteLLM's builder tests call `stream_chunk_builder` on chunks without
    a finish reason; its stream wrapper raises on that stream.  The check
    enters where the tests do, says so, and the matrix lens still raises."""
    two_calls = sse(
        chunk(tool(0, "call_A", "read", '{"path":"/a"}', type="function")),
        chunk(tool(1, "call_B", "read", '{"path":"/b"}', type="function")),
    )
    second = {"id": "call_B", "name": "read", "arguments_text": '{"path":"/b"}'}
    write_case(tmp_path, "litellm__no_finish", two_calls, {"calls": [OK_CALL, second]})
    [check] = check_folder(tmp_path)
    assert (check.verdict, check.differences) == (AGREED, [])
    proc = manage("lens_check", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "litellm: entered as its own tests enter it: stream_chunk_builder" in (
        proc.stdout.decode()
    )
    stream, _ = frames(two_calls)
    assert run_lens("litellm", stream).error.startswith("MidStreamFallbackError")


def test_a_folder_without_a_corpus_is_a_one_line_error(tmp_path):
    proc = manage("lens_check", str(tmp_path))
    assert proc.returncode == 2
    assert b"no NAME.expect.json" in proc.stderr
