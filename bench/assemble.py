"""Speed benchmark for the pure tool-call assembler (`inspector.assembly`).

Run from the repository root:

    .venv/bin/python bench/assemble.py            # or: make bench
    .venv/bin/python bench/assemble.py --profile b   # cProfile of assemble() on one stream

Four generated SSE streams (OpenAI-style chat-completion chunks):

    a1  parallel tool calls, 8 calls interleaved by index, 100,000 frames
    b1  one call whose 200 KiB argument arrives 1-3 bytes per frame
    a4  as a1 at 4x (400,000 frames)
    b4  as b1 at 4x (800 KiB argument)

Contenders, timed side by side in one process, in alternating order each round:

    floor  split the bytes on b"\\n\\n", strip "data: ", orjson.loads every payload
    ours   inspector.assembly.assemble(data, fmt="sse")  (strict); to_dict() timed apart
    sdk    the OpenAI SDK's own path: openai.Stream over an in-memory response (its
           SSEDecoder, json.loads, construct_type via _process_response_data), then
           ChatCompletionStreamState.handle_chunk() per chunk and get_final_completion()

Figures go to stdout and to bench-results/assemble.json (git-ignored).
See bench/README.md for how to read them.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import random
import statistics
import string
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this tree's assembler, whatever the venv has installed

from inspector.assembly import assemble  # noqa: E402

try:  # the SDK is a dev dependency; the benchmark still runs without it
    import httpx2
    import openai
    from openai import OpenAI, Stream
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk
except ImportError as error:  # pragma: no cover - depends on the venv
    openai = None
    SDK_MISSING = f"{type(error).__name__}: {error}"
else:
    SDK_MISSING = None

RESULTS = ROOT / "bench-results" / "assemble.json"

TARGETS = {"ours_over_floor_max": 2.0, "sdk_over_ours_min": 10.0, "scaling_4x_max": 4.4}

MODEL = "gpt-4o-mini"
CREATED = 1767225600
TOOL_NAMES = (
    "search_docs",
    "get_weather",
    "read_file",
    "run_sql",
    "create_ticket",
    "send_email",
    "translate_text",
    "list_events",
)
WORDS = (
    "the quick brown fox jumps over a lazy dog while streaming tool calls arrive in "
    "small pieces from many providers and gateways across regions naïve café Zürich "
    "東京 données señal 🚀 résumé"
).split()
ODD_BITS = ('"quoted"', "tab\there", "line\nbreak", "back\\slash", "C:\\temp\\x", "{not json}")


# -- stream generation ---------------------------------------------------------


class Wire:
    """Writes OpenAI-style `chat.completion.chunk` SSE frames for one response."""

    def __init__(self, rng: random.Random) -> None:
        alphabet = string.ascii_letters + string.digits
        self.id = "chatcmpl-" + "".join(rng.choice(alphabet) for _ in range(29))
        self.fingerprint = "fp_" + "".join(rng.choice("0123456789abcdef") for _ in range(10))
        self.frames: list[bytes] = []

    def _frame(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None) -> None:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": MODEL,
            "service_tier": "default",
            "system_fingerprint": self.fingerprint,
            "choices": choices,
            "usage": usage,
        }
        self.frames.append(b"data: " + orjson.dumps(chunk) + b"\n\n")

    def delta(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        self._frame([choice], None)

    def header(self, index: int, call_id: str, name: str, first: bool) -> None:
        entry = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        delta: dict[str, Any] = {"tool_calls": [entry]}
        if first:
            delta = {"role": "assistant", "content": None, "refusal": None, **delta}
        self.delta(delta)

    def arguments(self, index: int, fragment: str) -> None:
        self.delta({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})

    def end(self, completion_tokens: int) -> bytes:
        self.delta({}, "tool_calls")
        self._frame(
            [],
            {
                "prompt_tokens": 812,
                "completion_tokens": completion_tokens,
                "total_tokens": 812 + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
        )
        self.frames.append(b"data: [DONE]\n\n")
        return b"".join(self.frames)


def _sentence(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words) + 1), rng.choice(ODD_BITS))
    return " ".join(words)


def _call_arguments(rng: random.Random, k: int, min_chars: int) -> str:
    """A realistic arguments object (nested objects and arrays, escapes, non-ASCII,
    numbers, literals) whose compact JSON text has at least `min_chars` characters."""
    doc: dict[str, Any] = {
        "request_id": f"req-{k:04d}",
        "query": _sentence(rng, 4, 12),
        "options": {
            "limit": rng.randint(1, 100),
            "exact": rng.random() < 0.5,
            "threshold": round(rng.random(), 4),
            "tags": [rng.choice(WORDS) for _ in range(3)],
            "cursor": None,
        },
        "items": [],
    }
    size = len(orjson.dumps(doc).decode())
    while size < min_chars:
        item = {
            "id": len(doc["items"]),
            "title": _sentence(rng, 2, 6),
            "body": _sentence(rng, 8, 30),
            "score": round(rng.uniform(-1000, 1000), 3),
            "flags": [rng.random() < 0.5 for _ in range(rng.randint(0, 3))],
            "meta": {"lang": rng.choice(("en", "fr", "ja", "es")), "pos": [rng.randint(0, 99)]},
        }
        doc["items"].append(item)
        size += len(orjson.dumps(item).decode()) + 1
    return orjson.dumps(doc).decode()


def _cut(text: str, pieces: int, rng: random.Random) -> list[str]:
    """`text` in exactly `pieces` non-empty fragments at random places."""
    cuts = sorted(rng.sample(range(1, len(text)), pieces - 1))
    bounds = [0, *cuts, len(text)]
    return [text[bounds[i] : bounds[i + 1]] for i in range(pieces)]


def parallel_stream(frames: int, calls: int = 8, seed: int = 1) -> tuple[bytes, list[tuple]]:
    """`frames` frames: `calls` headers (id + name), then the calls' argument
    fragments interleaved at random by index, then finish, usage and [DONE]."""
    rng = random.Random(seed)
    wire = Wire(rng)
    fragment_frames = frames - calls - 3
    counts = [fragment_frames // calls + (k < fragment_frames % calls) for k in range(calls)]
    expected, fragments = [], []
    for k in range(calls):
        text = _call_arguments(rng, k, min_chars=int(counts[k] * 4.2))  # ~4 chars a token
        call_id = f"call_{k}" + "".join(rng.choice(string.ascii_letters) for _ in range(22))
        expected.append((call_id, TOOL_NAMES[k % len(TOOL_NAMES)], text))
        fragments.append(iter(_cut(text, counts[k], rng)))
        wire.header(k, call_id, expected[k][1], first=k == 0)
    order = [k for k in range(calls) for _ in range(counts[k])]
    rng.shuffle(order)
    for k in order:
        wire.arguments(k, next(fragments[k]))
    return wire.end(completion_tokens=fragment_frames), expected


_CODE_LINES = (
    '    log.info("loaded %s rows from \\"%s\\"", count, path)\n',
    "    if not re.match(r'^[A-Z]\\w+$', name):\n",
    '        raise ValueError(f"bad name: {name!r}")\n',
    "    return {'id': row[0], 'tags': row[1].split('\\t')}\n",
    'def handler(event, context):  # "entry point"\n',
    '    path = "C:\\\\Users\\\\build\\\\out.txt"\n',
    "\n",
)


def long_argument_stream(target_chars: int, seed: int = 2) -> tuple[bytes, list[tuple]]:
    """One call whose ASCII arguments text is exactly `target_chars` long, sent
    1-3 characters (= bytes) per frame."""
    rng = random.Random(seed)
    wire = Wire(rng)
    edits = [
        {"line": i * 7, "op": rng.choice(("insert", "replace", "delete")), "text": line}
        for i, line in enumerate(rng.choice(_CODE_LINES) for _ in range(target_chars // 160))
    ]
    doc = {"path": "src/generated/module_0001.py", "mode": "overwrite", "edits": edits}
    doc["content"] = ""
    room = target_chars - len(orjson.dumps(doc))
    lines = []
    while True:
        line = rng.choice(_CODE_LINES)
        cost = len(orjson.dumps(line)) - 2  # escaped length inside the JSON string
        if cost > room:
            break
        lines.append(line)
        room -= cost
    lines.append("".join(rng.choice(string.ascii_letters) for _ in range(room)))
    doc["content"] = "".join(lines)
    text = orjson.dumps(doc).decode()
    assert len(text) == target_chars and text.isascii(), len(text)
    call_id = "call_" + "".join(rng.choice(string.ascii_letters) for _ in range(24))
    wire.header(0, call_id, "write_file", first=True)
    pos = 0
    while pos < len(text):
        step = rng.randint(1, 3)
        wire.arguments(0, text[pos : pos + step])
        pos += step
    return wire.end(completion_tokens=len(wire.frames)), [(call_id, "write_file", text)]


STREAMS = {
    "a1": ("(a) parallel calls 1x", lambda: parallel_stream(100_000)),
    "b1": ("(b) 200 KiB argument 1x", lambda: long_argument_stream(200 * 1024)),
    "a4": ("(a) parallel calls 4x", lambda: parallel_stream(400_000)),
    "b4": ("(b) 800 KiB argument 4x", lambda: long_argument_stream(800 * 1024)),
}


# -- the contenders ------------------------------------------------------------

DONE_BLOCK = b"data: [DONE]"


def floor(data: bytes) -> int:
    """The least any SSE assembler must do: split frames and parse every payload."""
    loads = orjson.loads
    count = 0
    for block in data.split(b"\n\n"):
        if block and block != DONE_BLOCK:
            loads(block[6:])  # every generated block is one "data: " line
            count += 1
    return count


def ours(data: bytes) -> Any:
    return assemble(data, fmt="sse")


BASE: Any = None  # `--base DIR`: the `inspector.assembly` package of another tree


def load_base(tree: Path) -> Any:
    """Import `tree`'s `inspector/assembly` as a package of its own
    (`base_assembly`: its modules import each other relatively), so two
    assemblers are timed side by side in one process."""
    import importlib.util

    package = tree / "inspector" / "assembly"
    spec = importlib.util.spec_from_file_location(
        "base_assembly", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"--base: no inspector/assembly package under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["base_assembly"] = module
    spec.loader.exec_module(module)
    return module


def base(data: bytes) -> Any:
    return BASE.assemble(data, fmt="sse")


_CLIENT = None


def sdk(data: bytes) -> Any:
    """What `for chunk in client.chat.completions.create(..., stream=True)` plus
    `ChatCompletionStreamState` does with these bytes: the SDK's own `Stream`
    (its SSEDecoder, `sse.json()` = json.loads, `client._process_response_data`
    = `construct_type(ChatCompletionChunk)`, no validation), the weak
    chat.completion.chunk check of `ChatCompletionStream`, then `handle_chunk`."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = OpenAI(api_key="bench-no-network", base_url="http://127.0.0.1:9/v1")
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx2.Response(
        200, content=data, request=request, headers={"content-type": "text/event-stream"}
    )
    stream = Stream(cast_to=ChatCompletionChunk, response=response, client=_CLIENT)
    state = ChatCompletionStreamState()
    for chunk in stream:
        if chunk.object == "chat.completion.chunk":
            state.handle_chunk(chunk)
    return state.get_final_completion()


