"""Shared by the live-capture tests (imported by module name: tests/live is on sys.path)."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable

import orjson

CANARY = "sk-canary-SECRET123"


SECRET_MARK = "SECRET123"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather forecast for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer"},
                },
                "required": ["city"],
            },
        },
    }
]


def chat_chunk(
    delta: dict, finish: str | None = None, *, chunk_id: str = "c1", model: str = "m"
) -> bytes:
    """One chat completions SSE block whose one choice carries `delta`."""
    body = {"id": chunk_id, "model": model, "choices": [{"index": 0, "delta": delta}]}
    body["choices"][0]["finish_reason"] = finish
    return b"data: " + orjson.dumps(body) + b"\n\n"


def text_stream(words: int) -> str:
    base = {"id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 1718000000}
    base["model"] = "gpt-4o-mini"

    def frame(delta: dict, finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return "data: " + json.dumps({**base, "choices": [choice]}) + "\n\n"

    body = frame({"role": "assistant", "content": ""})
    body += "".join(frame({"content": f"word{i} "}) for i in range(words))
    return body + frame({}, "stop") + "data: [DONE]\n\n"


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition"):
    """Poll until `predicate()` is truthy; its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def ws_url(base: str, path: str) -> str:
    return base.replace("http://", "ws://", 1) + path


class Viewer(threading.Thread):
    """Reads one websocket in a thread until `until(message)` or a timeout;
    constructed once the socket is open."""

    def __init__(self, url: str, until) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.until = until
        self.messages: list[dict] = []
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.start()
        assert self.ready.wait(15), f"no connection to {url}"
        assert self.error is None, self.error

    def run(self) -> None:
        try:
            from websockets.sync.client import connect  # a dev dependency

            with connect(self.url, open_timeout=10) as socket:
                self.ready.set()
                while True:
                    message = json.loads(socket.recv(timeout=20))
                    self.messages.append(message)
                    if self.until(message):
                        return
        except BaseException as error:  # reported by the test
            self.error = error
            self.ready.set()


class SdkStream(threading.Thread):
    """The real OpenAI SDK streaming one completion through the proxy at
    `base`; `slugs` gets the capture's slug from the response headers as soon
    as they arrive ("" if the request failed: `error` says why)."""

    def __init__(
        self, base: str, model: str, messages: list, *, tools: list | None = None, timeout=30
    ) -> None:
        from openai import OpenAI

        super().__init__(daemon=True)
        self.client = OpenAI(
            api_key=CANARY, base_url=f"{base}/proxy/fake/v1", max_retries=0, timeout=timeout
        )
        self.request = {"model": model, "messages": messages, "stream": True}
        if tools is not None:
            self.request["tools"] = tools
        self.slugs: queue.Queue[str] = queue.Queue()
        self.chunks: list = []
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with self.client.chat.completions.with_streaming_response.create(
                **self.request
            ) as response:
                self.slugs.put(response.headers["x-inspector-capture"])
                self.chunks.extend(response.parse())
        except BaseException as error:  # reported by the test
            self.error = error
            self.slugs.put("")


def stored(capture) -> dict:
    """What a capture's pages read: its frames, its calls, its verdicts."""
    strict = capture.assemblies.get(policy="strict")
    return {
        "frames": list(
            capture.frames.order_by("number").values_list("number", "kind", "raw", "calls", "marks")
        ),
        "calls": list(strict.calls.order_by("position").values_list("name", "arguments_text")),
        "result": (capture.outcome, capture.refusal_code, capture.lenient_outcome),
        "frame_count": capture.frame_count,
        "raw": bytes(capture.raw),
    }
