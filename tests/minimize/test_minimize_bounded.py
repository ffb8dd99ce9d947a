"""Minimizing keeping a lens's divergence in a bounded child process: the
same result as the search run here, its progress and errors carried back,
its time and memory bounded, and no client library run in this process."""

from __future__ import annotations

import pytest
from minimize_streams import OK as OK_STREAMS
from minimize_streams import REUSED_INDEX as REUSED_INDEX_ITEMS
from minimize_streams import SPARSE_INDEX, sse

import inspector.lenses
import inspector.minimize.lens
from inspector.minimize import minimize
from inspector.minimize.bounded import LensSearchFailed, minimize_keeping_lens
from inspector.minimize.lens import LensAgrees, UnknownLens, lens_target

# Two calls sharing index 0 (Ollama): LiteLLM (index only) glues them into one.
REUSED_INDEX = sse(*REUSED_INDEX_ITEMS)
OK = OK_STREAMS["one_call"]


def keep(lens: str, data: bytes, **options):
    options = {"deadline_s": 30, "memory_mb": 1024, **options}
    return minimize_keeping_lens(lens, data, "sse", **options)


def test_the_child_finds_what_the_search_here_finds():
    target = lens_target("openai", SPARSE_INDEX, "sse")
    here = minimize(SPARSE_INDEX, "sse", target=target, keeps=target.description)
    there = keep("openai", SPARSE_INDEX)
    assert there.data == here.data and len(there.data) < len(SPARSE_INDEX)
    assert there.target == "The OpenAI SDK diverges: raises IndexError"
    assert (there.fmt, there.frames, there.original_frames) == (
        here.fmt,
        here.frames,
        here.original_frames,
    )
    assert there.code is None and there.signature is None  # strict accepts it


def test_no_lens_runs_in_this_process(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a lens ran in the server's process")

    monkeypatch.setattr(inspector.lenses, "run_lens", refuse)
    monkeypatch.setattr(inspector.minimize.lens, "run_lens", refuse)
    assert keep("litellm", REUSED_INDEX).target == "LiteLLM diverges: merges calls"


def test_progress_comes_back_as_it_goes():
    reports = []
    keep("openai", SPARSE_INDEX, progress=reports.append)
    assert reports and reports[-1].target == "The OpenAI SDK diverges: raises IndexError"
    assert reports[-1].original_size == len(SPARSE_INDEX)
    assert [report.tests_run for report in reports] == sorted(r.tests_run for r in reports)


@pytest.mark.parametrize(
    ("lens", "data", "error", "message"),
    [
        ("litellm", OK, LensAgrees, "LiteLLM agrees with strict on this stream"),
        ("nope", OK, UnknownLens, "unknown lens 'nope'"),
    ],
)
def test_the_child_s_errors_are_raised_here(lens, data, error, message):
    with pytest.raises(error, match=message):
        keep(lens, data)


def test_a_search_past_its_time_is_stopped():
    with pytest.raises(LensSearchFailed, match="did not end in time"):
        keep("litellm", REUSED_INDEX, deadline_s=0, grace_s=0)


def test_a_search_over_its_memory_fails_and_says_so():
    # The warm fork server keeps freed heap that a small search fits into even
    # under a 1 MB cap: the stream is made bigger.
    with pytest.raises(LensSearchFailed, match="memory limit of 1 MB|process died"):
        keep("openai", SPARSE_INDEX * 20000, memory_mb=1, deadline_s=20)


def test_a_failed_allocation_told_as_system_error_is_the_memory_cap():
    from inspector.minimize.bounded import _error_message

    failed = SystemError("error return without exception set")
    assert "memory limit of 64 MB" in _error_message(failed, 64)["detail"]
    other = _error_message(SystemError("something else"), 64)
    assert other == {"error": "SystemError", "detail": "something else"}