# -- checks --------------------------------------------------------------------


def check_ours(result: Any, expected: list[tuple], frames: int) -> None:
    """A broken generator must not give flattering numbers."""
    assert result.outcome == "ok", result.refusal and result.refusal.to_dict()
    assert result.frames == frames, (result.frames, frames)
    assert not result.anomalies, [a.to_dict() for a in result.anomalies]
    got = [(c.id, c.name, c.arguments_text) for c in result.calls]
    assert got == expected, "assembled calls differ from the generated ones"
    for call, (_, _, text) in zip(result.calls, expected, strict=True):
        assert call.arguments == orjson.loads(text)
        assert call.settled_frame is not None


def check_sdk(completion: Any, expected: list[tuple]) -> str:
    """'ok', or what differs."""
    tool_calls = completion.choices[0].message.tool_calls or []
    if len(tool_calls) != len(expected):
        return f"mismatch: {len(tool_calls)} tool calls, expected {len(expected)}"
    by_id = {tc.id: tc for tc in tool_calls}
    for call_id, name, text in expected:
        tc = by_id.get(call_id)
        if tc is None:
            return f"mismatch: no tool call with id {call_id}"
        if tc.function.name != name or tc.function.arguments != text:
            return f"mismatch: call {call_id} has other name or arguments"
    return "ok"


