"""What bounding a lens run costs, as side-by-side ratios (never a timed test).

    .venv/bin/python bench/lens_runner.py

A run here (`run_one`), a run forked from the warm fork server
(`bounded_run`, what the app does) and a fresh `python -c` that imports the
lenses and runs one (a subprocess per run): same stream, same lens.  Then the
matrix of a stored 2,000-call stream built from stored results.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inspector.lenses import read_frames_and_result, run_all  # noqa: E402
from inspector.lenses.matrix import matrix  # noqa: E402
from inspector.lenses.runner import bounded_run, run_one  # noqa: E402


def stream(calls: int) -> bytes:
    out = []
    for n in range(calls):
        entry = {
            "index": n,
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"n": n})},
        }
        out.append(
            {
                "object": "chat.completion.chunk",
                "id": "b",
                "created": 1,
                "model": "m",
                "choices": [{"index": 0, "delta": {"tool_calls": [entry]}}],
            }
        )
    text = "".join(f"data: {json.dumps(item)}\n\n" for item in out)
    return (
        text + 'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
        '"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    ).encode()


def best(fn, times: int = 5) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - started)
    return min(spent)


def fresh(body: bytes) -> None:
    code = (
        "import sys; from inspector.lenses.runner import run_one; "
        "run_one('openai', sys.stdin.buffer.read(), 'sse', None)"
    )
    subprocess.run([sys.executable, "-c", code], input=body, check=True)


def main() -> None:
    small = stream(3)
    bounded_run("openai", small, "sse", seconds=60, memory_mb=1024)  # start the fork server
    here = best(lambda: run_one("openai", small, "sse", None))
    forked = best(lambda: bounded_run("openai", small, "sse", seconds=60, memory_mb=1024))
    spawned = best(lambda: fresh(small), times=3)
    print(
        f"3-call stream, openai lens: in process 1.0x, forked {forked / here:.1f}x, "
        f"fresh python {spawned / here:.1f}x  (in process {here * 1000:.1f} ms)"
    )
    big = stream(2000)
    frames, strict = read_frames_and_result(big, "sse")
    results = run_all(frames)
    run = best(lambda: run_all(frames), times=1)
    table = best(lambda: matrix(strict, results), times=1)
    print(
        f"2,000-call stream: running the four lenses 1.0x ({run:.2f} s), "
        f"the matrix from their results {table / run:.2f}x"
    )


if __name__ == "__main__":
    main()
