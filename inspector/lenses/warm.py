"""Imported by the lens fork server (`runner.PRELOAD`): runs every lens once
on a tiny stream, so the classes the OpenAI SDK builds on first use are built
in the server, not again in every forked child.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from . import LENSES, read_frames_and_result, run_lens

TINY_STREAM = (
    b'data: {"object":"chat.completion.chunk","id":"w","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function",'
    b'"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)


def warm() -> None:
    frames, _ = read_frames_and_result(TINY_STREAM, "sse")
    for name in LENSES:
        run_lens(name, frames)


warm()
