"""minimize(): for a stream of every refusal code, the result keeps the code,
is no longer than the original, is 1-minimal by frames and is the same on
every run."""

from __future__ import annotations

import orjson
import pytest
from minimize_streams import CASES, DONE, OK, ROLE, calls, chunk, frames_of, join_frames, sse, tool

from inspector.assembly import REFUSAL_CODES, UnreadableInput, assemble
from inspector.minimize import (
    NothingToMinimize,
    NotRefused,
    Progress,
    TargetNotMet,
    minimize,
    refusal_signature,
)

IDS = [f"{code}-{variant}" for code, variant, _, _ in CASES]


def strict_code(data: bytes, fmt: str) -> str | None:
    result = assemble(data, fmt=fmt)
    return result.refusal.code if result.refusal else None


# The minimizer reads chat streams; these two codes belong to the other dialects.
DIALECT_ONLY_CODES = {"INCONSISTENT_CALL", "SPLICED_STREAM"}


def test_every_refusal_code_has_a_stream():
    assert {code for code, _, _, _ in CASES} == set(REFUSAL_CODES) - DIALECT_ONLY_CODES


@pytest.fixture(scope="module")
def minimized():
    """Each case minimized twice (the runs are compared for determinism)."""
    return {
        (code, variant): (minimize(data, fmt), minimize(data, fmt))
        for code, variant, fmt, data in CASES
    }


@pytest.mark.parametrize(("code", "variant", "fmt", "data"), CASES, ids=IDS)
def test_keeps_the_code_and_is_no_longer(minimized, code, variant, fmt, data):
    found, _ = minimized[code, variant]
    assert strict_code(data, fmt) == code
    assert found.code == code
    assert strict_code(found.data, fmt) == code
    assert refusal_signature(found.data, fmt) == refusal_signature(data, fmt)
    assert len(found.data) <= len(data)
    assert found.original_bytes == len(data)
    assert found.frames <= found.original_frames
    assert not found.timed_out
    assert found.tests_run > 0 and found.steps > 0  # every case has noise to remove
    assert len(found.data) < len(data)


@pytest.mark.parametrize(("code", "variant", "fmt", "data"), CASES, ids=IDS)
def test_one_minimal_by_frames(minimized, code, variant, fmt, data):
    found, _ = minimized[code, variant]
    frames = frames_of(found.data, fmt)
    assert join_frames(frames, fmt) == found.data  # the frames are all there is
    assert len(frames) == found.frames
    wanted = refusal_signature(data, fmt)
    for i in range(len(frames)):
        smaller = join_frames(frames[:i] + frames[i + 1 :], fmt)
        assert refusal_signature(smaller, fmt) != wanted, f"frame {i} can go"
        if code != "INCOMPLETE_STREAM":
            # INCOMPLETE_STREAM keeps its cause too: without its last frame a
            # cut stream is still INCOMPLETE_STREAM, but an empty one.
            assert strict_code(smaller, fmt) != code, f"frame {i} can go"


@pytest.mark.parametrize(("code", "variant", "fmt", "data"), CASES, ids=IDS)
def test_deterministic(minimized, code, variant, fmt, data):
    first, second = minimized[code, variant]
    assert first.data == second.data
    assert first.tests_run == second.tests_run
    assert [p.name for p in first.passes] == [p.name for p in second.passes]


@pytest.mark.parametrize(("code", "variant", "fmt", "data"), CASES, ids=IDS)
def test_frames_are_kept_verbatim_or_rewritten_compactly(minimized, code, variant, fmt, data):
    """A frame of the result is a frame of the original, as it was read, or an
    edited chunk written as compact JSON."""
    found, _ = minimized[code, variant]
    original = {raw for raw, _ in frames_of(data, fmt)}
    for raw, _ in frames_of(found.data, fmt):
        if raw in original:
            continue
        body = raw.removeprefix("data: ") if fmt == "sse" else raw
        assert orjson.dumps(orjson.loads(body)).decode() == body


def test_cut_frame_stays_cut():
    data = dict(((c, v), d) for c, v, _, d in CASES)["INCOMPLETE_STREAM", "cut_mid_frame"]
    found = minimize(data, "sse")
    assert not found.data.endswith(b"\n")
    assert refusal_signature(found.data, "sse") == (
        "INCOMPLETE_STREAM",
        "cut in the middle of a frame",
    )
    assert found.frames == 1


