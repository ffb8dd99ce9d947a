"""HAR files: the `text/event-stream` responses a browser or proxy recorded.

Only the response bodies are taken.  Request headers (Authorization, cookies,
api keys) are never read out of the file, so nothing downstream can store
them by accident.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import UnreadableInput

EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True, slots=True)
class HarStream:
    """One event-stream response of a HAR: its body and what describes it."""

    position: int  # counted among the event-stream entries, from 0
    url: str
    started: str | None  # the entry's startedDateTime
    body: bytes
    status: int | None = None  # the response's HTTP status, when it is one


def _is_event_stream(mime: Any) -> bool:
    if type(mime) is not str:
        return False
    return mime.split(";", 1)[0].strip().lower() == EVENT_STREAM


def _status(response: dict[str, Any]) -> int | None:
    """The response's HTTP status; None for anything else (HAR writes 0 when
    no response arrived, and a file can hold any value)."""
    status = response.get("status")
    if type(status) is int and 100 <= status <= 599:
        return status
    return None


def _body(content: dict[str, Any], where: str) -> bytes:
    text = content.get("text")
    if text is None:
        return b""
    if type(text) is not str:
        raise UnreadableInput(f"{where}: response content text is not a string")
    if str(content.get("encoding", "")).lower() == "base64":
        return _base64_body(text, where)
    return text.encode("utf-8", "surrogatepass")


def _base64_body(text: str, where: str) -> bytes:
    """The decoded body; any character outside the base64 alphabet is refused
    rather than skipped (skipping turned "!!!" into an empty stream).

    Whitespace is removed first: recorders may wrap long base64 text in lines.
    """
    compact = "".join(text.split())
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as error:
        raise UnreadableInput(f"{where}: base64 body does not decode: {error}") from None


def read_har(data: bytes) -> list[HarStream]:
    """Every event-stream response entry, in file order.

    Raises UnreadableInput when the file is not a HAR or holds none.
    """
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise UnreadableInput(f"HAR is not valid JSON: {error}") from None
    log = document.get("log") if type(document) is dict else None
    entries = log.get("entries") if type(log) is dict else None
    if type(entries) is not list:
        raise UnreadableInput("HAR has no log.entries list")
    streams = []
    for number, entry in enumerate(entries):
        response = entry.get("response") if type(entry) is dict else None
        content = response.get("content") if type(response) is dict else None
        if type(content) is not dict or not _is_event_stream(content.get("mimeType")):
            continue
        request = entry.get("request")
        url = request.get("url") if type(request) is dict else None
        started = entry.get("startedDateTime")
        streams.append(
            HarStream(
                position=len(streams),
                url=url if type(url) is str else "",
                started=started if type(started) is str else None,
                body=_body(content, f"HAR entry {number}"),
                status=_status(response),
            )
        )
    if not streams:
        raise UnreadableInput("HAR holds no text/event-stream response")
    return streams
