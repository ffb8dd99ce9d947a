"""`replay.sse_body`: the stored frames as the SSE bytes an SDK is served."""

from __future__ import annotations

import json

from lens_streams import chunk, frames, tool

from inspector.lenses import replay


def test_a_json_lines_done_string_is_served_as_the_sse_end_marker():
    lines = b"".join(
        json.dumps(item).encode() + b"\n" for item in (chunk(tool(0, "j1", "read", "{}")), "[DONE]")
    )
    stream, _ = frames(lines, "jsonl")
    notes: list[str] = []
    body = replay.sse_body(stream, notes)
    assert body.endswith(b"\n\ndata: [DONE]\n\n")
    assert body.startswith(b'data: {"id": "chatcmpl-lens"')
    assert notes == [replay.REFRAMED]