def test_crlf_input_comes_out_with_lf():
    data = dict(((c, v), d) for c, v, _, d in CASES)["INVALID_ARGUMENTS", "parser_found_crlf"]
    found = minimize(data, "sse")
    assert b"\r" not in found.data


def test_auto_format_and_har():
    data = sse(ROLE, calls(tool(0, "c1", "a", "")), calls(tool(0, "c1", "b", "")), DONE)
    assert minimize(data, "auto").data == minimize(data, "sse").data
    har = orjson.dumps(
        {
            "log": {
                "entries": [
                    {
                        "request": {"url": "https://example.test/v1/chat/completions"},
                        "response": {
                            "content": {"mimeType": "text/event-stream", "text": data.decode()}
                        },
                    }
                ]
            }
        }
    )
    found = minimize(har, "har")
    assert found.fmt == "sse"
    assert found.data == minimize(data, "sse").data
    assert found.code == "IDENTITY_CONFLICT"


@pytest.mark.parametrize("name", sorted(OK))
def test_an_ok_stream_has_nothing_to_minimize(name):
    fmt = "jsonl" if name.endswith("_jsonl") else "sse"
    with pytest.raises(NotRefused, match="not refused"):
        minimize(OK[name], fmt)


def test_unreadable_input():
    with pytest.raises(UnreadableInput):
        minimize(b'{"log": {}}', "har")
    with pytest.raises(UnreadableInput):
        minimize(b"data: [DONE]\n\n", "xml")


def test_a_custom_target():
    """Any predicate on bytes can be kept, e.g. a lens divergence; here: the
    stream is ok but its one call's arguments hold "/a"."""
    data = OK["one_call"]

    def reads_a(candidate: bytes) -> bool:
        result = assemble(candidate, fmt="sse")
        return result.refusal is None and any(c.arguments == {"path": "/a"} for c in result.calls)

    found = minimize(data, "sse", target=reads_a, keeps="the call reads /a")
    assert reads_a(found.data)
    assert found.code is None and found.target == "the call reads /a"
    assert len(found.data) < len(data)
    frames = frames_of(found.data, "sse")
    for i in range(len(frames)):
        assert not reads_a(join_frames(frames[:i] + frames[i + 1 :], "sse"))

    with pytest.raises(TargetNotMet):
        minimize(data, "sse", target=lambda candidate: False)
    assert issubclass(TargetNotMet, NothingToMinimize) and issubclass(NotRefused, NothingToMinimize)


def test_the_time_budget_is_kept_and_progress_is_reported():
    """A clock that jumps a second per call: the search stops when the budget
    is spent and returns a stream that still fails the same way."""
    data = dict(((c, v), d) for c, v, _, d in CASES)[
        "AMBIGUOUS_CONTINUATION", "two_calls_one_index"
    ]
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    reports: list[Progress] = []
    found = minimize(data, "sse", deadline_s=6, clock=clock, progress=reports.append)
    assert found.timed_out
    assert found.code == "AMBIGUOUS_CONTINUATION"
    assert len(found.data) <= len(data)
    assert reports and reports[0].pass_name == "frames" and reports[0].round == 1

    reports.clear()
    full = minimize(data, "sse", progress=reports.append)
    assert not full.timed_out
    assert {r.pass_name for r in reports} == {"frames", "entries", "fragments", "characters"}
    assert reports[-1].size == len(full.data) and reports[-1].done
    assert [p.name for p in full.passes[:4]] == ["frames", "entries", "fragments", "characters"]
    assert full.passes[-1].name == "characters"


def test_entries_and_arguments_are_shrunk():
    """Noise inside the frames goes too: an unrelated entry sharing a frame
    with the conflict, and the arguments around the fault."""
    data = sse(
        ROLE,
        calls(tool(0, "call_a", "read", '{"path":"/a"}'), tool(1, "call_b", "read", "")),
        calls(tool(1, args='{"path":"/b","mode":"r"')),
        calls(tool(1, args=', "extra": [1, 2, 3]}}')),
        chunk(None, finish="tool_calls"),
        DONE,
    )
    found = minimize(data, "sse")
    assert found.code == "INVALID_ARGUMENTS"
    assert b"call_a" not in found.data
    result = assemble(found.data, fmt="sse")
    assert len(result.calls) == 1
    assert len(result.calls[0].arguments_text) <= 2
