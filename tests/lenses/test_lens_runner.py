"""A lens run in a forked process: its answer, its time and memory limits,
and its end as soon as nobody wants it."""

from __future__ import annotations

import time
from pathlib import Path

import slow_lens
from lens_streams import OK, REUSED_INDEX

from inspector.lenses import runner
from inspector.lenses.runner import ABANDONED, DONE, FAILED, TIMEOUT, bounded_run, run_one


def process_gone(pid: int) -> bool:
    """Whether process `pid` is gone, waiting for it up to 30 s (a busy machine)."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


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


def test_a_run_nobody_wants_any_more_is_killed(monkeypatch):
    monkeypatch.setattr(runner, "_child", slow_lens.never_ending)
    asked = []

    def wanted() -> bool:
        asked.append(True)
        return len(asked) < 3

    answer = bounded_run(
        slow_lens.SLOW, OK, "sse", seconds=600, memory_mb=1024, wanted=wanted, check_every=0.05
    )
    assert answer["status"] == ABANDONED and len(asked) == 3
    assert answer["detail"] == "stopped: nobody was waiting for it"
    assert "result" not in answer
    assert process_gone(answer["pid"])


def test_a_wanted_run_answers_as_ever():
    answer = bounded_run(
        "litellm", REUSED_INDEX, "sse", seconds=60, memory_mb=1024, wanted=lambda: True
    )
    assert answer["status"] == DONE
    assert answer["result"] == run_one("litellm", REUSED_INDEX, "sse", None)["result"]
    assert process_gone(answer["pid"])
