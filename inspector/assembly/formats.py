"""Telling the input's format: by its content first, else by its file name.

Content decides when it can (an SSE field line, a HAR document, a JSON
array, JSON Lines); the extension only when the first bytes do not tell, so
JSON Lines recordings named `*.chunks.txt` read as JSON Lines.
"""

from __future__ import annotations

import re

import orjson

from .errors import UnreadableInput

SSE, JSONL, HAR, JSON_ARRAY, AUTO = "sse", "jsonl", "har", "json-array", "auto"
FORMATS = (SSE, JSONL, HAR, JSON_ARRAY)
STREAM_FORMATS = (SSE, JSONL, JSON_ARRAY)  # what a stream's bytes are read as

_BY_EXTENSION = {
    ".sse": SSE,
    ".txt": SSE,
    ".eventstream": SSE,
    ".jsonl": JSONL,
    ".ndjson": JSONL,
    ".har": HAR,
    ".json": JSON_ARRAY,
}
_SSE_START = re.compile(rb"(data|event|id|retry)(:|\r|\n|$)|:")
_HAR_START = re.compile(rb'\{\s*"log"\s*:')
SNIFF_BYTES = 4096


def by_content(data: bytes) -> str | None:
    """The format the first bytes of `data` show, or None.

    `[` not followed by `DONE]` is a JSON array; a `{` that opens one JSON
    object spanning several lines (a pretty-printed whole body) is read as a
    one-element JSON array, any other `{` as JSON Lines.
    """
    text = data[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf").lstrip()
    if not text:
        return None
    if _SSE_START.match(text):
        return SSE
    if _HAR_START.match(text):
        return HAR
    if text.startswith((b"[DONE]", b'"[DONE]"')):
        return JSONL
    if text[:1] == b"[":
        return JSON_ARRAY
    if text[:1] == b"{":
        return JSON_ARRAY if _one_multiline_object(data) else JSONL
    return None


def _one_multiline_object(data: bytes) -> bool:
    body = data.lstrip(b"\xef\xbb\xbf").strip()
    if b"\n" not in body and b"\r" not in body:
        return False
    try:
        return type(orjson.loads(body)) is dict
    except orjson.JSONDecodeError:
        return False


def by_extension(name: str | None) -> str | None:
    if name:
        lowered = name.lower()
        for extension, fmt in _BY_EXTENSION.items():
            if lowered.endswith(extension):
                return fmt
    return None


def detect_format(name: str | None, head: bytes) -> str:
    """The format of an input called `name` (may be None) starting with
    `head` (the whole input when a whole body should be recognised).

    Raises UnreadableInput when neither tells.
    """
    content, named = by_content(head), by_extension(name)
    if named == HAR and content in (JSONL, JSON_ARRAY):
        # A `{` or `[` in a file named .har is a HAR, broken or not: reading it
        # as JSON Lines would turn a damaged HAR into a stream of invalid frames.
        return HAR
    fmt = content or named
    if fmt is not None:
        return fmt
    if not head.lstrip(b"\xef\xbb\xbf").strip():
        return SSE  # an empty stream reads the same in every format: 0 frames
    raise UnreadableInput(
        "can't tell the format from the first bytes: choose it (sse, jsonl, json-array or har)"
    )