# -- measuring -----------------------------------------------------------------


# The clock of the timings: wall time, or the process's CPU time (`--cpu`,
# which leaves out the time other processes held the cores).
CLOCK: list[Callable[[], float]] = [time.perf_counter]


class GCClock:
    """Seconds spent in the cyclic garbage collector, read via `gc.callbacks`."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = CLOCK[0]()
        else:
            self.seconds += CLOCK[0]() - self._start
            self.collections[info["generation"]] += 1


GC_CLOCK = GCClock()


def timed(fn: Callable[[bytes], Any], data: bytes) -> tuple[float, float, Any]:
    """(wall seconds, of which in the cyclic GC, return value)"""
    gc.collect()
    gc_before = GC_CLOCK.seconds
    start = CLOCK[0]()
    value = fn(data)
    seconds = CLOCK[0]() - start
    return seconds, GC_CLOCK.seconds - gc_before, value


def measure(key: str, data: bytes, expected: list[tuple], frames: int, args: Any) -> dict:
    """Interleaved rounds: each round runs every contender once, in an order
    rotated round by round so they share the machine's noise."""
    contenders = ["floor", "ours"] + (["base"] if BASE else []) + (["sdk"] if args.sdk else [])
    extras = ["to_dict", "ours_gc", "ours_without_gc"]
    times: dict[str, list[float]] = {name: [] for name in contenders + extras}
    sdk_reps = args.reps  # lowered after the first SDK run when it is slow
    sdk_status, sdk_error = None, None
    for round_ in range(args.reps):
        shift = round_ % len(contenders)
        for name in contenders[shift:] + contenders[:shift]:
            if name == "floor":
                seconds, _, count = timed(floor, data)
                assert count == frames - 1, (count, frames)
            elif name == "base":
                seconds, _, result = timed(base, data)
                if round_ == 0:
                    check_ours(result, expected, frames)
                del result
            elif name == "ours":
                seconds, in_gc, result = timed(ours, data)
                times["ours_gc"].append(in_gc)
                times["ours_without_gc"].append(seconds - in_gc)
                if round_ == 0:
                    check_ours(result, expected, frames)
                start = CLOCK[0]()
                result.to_dict()
                times["to_dict"].append(CLOCK[0]() - start)
                del result
            else:
                if sdk_error is not None or len(times["sdk"]) >= sdk_reps:
                    continue
                try:
                    seconds, _, completion = timed(sdk, data)
                except Exception as error:  # report, don't hide: the SDK failed this stream
                    sdk_error = f"{type(error).__name__}: {str(error)[:200]}"
                    continue
                if sdk_status is None:
                    sdk_status = check_sdk(completion, expected)
                    sdk_reps = max(1, min(args.reps, int(args.sdk_budget // seconds)))
                del completion
            times[name].append(seconds)
        gc.collect()
        best = {n: min(t) for n, t in times.items() if t and not n.startswith("ours_")}
        print(
            f"  {key} round {round_ + 1}/{args.reps}: "
            + "  ".join(f"{n} {s:.3f}s" for n, s in best.items()),
            file=sys.stderr,
            flush=True,
        )
    out: dict[str, Any] = {}
    for name, values in times.items():
        if values:
            out[name] = {
                "runs": len(values),
                "best": min(values),
                "median": statistics.median(values),
                "all": values,
            }
    if args.sdk:
        out["sdk_check"] = sdk_status
        out["sdk_error"] = sdk_error
    return out


def peak_memory(data: bytes) -> int:
    """tracemalloc peak of one assemble() run, result kept alive to the end."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = assemble(data, fmt="sse")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


# -- reporting -----------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(
                (line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                cpu,
            )
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "orjson": orjson.__version__,
        "openai": openai.__version__ if openai is not None else None,
        "platform": platform.platform(),
        "cpu": cpu,
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_count": os.cpu_count(),
    }


def ratio(numerator: dict | None, denominator: dict | None, field: str) -> float | None:
    if not numerator or not denominator:
        return None
    return numerator[field] / denominator[field]


def verdict(value: float | None, limit: float, at_most: bool) -> str:
    if value is None:
        return "n/a"
    return "met" if (value <= limit if at_most else value >= limit) else "MISSED"


def fmt_s(entry: dict | None) -> str:
    if not entry:
        return "-"
    return f"{entry['best']:.3f}/{entry['median']:.3f}"


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def report(streams: dict[str, dict], env: dict[str, Any], args: Any) -> dict[str, Any]:
    print()
    print(
        f"Python {env['python']} ({env['implementation']}), orjson {env['orjson']}, "
        f"openai {env['openai'] or 'missing: ' + str(SDK_MISSING)}"
    )
    print(f"{env['platform']}; {env['cpu']}; nproc {env['nproc']}")
    print(
        f"rounds per stream: {args.reps}, contenders alternating; SDK runs: as many as fit "
        f"in {args.sdk_budget:.0f}s per stream (1 to {args.reps}); times: best/median seconds"
        f" of {'CPU' if args.cpu else 'wall'} time"
    )
    print()
    head = (
        f"{'stream':<25}{'frames':>8}{'input MB':>9}{'floor s':>13}{'ours s':>14}"
        f"{'to_dict s':>13}{'SDK s':>20}{'ours/floor':>11}{'SDK/ours':>9}{'peak MB':>9}"
    )
    print(head)
    print("-" * len(head))
    summary: dict[str, Any] = {}
    for key, info in streams.items():
        t = info["times"]
        sdk_entry = t.get("sdk")
        over_floor = ratio(t.get("ours"), t.get("floor"), "best")
        sdk_over = ratio(sdk_entry, t.get("ours"), "best")
        summary[key] = {
            "ours_over_floor": over_floor,
            "ours_over_floor_median": ratio(t.get("ours"), t.get("floor"), "median"),
            "sdk_over_ours": sdk_over,
            "sdk_over_ours_median": ratio(sdk_entry, t.get("ours"), "median"),
        }
        sdk_cell = fmt_s(sdk_entry) + (f" ({sdk_entry['runs']}r)" if sdk_entry else "")
        if t.get("sdk_error"):
            sdk_cell = "raised"
        print(
            f"{info['label']:<25}{info['frames']:>8,}{info['input_bytes'] / 1e6:>9.2f}"
            f"{fmt_s(t.get('floor')):>13}{fmt_s(t.get('ours')):>14}{fmt_s(t.get('to_dict')):>13}"
            f"{sdk_cell:>20}{fmt_x(over_floor):>11}{fmt_x(sdk_over):>9}"
            f"{info['peak_bytes'] / 1e6:>9.1f}"
        )
    print()
    for key, info in streams.items():
        t = info["times"]
        if t.get("sdk_error"):
            print(f"SDK on {key}: raised {t['sdk_error']}")
        elif t.get("sdk_check") not in (None, "ok"):
            print(f"SDK on {key}: {t['sdk_check']}")
    for key, info in streams.items():
        t = info["times"]
        if t.get("ours_gc"):
            in_gc, total = t["ours_gc"]["median"], t["ours"]["median"]
            rest = t["ours_without_gc"]
            print(
                f"ours on {key}: cyclic GC {in_gc:.3f}s of the median {total:.3f}s "
                f"({in_gc / total:.0%}); the rest {rest['best']:.3f}/{rest['median']:.3f}s, "
                f"{rest['best'] / t['floor']['best']:.2f}x the floor"
            )
    for key, info in streams.items():
        t = info["times"]
        if t.get("base"):
            print(
                f"base on {key}: {fmt_s(t['base'])}s, "
                f"{fmt_x(ratio(t['base'], t['floor'], 'best'))} the floor; "
                f"ours/base {ratio(t['ours'], t['base'], 'best'):.3f} "
                f"(median {ratio(t['ours'], t['base'], 'median'):.3f})"
            )
    for key, info in streams.items():
        print(
            f"peak memory {key}: {info['peak_bytes'] / 1e6:.1f} MB for "
            f"{info['input_bytes'] / 1e6:.1f} MB input "
            f"({info['peak_bytes'] / info['input_bytes']:.1f}x input)"
        )
    print()
    print("targets (on best times):")
    for key in streams:
        s = summary[key]
        print(
            f"  {key}: ours/floor {fmt_x(s['ours_over_floor'])} (<= 2x: "
            f"{verdict(s['ours_over_floor'], TARGETS['ours_over_floor_max'], True)}); "
            f"SDK/ours {fmt_x(s['sdk_over_ours'])} (>= 10x: "
            f"{verdict(s['sdk_over_ours'], TARGETS['sdk_over_ours_min'], False)})"
        )
    scaling: dict[str, Any] = {}
    for base in ("a", "b"):
        one, four = streams.get(base + "1"), streams.get(base + "4")
        if not one or not four:
            continue
        value = ratio(four["times"]["ours"], one["times"]["ours"], "best")
        median = ratio(four["times"]["ours"], one["times"]["ours"], "median")
        scaling[base] = {"best": value, "median": median}
        print(
            f"  ({base}) scaling, ours 4x-input / 1x-input: {fmt_x(value)} "
            f"(median {fmt_x(median)}) (<= 4.4x: "
            f"{verdict(value, TARGETS['scaling_4x_max'], True)})"
        )
    return {"ratios": summary, "scaling": scaling}


# -- profiling -----------------------------------------------------------------


def profile(key: str, top: int) -> None:
    """cProfile of one assemble() run with the cyclic GC off (with it on, its
    collections are billed to whichever function happened to allocate), and
    the GC's own share measured in an unprofiled run."""
    label, make = STREAMS[key]
    data, expected = make()
    check_ours(assemble(data, fmt="sse"), expected, data.count(b"\n\n"))
    seconds, in_gc, result = timed(ours, data)
    del result
    print(
        f"== assemble() on {key} {label}: {seconds:.3f}s unprofiled, of which "
        f"{in_gc:.3f}s in the cyclic GC (collections by generation {GC_CLOCK.collections}) =="
    )
    gc.collect()
    gc.disable()
    profiler = cProfile.Profile()
    try:
        profiler.enable()
        result = assemble(data, fmt="sse")
        profiler.disable()
    finally:
        gc.enable()
    del result
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order).print_stats(top)
        print(f"== cProfile of assemble() on {key}, GC off, by {order} ==")
        print(out.getvalue())


# -- main ----------------------------------------------------------------------


# -- other dialects: the same work in each wire format ------------------------------------


def _sse_block(event: str | None, payload: dict[str, Any]) -> bytes:
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def _dialect_calls(frames: int, calls: int, seed: int) -> tuple[list[tuple], list[list[str]]]:
    """`calls` calls whose argument texts, cut in about `frames` pieces in all,
    are what every dialect's stream carries."""
    rng = random.Random(seed)
    counts = [frames // calls + (k < frames % calls) for k in range(calls)]
    expected, pieces = [], []
    for k in range(calls):
        text = _call_arguments(rng, k, min_chars=int(counts[k] * 4.2))
        expected.append((f"call_{k}", TOOL_NAMES[k % len(TOOL_NAMES)], text))
        pieces.append(_cut(text, counts[k], rng))
    return expected, pieces


def _interleaved(pieces: list[list[str]], seed: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    order = [k for k, texts in enumerate(pieces) for _ in texts]
    rng.shuffle(order)
    iters = [iter(texts) for texts in pieces]
    return [(k, next(iters[k])) for k in order]


def responses_stream(frames: int, calls: int = 8, seed: int = 3) -> tuple[bytes, list[tuple]]:
    """An OpenAI Responses stream: 8 function_call items whose argument deltas
    interleave by output_index, each with its event line and sequence_number."""
    expected, pieces = _dialect_calls(frames - 3 * calls - 2, calls, seed)
    out, seq = [], iter(range(10**9))
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    out.append(
        _sse_block(
            "response.created",
            {"type": "response.created", "sequence_number": next(seq), "response": response},
        )
    )
    items = [
        {
            "id": f"fc_{k}",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        for k, (call_id, name, _) in enumerate(expected)
    ]
    for k, item in enumerate(items):
        out.append(
            _sse_block(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": k,
                    "item": item,
                },
            )
        )
    kind = "response.function_call_arguments.delta"
    for k, text in _interleaved(pieces, seed):
        out.append(
            _sse_block(
                kind,
                {
                    "type": kind,
                    "sequence_number": next(seq),
                    "item_id": f"fc_{k}",
                    "output_index": k,
                    "delta": text,
                },
            )
        )
    done_items = []
    for k, (_, _, text) in enumerate(expected):
        kind = "response.function_call_arguments.done"
        out.append(
            _sse_block(
                kind,
                {
                    "type": kind,
                    "sequence_number": next(seq),
                    "item_id": f"fc_{k}",
                    "output_index": k,
                    "arguments": text,
                },
            )
        )
        done_items.append({**items[k], "status": "completed", "arguments": text})
        out.append(
            _sse_block(
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": k,
                    "item": done_items[k],
                },
            )
        )
    usage = {"input_tokens": 100, "output_tokens": frames, "total_tokens": 100 + frames}
    final = {**response, "status": "completed", "output": done_items, "usage": usage}
    out.append(
        _sse_block(
            "response.completed",
            {"type": "response.completed", "sequence_number": next(seq), "response": final},
        )
    )
    return b"".join(out), expected


def messages_stream(frames: int, calls: int = 8, seed: int = 4) -> tuple[bytes, list[tuple]]:
    """An Anthropic Messages stream: 8 tool_use blocks whose input_json_delta
    pieces interleave by block index."""
    expected, pieces = _dialect_calls(frames - 2 * calls - 3, calls, seed)
    usage = {"input_tokens": 100, "output_tokens": 1}
    out = [
        _sse_block(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "stop_reason": None,
                    "usage": usage,
                },
            },
        )
    ]
    for k, (call_id, name, _) in enumerate(expected):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        out.append(
            _sse_block(
                "content_block_start",
                {"type": "content_block_start", "index": k, "content_block": block},
            )
        )
    for k, text in _interleaved(pieces, seed):
        delta = {"type": "input_json_delta", "partial_json": text}
        out.append(
            _sse_block(
                "content_block_delta", {"type": "content_block_delta", "index": k, "delta": delta}
            )
        )
    for k in range(calls):
        out.append(_sse_block("content_block_stop", {"type": "content_block_stop", "index": k}))
    out.append(
        _sse_block(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": frames},
            },
        )
    )
    out.append(_sse_block("message_stop", {"type": "message_stop"}))
    return b"".join(out), expected


