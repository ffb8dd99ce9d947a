"""The records the JSON API and the live messages hand out, each defined once.

A record is what a client reads, so its shape is written down here as a
TypedDict and built by one function; the API (`api.py`), the models
(`Capture.summary`, `Assembly.refusal_record`) and the live recorder build
them through these, never by hand.
"""

from __future__ import annotations

from typing import Any, TypedDict


class RefusalRecord(TypedDict):
    """Why the strict policy refused a stream, as the result document writes it."""

    code: str
    message: str
    frame: int | None
    call: int | None  # the call's position in the result's `calls`
    choice: int | None
    retryable: bool | None


class CaptureSummary(TypedDict):
    """A capture's metadata in the API's list and detail answers (never `raw`)."""

    slug: str
    title: str
    source: str
    input_format: str
    stream_format: str
    dialect: str  # chat, responses, messages or gemini
    model: str
    provider: str
    created: str
    byte_size: int
    frame_count: int
    outcome: str
    refusal_code: str
    lenient_outcome: str
    har_upload: str  # shared by the captures of one HAR upload; "" for a lone capture
    har_entry: int | None
    started_at: str | None
    http_status: int | None
    interrupted: bool
    not_stored: list[str]  # personal request fields forwarded but not stored, by name


class StoredRecord(TypedDict):
    """One capture an upload stored, as `POST /api/captures` answers it."""

    slug: str
    url: str
    outcome: str
    refusal: RefusalRecord | None


def refusal_record(refusal: Any) -> RefusalRecord | None:
    """The record of the assembler's refusal (`inspector.assembly` `Refusal`,
    mid-stream or final); None for none.  The live recorder's messages and
    the stored result write the same fields, `choice` included."""
    if refusal is None:
        return None
    return RefusalRecord(
        code=refusal.code,
        message=refusal.message,
        frame=refusal.frame,
        call=refusal.call.position if refusal.call is not None else None,
        choice=refusal.choice,
        retryable=refusal.retryable,
    )
