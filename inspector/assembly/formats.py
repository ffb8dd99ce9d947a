"""Telling the input's format: by file name first, else by its first bytes."""

from __future__ import annotations

import re

from .errors import UnreadableInput

SSE, JSONL, HAR, AUTO = "sse", "jsonl", "har", "auto"
FORMATS = (SSE, JSONL, HAR)

_BY_EXTENSION = {
    ".sse": SSE,
    ".txt": SSE,
    ".eventstream": SSE,
    ".jsonl": JSONL,
    ".ndjson": JSONL,
    ".har": HAR,
}
_SSE_START = re.compile(rb"(data|event|id|retry)(:|\r|\n|$)|:")
_HAR_START = re.compile(rb'\{\s*"log"\s*:')
SNIFF_BYTES = 4096


def detect_format(name: str | None, head: bytes) -> str:
    """The format of an input called `name` (may be None) starting with `head`.

    Raises UnreadableInput when neither tells.
    """
    if name:
        lowered = name.lower()
        for extension, fmt in _BY_EXTENSION.items():
            if lowered.endswith(extension):
                return fmt
    text = head[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf").lstrip()
    if not text:
        return SSE  # an empty stream reads the same in every format: 0 frames
    if _SSE_START.match(text):
        return SSE
    if _HAR_START.match(text):
        return HAR
    if text[:1] == b"{":
        return JSONL
    if text.startswith((b"[DONE]", b'"[DONE]"')):
        return JSONL
    raise UnreadableInput(
        "can't tell the format from the first bytes; pass --format sse, jsonl or har"
    )
