"""Shared by the live-capture tests (imported by module name: tests/live is on sys.path)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

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
