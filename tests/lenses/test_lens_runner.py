"""A lens run in a forked process: its answer, its time and memory limits,
and its end as soon as nobody wants it."""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest
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


# Threads that each allocate, in a child capped as a lens child is: the address
# space they add, in MB (VmSize from /proc), printed by the child.
THREADS_IN_A_CAPPED_CHILD = """
import threading, sys
from inspector.lenses.runner import cap_memory, one_malloc_arena
if sys.argv[1] == "capped":
    cap_memory(4096)

def size():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) // 1024

before, held, ready, done = size(), [], threading.Barrier(9), threading.Event()

def work():
    held.append([bytes(100) for _ in range(1000)])
    ready.wait()
    done.wait()

threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
ready.wait()
print(size() - before)
done.set()
"""


def test_a_capped_childs_threads_share_one_malloc_arena():
    """Each thread's own arena reserved 64 MB of address space: a lens's
    library that starts threads ran out of its cap with little in use."""
    if platform.libc_ver()[0] != "glibc" or not Path("/proc/self/status").exists():
        pytest.skip("glibc's per-thread arenas, read from /proc")
    added = {}
    for mode in ("capped", "default"):
        run = subprocess.run(
            [sys.executable, "-c", THREADS_IN_A_CAPPED_CHILD, mode],
            capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2],
        )  # fmt: skip
        added[mode] = int(run.stdout)
    # 8 threads: 8 stacks of 8 MB either way; 8 arenas of 64 MB more by default.
    assert added["capped"] < 8 * 8 + 40 < added["default"], added
