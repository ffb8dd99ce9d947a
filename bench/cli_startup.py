"""`manage.py assemble` start-up: the Django-free path against the same
command run through Django's management machinery, side by side.

    .venv/bin/python bench/cli_startup.py            # 10 rounds
    .venv/bin/python bench/cli_startup.py --rounds 20

Each round runs both on the same small stream, in alternating order, and the
figure is the median wall time of each and their ratio (bench/README.md).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":'
    b'"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}'
    b"\n\ndata: [DONE]\n\n"
)
THROUGH_DJANGO = (
    "import os, sys, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', "
    "'inspector.settings'); django.setup(); from django.core.management import "
    "call_command; call_command('assemble', sys.argv[1])"
)


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=PROJECT, check=False, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    with tempfile.NamedTemporaryFile(suffix=".sse") as file:
        file.write(STREAM)
        file.flush()
        contenders = {
            "manage.py assemble (no Django)": [sys.executable, "manage.py", "assemble", file.name],
            "through Django (call_command)": [sys.executable, "-c", THROUGH_DJANGO, file.name],
            "bare python -c pass": [sys.executable, "-c", "pass"],
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for round_ in range(rounds):
            order = list(contenders.items())
            if round_ % 2:
                order.reverse()
            for name, command in order:
                times[name].append(timed(command))
    fast = statistics.median(times["manage.py assemble (no Django)"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:34} median {median:.3f} s  ({median / fast:.2f}x the no-Django path)")


if __name__ == "__main__":
    main()
