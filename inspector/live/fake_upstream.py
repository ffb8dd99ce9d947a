"""A fake OpenAI-compatible upstream that replays recorded streams.

    python manage.py fake_upstream --port 9100 --scenarios DIR

`POST /v1/chat/completions`, `/v1/responses`, `/v1/messages` and
`/v1beta/models/<model>:streamGenerateContent` (or `:generateContent`, or
`/v1/models/...`) answer with the scenario named by the request's `model`
(Gemini: the model in the path): `DIR/<model>.sse` or `DIR/<model>.jsonl`, one frame per
write (chunked transfer encoding), at the scenario's pace.  A JSON Lines
file is served re-encoded as SSE `data:` frames, unless its sidecar says
`"serve_as": "jsonl"` (then its lines go out as they are, as
`application/x-ndjson`).  A request with `"stream": false` gets one
`chat.completion` built from the stream.

An optional sidecar `DIR/<model>.json` shapes the replay:

    {"pace_ms": 50,           # pause between frames
     "cut_after_frames": 3,   # send 3 frames and half the 4th, then drop the connection
     "fail_times": 2,         # the first 2 requests fail...
     "fail_status": 500,      # ...with this HTTP status (without it, by a cut
                              #    after `cut_after_frames` frames, default 2)
     "content_type": "text/plain",  # a gateway that streams under another type
     "echo_key": "whole"}     # refuse the key and quote it, as OpenAI's 401 does: "whole"
                              #  answers 401 JSON; "stream" sends it as an SSE error frame
                              #  written in two pieces, cut inside the key

Fail counters are per scenario, per server (`reset()` clears them).  Also
served: `GET /v1/models` (the scenarios) and `GET /health`.

Everything a test needs is on `FakeUpstream`: start it in a thread, read
`url`, inspect `requests` (headers, body, frames sent, how each ended and
when each frame went out).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_SCENARIOS = Path(__file__).resolve().parent / "scenarios"
NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
DEFAULT_FAIL_CUT = 2


@dataclass
class Scenario:
    name: str
    frames: list[bytes]
    content_type: str = "text/event-stream"
    pace_ms: float = 0.0
    cut_after_frames: int | None = None
    fail_times: int = 0
    fail_status: int | None = None
    echo_key: str | None = None
    whole: Any = None  # the non-streamed answer, for dialects other than chat
    raw: bytes = b""

    def array_pieces(self) -> list[bytes]:
        """The frames' data as one JSON array, a piece per element (Gemini
        without `?alt=sse`): `[` + first, `,\\r\\n` + each next, `]` last."""
        data = [_block_data(frame) for frame in self.frames]
        pieces = [(b"[" if n == 0 else b",\r\n") + d for n, d in enumerate(data)]
        if pieces:
            pieces[-1] += b"]"
        return pieces or [b"[]"]

    @classmethod
    def load(cls, path: Path) -> Scenario:
        data = path.read_bytes()
        options: dict[str, Any] = {}
        sidecar = path.with_suffix(".json")
        if sidecar.exists():
            options = json.loads(sidecar.read_text())
        content_type = "text/event-stream"
        if path.suffix == ".sse":
            frames = sse_frames(data)
        elif options.get("serve_as") == "jsonl":
            frames = [line + b"\n" for line in data.splitlines() if line.strip()]
            content_type = "application/x-ndjson"
        else:
            frames = [
                b"data: " + line.strip() + b"\n\n" for line in data.splitlines() if line.strip()
            ]
        cut = options.get("cut_after_frames")
        return cls(
            name=path.stem,
            frames=frames,
            content_type=options.get("content_type", content_type),
            pace_ms=float(options.get("pace_ms", 0) or 0),
            cut_after_frames=int(cut) if cut is not None else None,
            fail_times=int(options.get("fail_times", 0) or 0),
            fail_status=int(options["fail_status"]) if options.get("fail_status") else None,
            echo_key=options.get("echo_key"),
            whole=options.get("whole"),
            raw=b"".join(frames),
        )


def _block_data(block: bytes) -> bytes:
    """The data of one SSE block (its `data:` lines joined)."""
    lines = [line for line in block.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(line[5:].removeprefix(b" ") for line in lines)


def sse_frames(data: bytes) -> list[bytes]:
    """An SSE file's blocks, each with its blank line."""
    text = data.replace(b"\r\n", b"\n")
    return [block.strip(b"\n") + b"\n\n" for block in re.split(rb"\n\n+", text) if block.strip()]


# Every route the fake serves: OpenAI chat completions and Responses,
# Anthropic Messages, Gemini's (stream)GenerateContent.
ROUTES = re.compile(
    r"^/(?:v1/(?P<api>chat/completions|responses|messages)"
    r"|(?P<version>v1(?:beta|alpha)?)/models/(?P<model>[^/:]+):"
    r"(?P<verb>streamGenerateContent|generateContent))$"
)


