"""Imported by the lens fork server (`runner.PRELOAD`): runs every lens once
on a tiny stream of each dialect it reads, so the SDKs are imported and the
classes they build on first use are built in the server, not again in every
forked child.

That is where the import cost goes (measured with `/usr/bin/time python -c
"import inspector.lenses.warm"`, CPU seconds since the machine was busy):
about 4.4 s and 170 MB with the three SDKs alone, 9.9 s and 470 MB with
LiteLLM (4.5 s, 200 MB by itself) and LangChain's partner packages added.  A
forked child shares those pages and starts in milliseconds.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

from . import LENSES, read_frames_and_result, run_lens

TINY_STREAMS = {
    "chat": (
        b'data: {"object":"chat.completion.chunk","id":"w","created":1,"model":"m","choices":'
        b'[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function",'
        b'"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\n'
        b"data: [DONE]\n\n"
    ),
    "responses": (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
        b'"response":{"id":"r","object":"response","created_at":1,"model":"m","output":[],'
        b'"status":"in_progress"}}\n\n'
        b'event: response.completed\ndata: {"type":"response.completed","sequence_number":1,'
        b'"response":{"id":"r","object":"response","created_at":1,"model":"m","output":[],'
        b'"status":"completed"}}\n\n'
    ),
    "messages": (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":'
        b'"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
        b'"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
        b'"end_turn"},"usage":{"output_tokens":1}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    ),
    "gemini": (
        b'data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":'
        b'{"name":"f","args":{}}}]},"finishReason":"STOP"}]}\n\n'
    ),
}


def warm() -> None:
    for dialect, stream in TINY_STREAMS.items():
        frames, _ = read_frames_and_result(stream, "sse")
        for name, lens in LENSES.items():
            if dialect in lens.dialects and lens.warms:
                run_lens(name, frames, dialect=dialect)


warm()
