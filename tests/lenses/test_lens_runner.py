"""A lens run in a forked process: its answer, and its time and memory limits."""

from __future__ import annotations

from lens_streams import OK, REUSED_INDEX

from inspector.lenses.runner import DONE, FAILED, TIMEOUT, bounded_run, run_one


def test_a_bounded_run_answers_as_a_run_here_does():
    here = run_one("litellm", REUSED_INDEX, "sse", None)
    there = bounded_run("litellm", REUSED_INDEX, "sse", seconds=60, memory_mb=1024)
    assert there["status"] == DONE
    assert there["result"] == here["result"]
    assert [entry["kind"] for entry in there["divergences"]] == ["arguments", "missing"]
    assert there["peak_memory_kb"] > 0


def test_a_run_past_its_time_is_stopped():
    answer = bounded_run("vercel", OK, "sse", seconds=0.0001, memory_mb=1024)
    assert answer["status"] == TIMEOUT
    assert "stopped after" in answer["detail"]


def test_a_run_over_its_memory_fails_and_says_so():
    # The warm fork server (LiteLLM, LangChain imported) keeps freed heap that
    # a small run fits into even under a 1 MB cap: the stream is made bigger.
    answer = bounded_run("vercel", OK * 20000, "sse", seconds=60, memory_mb=1)
    assert answer["status"] == FAILED
    assert answer["detail"]
