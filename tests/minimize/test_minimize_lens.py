"""The lens target: "lens NAME diverges from strict the same way", true on the
original, false where the lens agrees or parts from strict another way; and
the minimizer with it: the result still diverges the same way, is no longer
than the original, is 1-minimal by frames and is the same on every run."""

from __future__ import annotations

import pytest
from minimize_streams import (
    CASES,
    DONE,
    REUSED_INDEX,
    ROLE,
    SPARSE_INDEX,
    calls,
    chunk,
    frames_of,
    join_frames,
    jsonl,
    sse,
    tool,
)
from minimize_streams import (
    OK as OK_STREAMS,
)

from inspector.assembly import assemble
from inspector.lenses import openai_sdk
from inspector.minimize import NothingToMinimize, minimize, refusal_signature
from inspector.minimize.lens import (
    LensAgrees,
    LensUnavailable,
    UnknownLens,
    lens_target,
    signature,
)

FINISH = chunk(None, finish="tool_calls")
OK = OK_STREAMS["one_call"]
# The same, but the first call's arguments are empty: LiteLLM keeps only the
# second call's text, so it drops a call without merging anything.
DROPPED = sse(
    calls(tool(0, "call_a", "read", "")),
    calls(tool(0, "call_b", "read", '{"path":"/b"}')),
    FINISH,
    DONE,
)
# The name sent again with every fragment: LangChain appends it.
REPEATED_NAME = sse(
    ROLE,
    calls(tool(0, "call_x", "read_file", '{"path":')),
    calls({"index": 0, "function": {"name": "read_file", "arguments": '"/a"}'}}),
    FINISH,
    DONE,
)
BY_NAME = {(code, variant): (fmt, data) for code, variant, fmt, data in CASES}
STRAY_FMT, STRAY = BY_NAME["INVALID_ARGUMENTS", "stray_brace"]

STREAMS = {
    "litellm-merge": ("litellm", "sse", sse(*REUSED_INDEX)),
    "litellm-merge-jsonl": (
        "litellm",
        "jsonl",
        jsonl(*(item for item in REUSED_INDEX if isinstance(item, dict)), "[DONE]"),
    ),
    "openai-raises": ("openai", "sse", SPARSE_INDEX),
    "langchain-name": ("langchain", "sse", REPEATED_NAME),
    "litellm-refused": ("litellm", STRAY_FMT, STRAY),
}


# --- the target --------------------------------------------------------------------------


def test_a_merge_is_kept_and_named():
    target = lens_target("litellm", sse(*REUSED_INDEX), "sse")
    assert target.signature == ("merges calls",)
    assert target.description == "LiteLLM diverges: merges calls"
    assert target(sse(*REUSED_INDEX))


def test_false_where_the_lens_agrees_or_diverges_another_way():
    target = lens_target("litellm", sse(*REUSED_INDEX), "sse")
    assert not target(OK)  # LiteLLM agrees with strict
    assert signature("litellm", DROPPED, "sse")[1] == ("drops a call",)
    assert not target(DROPPED)  # it diverges, but not by merging
    assert not target(b"")  # strict refuses: every call LiteLLM has would run despite it


@pytest.mark.parametrize(
    ("lens", "data", "labels"),
    [
        ("openai", SPARSE_INDEX, ("raises IndexError",)),
        ("langchain", REPEATED_NAME, ("repeats a name",)),
        ("litellm", STRAY, ("runs a call strict refuses (INVALID_ARGUMENTS)",)),
    ],
)
def test_the_kind_of_divergence(lens, data, labels):
    assert lens_target(lens, data, "sse").signature == labels


def test_a_lens_that_agrees_is_nothing_to_minimize():
    with pytest.raises(LensAgrees, match="Vercel agrees with strict on this stream"):
        lens_target("vercel", sse(*REUSED_INDEX), "sse")
    with pytest.raises(NothingToMinimize):
        lens_target("litellm", OK, "sse")


def test_an_unknown_lens():
    with pytest.raises(
        UnknownLens, match="unknown lens 'nope': use one of openai, anthropic, google-genai, vercel"
    ):
        lens_target("nope", sse(*REUSED_INDEX), "sse")


def test_an_unavailable_lens(monkeypatch):
    def missing():
        raise ImportError("No module named 'openai'")

    monkeypatch.setattr(openai_sdk, "_load", missing)
    with pytest.raises(LensUnavailable, match="the openai lens is unavailable"):
        lens_target("openai", SPARSE_INDEX, "sse")


# --- the minimizer with it ---------------------------------------------------------------


@pytest.fixture(scope="module")
def minimized():
    """Each stream minimized twice (the runs are compared for determinism)."""
    out = {}
    for key, (lens, fmt, data) in STREAMS.items():
        target = lens_target(lens, data, fmt)
        runs = [
            minimize(data, fmt, target=target, keeps=target.description, deadline_s=60)
            for _ in range(2)
        ]
        out[key] = (target, *runs)
    return out


@pytest.mark.parametrize("key", STREAMS)
def test_still_diverges_the_same_way_and_is_no_longer(minimized, key):
    lens, fmt, data = STREAMS[key]
    target, found, _ = minimized[key]
    assert not found.timed_out
    assert found.target == target.description
    assert signature(lens, found.data, fmt)[1] == target.signature
    assert len(found.data) < len(data)
    assert found.frames < found.original_frames


@pytest.mark.parametrize("key", STREAMS)
def test_one_minimal_by_frames(minimized, key):
    lens, fmt, _ = STREAMS[key]
    target, found, _ = minimized[key]
    frames = frames_of(found.data, fmt)
    assert join_frames(frames, fmt) == found.data
    for i in range(len(frames)):
        assert not target(join_frames(frames[:i] + frames[i + 1 :], fmt)), f"frame {i} can go"


@pytest.mark.parametrize("key", STREAMS)
def test_deterministic(minimized, key):
    _, first, second = minimized[key]
    assert first.data == second.data
    assert first.tests_run == second.tests_run


def test_a_refused_stream_stays_refused_the_same_way(minimized):
    _, found, _ = minimized["litellm-refused"]
    assert found.code == "INVALID_ARGUMENTS"
    assert refusal_signature(found.data, "sse") == refusal_signature(STRAY, "sse")


def test_an_accepted_stream_stays_accepted(minimized):
    _, found, _ = minimized["litellm-merge"]
    assert found.code is None
    # What is left: the two calls on index 0, and what makes the stream complete.
    # (their ids shortened, still two: "call_a" and "call_b" read as one glance)
    ids = [call.id for call in assemble(found.data, fmt="sse").calls]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)
    assert b"OPENROUTER" not in found.data and b"usage" not in found.data