def _gemini_frames(frames: int, calls: int, seed: int) -> tuple[list[dict], list[tuple]]:
    """Vertex streamed arguments: each call opens with willContinue, its one
    string argument `text` streams as partialArgs pieces, {} closes it; calls
    follow each other (a candidate streams one call at a time)."""
    expected, pieces = _dialect_calls(frames - 3 * calls, calls, seed)
    out: list[dict] = []

    def part(function: dict[str, Any], finish: str | None = None) -> dict:
        candidate: dict[str, Any] = {
            "content": {"role": "model", "parts": [{"functionCall": function}]}
        }
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "modelVersion": "gemini-2.5-pro"}

    for k, (_, name, _) in enumerate(expected):
        out.append(part({"name": name, "willContinue": True}))
        for text in pieces[k]:
            piece = {"jsonPath": "$.text", "stringValue": text, "willContinue": True}
            out.append(part({"partialArgs": [piece], "willContinue": True}))
        out.append(
            part({"partialArgs": [{"jsonPath": "$.text", "stringValue": ""}], "willContinue": True})
        )
        out.append(part({}, "STOP" if k == calls - 1 else None))
    out[-1]["usageMetadata"] = {"promptTokenCount": 100, "totalTokenCount": 100 + frames}
    gemini_expected = [(None, name, compact_text(text)) for _, name, text in expected]
    return out, gemini_expected