@dataclass(frozen=True)
class Ask:
    """What a request asks for: a stream or a whole answer, and in which form."""

    chat: bool  # OpenAI chat completions (its whole answer is built from the stream)
    stream: bool
    array: bool  # Gemini's stream as one JSON array (no `?alt=sse`)

    @classmethod
    def of(cls, route: re.Match, body: dict[str, Any], query: str) -> Ask:
        verb = route["verb"]
        if verb is None:
            stream = body.get("stream") is True
            return cls(chat=route["api"] == "chat/completions", stream=stream, array=False)
        stream = verb == "streamGenerateContent"
        return cls(chat=False, stream=stream, array=stream and "alt=sse" not in query)


@dataclass
class Served:
    """One request the fake answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    scenario: str | None = None
    status: int = 200
    frames_sent: int = 0
    ended: str = "pending"  # complete, cut, failed, aborted (client went away), error
    started: float = field(default_factory=time.monotonic)
    sent_at: list[float] = field(default_factory=list)  # time.monotonic() per frame


class FakeUpstream:
    """The server.  `with FakeUpstream(dir) as fake: fake.url ...`"""

    def __init__(
        self,
        scenarios: str | Path = DEFAULT_SCENARIOS,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        pace_ms: float | None = None,
    ) -> None:
        self.scenarios_dir = Path(scenarios)
        self.pace_ms = pace_ms  # overrides every scenario's pace when set
        self.requests: list[Served] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True

    # -- life cycle

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        """The base URL an OpenAI client takes (ends in /v1)."""
        return f"http://{self.server.server_address[0]}:{self.port}/v1"

    def start(self) -> FakeUpstream:
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget the requests and the fail counters."""
        with self._lock:
            self._counts.clear()
            self.requests.clear()

    # -- scenarios

    def names(self) -> list[str]:
        return sorted(
            {p.stem for p in self.scenarios_dir.glob("*") if p.suffix in (".sse", ".jsonl")}
        )

    def scenario(self, name: str) -> Scenario | None:
        if not NAME.match(name):
            return None
        for suffix in (".sse", ".jsonl"):
            path = self.scenarios_dir / f"{name}{suffix}"
            if path.is_file():
                return Scenario.load(path)
        return None

    def count(self, name: str) -> int:
        """This request's number (from 1) for the scenario."""
        with self._lock:
            self._counts[name] = self._counts.get(name, 0) + 1
            return self._counts[name]

    def log(self, served: Served) -> None:
        with self._lock:
            self.requests.append(served)

    def served(self, scenario: str | None = None) -> list[Served]:
        with self._lock:
            return [r for r in self.requests if scenario is None or r.scenario == scenario]


