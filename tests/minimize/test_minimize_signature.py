"""The failure signature is kept: one stream per invalid-arguments class
(each refusal code is covered by test_minimize_stream over CASES), the fault
stays where the original had it, and what every frame repeats goes."""

from __future__ import annotations

import orjson
import pytest
from minimize_streams import (
    CASES,
    DONE,
    KEEPALIVE,
    ROLE,
    USAGE,
    calls,
    chunk,
    dumps,
    frames_of,
    join_frames,
    sse,
    tool,
)

from inspector.assembly import assemble
from inspector.minimize import FAULT_CLASSES, Progress, failure_signature, minimize

FINISH = chunk(None, finish="tool_calls")


def faulty(*fragments: str) -> bytes:
    """A good call, then a call whose arguments come in these fragments."""
    return sse(
        ROLE,
        chunk({"content": "Let me query that."}, system_fingerprint="fp_test"),
        calls(tool(0, "call_good", "lookup", '{"q":"ok"}')),
        KEEPALIVE,
        calls(tool(1, "call_bad", "run_query", "")),
        *[calls(tool(1, args=piece)) for piece in fragments],
        FINISH,
        USAGE,
        DONE,
    )


# class -> the arguments' fragments (the fault somewhere in the middle of them)
BY_CLASS = {
    # The demo "arguments that never become JSON": '}' does not close '['.
    "unclosed_bracket": (
        '{"sql": "SELECT name FROM users',
        ' WHERE id IN (?, ?)", "params": [7, ',
        "8}",
        "}",
    ),
    "bad_first_character": ("  [", '{"path": "/a"}', "]"),
    "text_after_root": ('{"path": ', '"/a"} {"path": "/b"}'),
    "unexpected_end": ('{"path": "/a", ', '"mode": "r'),
    "bad_string": ('{"path": "/a', "\\q", '", "mode": "r"}'),
    "bad_number": ('{"limit": ', "-", ', "path": "/a"}'),
    "trailing_comma": ('{"path": "/a", "mode": "r"', ",", "}"),
    "bad_literal": ('{"path": "/a", "follow": ', "tru", "}"),
    "unexpected_character": ('{"path" ', '"/a", "mode": "r"}'),
}


def fault_of(data: bytes) -> tuple[str, int, str]:
    """(the fault's fragment, the fault's offset in the arguments, the offending
    character) as the strict result says."""
    result = assemble(data, fmt="sse")
    call = result.calls[result.refusal.to_dict()["call"]]
    offset = call.invalid_at["offset"]
    text = call.arguments_text
    fragment = next(
        piece
        for frame, start, piece in reversed(call.fragments())
        if frame == call.invalid_at["frame"] and start <= offset
    )
    return fragment, offset, text[offset] if offset < len(text) else ""


@pytest.fixture(scope="module")
def minimized():
    return {name: minimize(faulty(*pieces), "sse") for name, pieces in BY_CLASS.items()}


def test_every_class_has_a_stream():
    assert set(BY_CLASS) == set(FAULT_CLASSES) - {"bad_path"}  # Gemini only


@pytest.mark.parametrize("name", sorted(BY_CLASS))
def test_the_stream_has_its_class(name):
    found = failure_signature(faulty(*BY_CLASS[name]), "sse")
    assert found.code == "INVALID_ARGUMENTS" and found.fault.reason == name


@pytest.mark.parametrize("name", sorted(BY_CLASS))
def test_keeps_the_whole_signature(minimized, name):
    data = faulty(*BY_CLASS[name])
    found = minimized[name]
    assert failure_signature(found.data, "sse") == failure_signature(data, "sse")
    assert found.signature == failure_signature(data, "sse")
    assert len(found.data) < len(data) and not found.timed_out


@pytest.mark.parametrize("name", sorted(BY_CLASS))
def test_one_minimal(minimized, name):
    wanted = failure_signature(faulty(*BY_CLASS[name]), "sse")
    frames = frames_of(minimized[name].data, "sse")
    for i in range(len(frames)):
        smaller = join_frames(frames[:i] + frames[i + 1 :], "sse")
        assert failure_signature(smaller, "sse") != wanted, f"frame {i} can go"