def compact_text(text: str) -> str:
    return orjson.dumps({"text": text}).decode()


def gemini_stream(frames: int, calls: int = 8, seed: int = 5) -> tuple[bytes, list[tuple]]:
    payloads, expected = _gemini_frames(frames, calls, seed)
    return b"".join(_sse_block(None, p) for p in payloads), expected


def gemini_array_stream(frames: int, calls: int = 8, seed: int = 5) -> tuple[bytes, list[tuple]]:
    payloads, expected = _gemini_frames(frames, calls, seed)
    return b"[" + b",\r\n".join(orjson.dumps(p) for p in payloads) + b"]", expected


DIALECT_STREAMS: dict[str, tuple[str, str, Callable[[int], tuple[bytes, list[tuple]]]]] = {
    "chat": ("sse", "chat", lambda n: parallel_stream(n)),
    "responses": ("sse", "responses", responses_stream),
    "messages": ("sse", "messages", messages_stream),
    "gemini": ("sse", "gemini", gemini_stream),
    "gemini-array": ("json-array", "gemini", gemini_array_stream),
}


def check_dialect(result: Any, expected: list[tuple]) -> None:
    assert result.outcome == "ok", result.refusal and result.refusal.message
    got = [
        (c.id if e[0] else None, c.name, c.arguments_text)
        for c, e in zip(result.calls, expected, strict=True)
    ]
    assert got == expected, "the assembler did not rebuild the generated calls"


