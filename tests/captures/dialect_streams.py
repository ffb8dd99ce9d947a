"""Small streams of every dialect for the capture tests (imported by module
name: tests/captures is on sys.path).  The demo captures are the larger
ones (`inspector/captures/demo/<dialect>_*.sse`)."""

from __future__ import annotations

from pathlib import Path

from capture_streams import DONE, chunk, sse, tool

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"

CHAT_OK = sse(chunk(tool(0, "call_A", "read", '{"p":1}')), chunk(finish="tool_calls"), DONE)


def demo(name: str) -> bytes:
    return (DEMO / name).read_bytes()


RESPONSES_OK = demo("responses_parallel_calls_ok.sse")
RESPONSES_QUIRK = demo("responses_final_copy_disagrees.sse")
MESSAGES_OK = demo("messages_parallel_calls_ok.sse")
MESSAGES_QUIRK = demo("messages_delta_after_block_stop.sse")
GEMINI_OK = demo("gemini_parallel_calls_ok.sse")
GEMINI_QUIRK = demo("gemini_malformed_function_call.sse")

# Accepted and refused streams of each dialect: {dialect: (ok, refused)}.
BY_DIALECT = {
    "chat": (CHAT_OK, sse(chunk(tool(0, "call_B", "write", '{"x":')))),
    "responses": (RESPONSES_OK, RESPONSES_QUIRK),
    "messages": (MESSAGES_OK, MESSAGES_QUIRK),
    "gemini": (GEMINI_OK, GEMINI_QUIRK),
}

# JSON objects no dialect claims: read as chat, and the page says it assumed so.
NO_DIALECT = b'data: {"hello": "world"}\n\ndata: {"step": 2}\n\n'