@pytest.mark.parametrize("name", sorted(BY_CLASS))
def test_the_fault_is_still_the_fault(minimized, name):
    """The offending character of the original is the minimized stream's
    fault too, in the fragment the refusal points at."""
    _, _, char = fault_of(faulty(*BY_CLASS[name]))
    fragment, offset, kept = fault_of(minimized[name].data)
    assert kept == char
    if char:
        assert char in fragment
    else:  # the text ended too soon: the fault is past its last character
        assert offset >= len(assemble(minimized[name].data, fmt="sse").calls[0].arguments_text)


def test_the_demo_keeps_its_unclosed_bracket(minimized):
    """Issue 14: it used to become "arguments do not start with '{'"."""
    result = assemble(minimized["unclosed_bracket"].data, fmt="sse")
    assert "does not close '['" in result.refusal.message
    assert result.calls[0].arguments_text.lstrip().startswith("{")


ENVELOPE = {"id", "object", "created", "model", "system_fingerprint", "logprobs", "usage"}


def test_envelope_keys_are_gone_from_a_minimized_chat_stream(minimized):
    for name, found in minimized.items():
        for raw, _ in frames_of(found.data, "sse"):
            if raw == "data: [DONE]":
                continue
            payload = orjson.loads(raw.removeprefix("data: "))
            choices = payload.get("choices") or []
            held = set(payload).union(*[set(c) for c in choices if type(c) is dict])
            assert not held & ENVELOPE, (name, raw)
    assert b"chatcmpl" not in b"".join(found.data for found in minimized.values())


def test_ids_and_names_are_shortened_distinct_ones_kept_apart():
    data = dict(((c, v), d) for c, v, _, d in CASES)["IDENTITY_CONFLICT", "renamed_call"]
    found = minimize(data, "sse")
    wanted = failure_signature(data, "sse")
    assert found.signature == wanted and wanted.names_present == (True, True)
    assert b"read_file" not in found.data and b"write_file" not in found.data
    assert len(found.data) < len(data)


def test_dialect_events_stay_whole():
    """An edited Responses or Messages event keeps its `event:` line, naming
    the type its data holds."""
    for code in ("INCONSISTENT_CALL", "SPLICED_STREAM"):
        ((variant, data),) = [(v, d) for c, v, _, d in CASES if c == code]
        found = minimize(data, "sse")
        assert found.signature == failure_signature(data, "sse")
        for raw, _ in frames_of(found.data, "sse"):
            event, body = raw.split("\n")
            payload = orjson.loads(body.removeprefix("data: "))
            assert event == f"event: {payload['type']}", variant


def test_ambiguity_keeps_its_number_of_candidates():
    data = sse(
        ROLE,
        *[calls(tool(0, f"call_{n}", "read", '{"path":')) for n in range(3)],
        calls(tool(0, args='"/a"}')),
        FINISH,
        DONE,
    )
    found = minimize(data, "sse")
    assert failure_signature(data, "sse").candidates == 3
    assert found.signature.candidates == 3
    assert len(assemble(found.data, fmt="sse", policy="lenient").calls) == 3


def test_progress_says_candidates_and_size():
    data = faulty(*BY_CLASS["unclosed_bracket"])
    reports: list[Progress] = []
    found = minimize(data, "sse", progress=reports.append)
    last = reports[-1]
    assert [r.tests_run for r in reports] == sorted(r.tests_run for r in reports)
    assert last.tests_run == found.tests_run
    assert (last.size, last.frames) == (len(found.data), found.frames)
    assert (last.original_size, last.original_frames) == (len(data), found.original_frames)
    assert last.target == found.target and "unclosed bracket" in last.target
    line, record = last.line(), last.to_dict()
    assert f"{found.tests_run} tests" in line and f"{len(found.data)} of {len(data)} bytes" in line
    assert record["frames"] == found.frames and 0 <= record["fraction"] <= 1
    assert orjson.loads(orjson.dumps(record)) == record
    assert dumps(found.signature.to_dict())  # JSON-ready for the page