def timed_cpu(fn: Callable[[bytes], Any], data: bytes) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call, the GC on.  CPU time
    leaves out the time other processes held the cores, which on a shared
    machine moves the wall time a lot more than the work."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    fn(data)
    return time.perf_counter() - wall, time.process_time() - cpu


def dialects_round(args: Any) -> None:
    """Each dialect's 100k- and 400k-frame streams, timed in rotated order:
    cost per frame over chat's (target <= 1.5x), and 4x scaling (<= 4.4x),
    on wall time and on CPU time.  With `--base`, the base tree's assembler
    runs in the same rounds, each stream right after or before ours."""
    sizes = {"1x": 100_000, "4x": 400_000}
    keys = list(DIALECT_STREAMS)
    trees: dict[str, Callable[..., Any]] = {"ours": assemble}
    if BASE is not None:
        trees["base"] = BASE.assemble
    best: dict[str, dict[str, dict[str, dict[str, float]]]] = {
        tree: {clock: {key: {} for key in keys} for clock in ("wall", "cpu")} for tree in trees
    }
    frames_of: dict[str, dict[str, int]] = {key: {} for key in keys}
    load_before = os.getloadavg()
    for size, count in sizes.items():
        inputs = {}
        for key in keys:
            fmt, dialect, make = DIALECT_STREAMS[key]
            data, expected = make(count)
            result = assemble(data, fmt=fmt, dialect=dialect)
            check_dialect(result, expected)
            if BASE is not None:
                check_dialect(BASE.assemble(data, fmt=fmt, dialect=dialect), expected)
            frames_of[key][size] = result.frames
            inputs[key] = (fmt, dialect, data)
            print(f"{key} {size}: {result.frames:,} frames, {len(data):,} bytes", file=sys.stderr)
        names = list(trees)
        for round_ in range(args.reps):
            shift = round_ % len(keys)
            for key in keys[shift:] + keys[:shift]:
                fmt, dialect, data = inputs[key]
                for tree in names[round_ % len(names) :] + names[: round_ % len(names)]:
                    times = timed_cpu(partial(trees[tree], fmt=fmt, dialect=dialect), data)
                    for clock, seconds in zip(("wall", "cpu"), times, strict=True):
                        kept = best[tree][clock][key]
                        kept[size] = min(kept.get(size, seconds), seconds)
        del inputs
        gc.collect()
    load = ", ".join(f"{a:.1f}-{b:.1f}" for a, b in zip(load_before, os.getloadavg(), strict=True))
    print(f"\ndialects: best of {args.reps} rounds, rotated order; per-frame cost over chat's")
    print(f"load average (1, 5, 15 min) before-after: {load}; {os.cpu_count()} CPUs")
    for tree in trees:
        for clock in ("wall", "cpu"):
            label = clock if BASE is None else f"{tree} {clock}"
            _dialects_table(label, best[tree][clock], frames_of, keys)
    if BASE is not None:
        print("\nours/base, best CPU time:")
        for key in keys:
            mine, theirs = best["ours"]["cpu"][key], best["base"]["cpu"][key]
            print(f"  {key:14}" + "  ".join(f"{z} {mine[z] / theirs[z]:.3f}" for z in sizes))


