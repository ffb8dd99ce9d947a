"""A lens's Node script, run once per stream in a bounded `node` process.

    answer = run_script(LENS_DIR / "lens.mjs", job_bytes)   # the script's JSON

The packages the scripts import are pinned in `node/package-lock.json` and
installed into `node/node_modules` by `make` (`npm ci --prefix
inspector/lenses/node`) when Node is present.  Each run is limited in time
(`SECONDS`) and in V8 heap (`HEAP_MB`), and dies with the process that
started it (Linux's parent-death signal), so a lens runner child killed past
its own time takes its `node` along.

Node reserves far more address space than it uses (about 700 MB here before
any script runs), and the lens runner caps the address space of its child,
which `node` inherits: the run therefore asks for one malloc arena, one V8
worker thread and no WebAssembly guard regions, which keep `node` within the
runner's default 1024 MB.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

LENS_DIR = Path(__file__).with_name("node")
SECONDS = 60.0
HEAP_MB = 256
INSTALL_HINT = (
    "install Node.js (18 or later) and run `make`, or `npm ci --prefix inspector/lenses/node`"
)
# Flags that shrink what node reserves, when this node knows them.
LEAN_FLAGS = ("--disable-wasm-trap-handler",)
LEAN_ENV = {"MALLOC_ARENA_MAX": "1", "UV_THREADPOOL_SIZE": "1"}
OUT_OF_MEMORY = ("heap out of memory", "Fatal process OOM", "Out of memory")
PR_SET_PDEATHSIG = 1


def node_path() -> str | None:
    return shutil.which("node")


def package_version(folder: Path, package: str) -> str | None:
    """The version of `package` installed under `folder/node_modules`."""
    try:
        manifest = json.loads((folder / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = manifest.get("version") if isinstance(manifest, dict) else None
    return version if isinstance(version, str) else None


def missing(folder: Path) -> str | None:
    """Why the scripts of `folder` cannot run here, or None."""
    if node_path() is None:
        return f"Node.js is not installed (no `node` on PATH): {INSTALL_HINT}"
    if not (folder / "node_modules").is_dir():
        return f"the lens's Node packages are not installed: {INSTALL_HINT}"
    return None


@functools.cache
def lean_flags(node: str) -> tuple[str, ...]:
    """The `LEAN_FLAGS` this node accepts (asked once per process)."""
    try:
        help_text = subprocess.run(
            [node, "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(flag for flag in LEAN_FLAGS if flag in help_text)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the starting thread ends."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def command(node: str, script: Path) -> list[str]:
    heap = f"--max-old-space-size={HEAP_MB}"
    return [node, heap, "--v8-pool-size=1", *lean_flags(node), str(script)]


def run_script(script: Path, job: bytes, *, seconds: float | None = None) -> dict[str, Any]:
    """Run `script` with `job` on its stdin; its stdout's JSON object.

    Raises `subprocess.TimeoutExpired` past `seconds` (`SECONDS` unless
    given), MemoryError when node ran out of memory, RuntimeError when it
    failed otherwise."""
    node = node_path()
    if node is None:
        raise RuntimeError(f"Node.js is not installed: {INSTALL_HINT}")
    env = {"PATH": os.environ.get("PATH", ""), **LEAN_ENV}
    done = subprocess.run(
        command(node, script),
        input=job,
        capture_output=True,
        timeout=SECONDS if seconds is None else seconds,
        cwd=script.parent,
        env=env,
        check=False,
        preexec_fn=_die_with_parent if _prctl is not None else None,
    )
    return _answer(done)


def _answer(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    stderr = done.stderr.decode("utf-8", "replace")
    if done.returncode != 0:
        if any(sign in stderr for sign in OUT_OF_MEMORY):
            raise MemoryError(f"node ran out of memory (heap limit {HEAP_MB} MB)")
        lines = [line for line in stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else "no output"
        raise RuntimeError(f"node failed (exit {done.returncode}): {last[:300]}")
    try:
        answer = json.loads(done.stdout)
    except ValueError as error:
        raise RuntimeError(f"node's answer is not JSON: {error}") from None
    if not isinstance(answer, dict):
        raise RuntimeError("node's answer is not a JSON object")
    return answer