def error_json(message: str, kind: str, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


def completion_from(scenario: Scenario) -> dict[str, Any]:
    """A non-streamed `chat.completion` with what the stream assembles to."""
    from inspector.assembly import LENIENT, SSE, assemble

    result = assemble(scenario.raw, fmt=SSE, policy=LENIENT)
    first: dict[str, Any] = {}
    for frame in scenario.frames:
        text = frame.decode("utf-8", "replace")
        if text.startswith("data: {"):
            try:
                first = json.loads(text[6:])
            except ValueError:
                continue
            break
    choices = []
    for choice in result.choices or []:
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text},
            }
            for call in result.calls
            if call.choice == choice.index
        ]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(choice.text) or None}
        if calls:
            message["tool_calls"] = calls
        choices.append(
            {"index": choice.index, "message": message, "finish_reason": choice.finish_reason}
        )
    return {
        "id": first.get("id", "chatcmpl-fake"),
        "object": "chat.completion",
        "created": first.get("created", int(time.time())),
        "model": first.get("model", scenario.name),
        "choices": choices,
        "usage": result.usage,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeUpstream/1"
    fake: FakeUpstream

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    # -- plumbing

    def _send_whole(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        return self.rfile.read(int(length))

    def _served(self, body: Any) -> Served:
        served = Served(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.fake.log(served)
        return served

    # -- routes

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = self.path.split("?")[0]
        if path == "/health":
            self._send_whole(200, b"ok", "text/plain")
        elif path == "/v1/models":
            data = [
                {"id": name, "object": "model", "created": 0, "owned_by": "fake-upstream"}
                for name in self.fake.names()
            ]
            self._send_whole(200, json.dumps({"object": "list", "data": data}).encode())
        else:
            self._send_whole(404, error_json(f"no route {path}", "not_found"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        served = self._served(body)
        path, _, query = self.path.partition("?")
        route = ROUTES.match(path)
        if route is None:
            self._fail(served, 404, error_json(f"no route {path}", "not_found"))
            return
        if not isinstance(body, dict):
            self._fail(served, 400, error_json("the body is not a JSON object", "invalid_request"))
            return
        scenario = self._scenario(served, route["model"] or body.get("model"))
        if scenario is None:
            return
        if scenario.echo_key:
            self._refuse_key(served, scenario.echo_key)
            return
        self._answer(served, scenario, Ask.of(route, body, query))

    def _fail(self, served: Served, status: int, body: bytes) -> None:
        served.status, served.ended = status, "error"
        self._send_whole(status, body)

    def _scenario(self, served: Served, name: Any) -> Scenario | None:
        scenario = self.fake.scenario(name) if isinstance(name, str) else None
        if scenario is None:
            message = f"no scenario {name!r}; have: {', '.join(self.fake.names())}"
            body = error_json(message, "invalid_request_error", "model_not_found")
            self._fail(served, 404, body)
            return None
        served.scenario = scenario.name
        return scenario

    def _answer(self, served: Served, scenario: Scenario, ask: Ask) -> None:
        number = self.fake.count(scenario.name)
        failing = number <= scenario.fail_times
        if failing and scenario.fail_status:
            served.status, served.ended = scenario.fail_status, "failed"
            reason = HTTPStatus(scenario.fail_status).phrase if scenario.fail_status else ""
            message = f"fake failure {number} of {scenario.fail_times} ({reason})"
            self._send_whole(scenario.fail_status, error_json(message, "server_error"))
            return
        cut = scenario.cut_after_frames
        if failing:
            cut = cut if cut is not None else DEFAULT_FAIL_CUT
        elif scenario.fail_times:
            cut = None  # a flaky scenario's later requests succeed
        if not ask.stream:
            self._answer_whole(served, scenario, failing, ask)
        elif ask.array:
            self._stream(served, scenario.array_pieces(), "application/json", scenario, cut)
        else:
            self._stream(served, scenario.frames, scenario.content_type, scenario, cut)

    def _answer_whole(self, served: Served, scenario: Scenario, failing: bool, ask: Ask) -> None:
        if failing:
            served.status, served.ended = 500, "failed"
            self._send_whole(500, error_json("fake failure (not streamed)", "server_error"))
            return
        whole = completion_from(scenario) if ask.chat else scenario.whole
        if whole is None:
            message = f"scenario {scenario.name!r} has no non-streamed answer (sidecar 'whole')"
            self._fail(served, 400, error_json(message, "invalid_request_error"))
            return
        served.ended = "complete"
        self._send_whole(200, json.dumps(whole).encode())

    def _refuse_key(self, served: Served, how: str) -> None:
        """Refuse the request's key, quoting it whole (as OpenAI's 401 does)."""
        auth = self.headers.get("Authorization", "")
        key = auth.partition(" ")[2].strip() or self.headers.get("x-api-key", "")
        message = f"Incorrect API key provided: {key}. You can find your API key in your account."
        body = error_json(message, "invalid_request_error", "invalid_api_key")
        served.status, served.ended = 401, "failed"
        if how != "stream":
            self._send_whole(401, body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        frame = b"data: " + body + b"\n\n"
        middle = frame.index(key.encode()) + len(key) // 2 if key else len(frame) // 2
        for piece in (frame[:middle], frame[middle:]):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            time.sleep(0.02)  # two reads on the proxy's side
        served.status, served.ended = 200, "complete"
        self.wfile.write(b"0\r\n\r\n")

    def _stream(
        self,
        served: Served,
        frames: list[bytes],
        content_type: str,
        scenario: Scenario,
        cut: int | None,
    ) -> None:
        pace = self.fake.pace_ms if self.fake.pace_ms is not None else scenario.pace_ms
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        write = self.wfile.write
        started = time.monotonic()
        try:
            for number, frame in enumerate(frames):
                if number and pace:
                    # Frame n is due at n paces from the first, whatever writing took:
                    # a sleep of `pace` after each write would stretch the pace (1 ms
                    # asked gave 1.3-1.5 ms), and the rate would not be the one asked.
                    delay = started + number * pace / 1000 - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                if cut is not None and number >= cut:
                    half = frame[: max(1, len(frame) // 2)]
                    write(b"%x\r\n%s\r\n" % (len(half), half))
                    served.ended = "cut"
                    self._drop()
                    return
                write(b"%x\r\n%s\r\n" % (len(frame), frame))
                sent = time.monotonic()
                served.sent_at.append(sent)
                if number == 0:  # the schedule counts from the first frame as written
                    started = sent
                served.frames_sent += 1
            if cut is not None:  # cut after the last frame: no terminating chunk
                served.ended = "cut"
                self._drop()
                return
            # Settled before the last chunk: once it is written the client may look.
            served.ended = "complete"
            write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            served.ended = "aborted"
            self.close_connection = True

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