def _dialects_table(
    clock: str, best: dict[str, dict[str, float]], frames_of: dict[str, dict[str, int]], keys: list
) -> None:
    print(
        f"\n{clock + ' time':19} {'frames 1x':>10} {'s 1x':>8} {'us/frame':>9} {'vs chat':>8}"
        f" {'s 4x':>8} {'4x/1x':>7}"
    )
    chat_per_frame = best["chat"]["1x"] / frames_of["chat"]["1x"]
    for key in keys:
        per_frame = best[key]["1x"] / frames_of[key]["1x"]
        ratio = per_frame / chat_per_frame
        scaling = best[key]["4x"] / best[key]["1x"]
        print(
            f"{key:19} {frames_of[key]['1x']:>10,} {best[key]['1x']:>8.3f} {per_frame * 1e6:>9.2f}"
            f" {ratio:>7.2f}x {best[key]['4x']:>8.3f} {scaling:>6.2f}x"
            f"  ({verdict(ratio, 1.5, True)} <= 1.5x; scaling {verdict(scaling, 4.4, True)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="rounds per stream (default 5)")
    parser.add_argument(
        "--sdk-budget",
        type=float,
        default=60.0,
        help="seconds of SDK time per stream; fewer SDK runs when one run is slow",
    )
    parser.add_argument("--no-sdk", dest="sdk", action="store_false", help="skip the SDK")
    parser.add_argument(
        "--streams", default="a1,b1,a4,b4", help="comma-separated subset of a1,b1,a4,b4"
    )
    parser.add_argument("--profile", choices=sorted(STREAMS), help="cProfile one stream, exit")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="time with the process's CPU time, not wall time (on a shared machine)",
    )
    parser.add_argument(
        "--base",
        type=Path,
        help="a tree (a git worktree or export) whose assembler is timed in the same rounds",
    )
    parser.add_argument("--top", type=int, default=25, help="rows of the profile")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    parser.add_argument(
        "--dialects",
        action="store_true",
        help="time chat, Responses, Messages, Gemini (SSE and JSON array) 100k/400k-frame streams",
    )
    args = parser.parse_args()
    if args.cpu:
        CLOCK[0] = time.process_time
    if args.base is not None:
        global BASE
        BASE = load_base(args.base)
    if args.dialects:
        dialects_round(args)
        return
    if args.profile:
        profile(args.profile, args.top)
        return
    if SDK_MISSING is not None:
        args.sdk = False
        print(f"OpenAI SDK not importable, skipping it ({SDK_MISSING})", file=sys.stderr)

    env = machine()
    started = time.perf_counter()
    streams: dict[str, dict] = {}
    for key in args.streams.split(","):
        label, make = STREAMS[key]
        data, expected = make()
        frames = data.count(b"\n\n")
        print(f"{key}: {label}, {frames:,} frames, {len(data):,} bytes", file=sys.stderr)
        streams[key] = {
            "label": label,
            "frames": frames,
            "input_bytes": len(data),
            "calls": len(expected),
            "argument_chars": [len(text) for _, _, text in expected],
            "times": measure(key, data, expected, frames, args),
        }
        # Peak memory in its own run: tracemalloc slows everything it watches.
        streams[key]["peak_bytes"] = peak_memory(data)
        del data, expected
        gc.collect()

    figures = report(streams, env, args)
    elapsed = time.perf_counter() - started
    print(f"\ntotal benchmark time {elapsed:.0f}s")
    document = {
        "benchmark": "bench/assemble.py",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": env,
        "rounds": args.reps,
        "clock": "cpu" if args.cpu else "wall",
        "sdk_budget_seconds": args.sdk_budget,
        "targets": TARGETS,
        "streams": streams,
        **figures,
        "elapsed_seconds": elapsed,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"figures written to {args.out}")


if __name__ == "__main__":
    main()
