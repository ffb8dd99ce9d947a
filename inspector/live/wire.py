"""The wire formats the proxy and guard speak, one per dialect.

A client changes only its base URL, so everything the inspector itself says
to it (a refused path, an unreachable upstream, a guard that accepted no
attempt, the in-band notice of a stream the upstream cut) must be in the
error shape of the client's own API, or its SDK shows a parse failure
instead of the message:

* OpenAI (chat completions, Responses): `{"error": {"message", "type", "code"}}`;
* Anthropic Messages: `{"type": "error", "error": {"type", "message"}}`;
* Google Gemini: `{"error": {"code", "message", "status"}}`.

Extra fields (the guard's attempts, the upstream's name) ride inside the
`error` object in every shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import orjson
from django.http import JsonResponse

from inspector.assembly.dialect import CHAT, GEMINI, MESSAGES, RESPONSES

OPENAI, ANTHROPIC, GOOGLE = "openai", "anthropic", "google"

# Google's canonical status names by HTTP status (google.rpc.Code).
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# Anthropic's error types by HTTP status.
ANTHROPIC_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Wire:
    """One client API: its dialect, what its requests are called, its error shape."""

    dialect: str
    what: str  # "chat completions": used in messages to people
    style: str  # OPENAI, ANTHROPIC or GOOGLE

    def error_body(self, message: str, kind: str, status: int, **extra: Any) -> dict[str, Any]:
        """An error in this API's shape; `kind` is the inspector's own code."""
        if self.style == ANTHROPIC:
            error_type = ANTHROPIC_TYPE.get(status, "api_error")
            return {
                "type": "error",
                "error": {"type": error_type, "message": message, "code": kind, **extra},
            }
        if self.style == GOOGLE:
            state = GOOGLE_STATUS.get(status, "UNKNOWN")
            return {
                "error": {
                    "code": status,
                    "message": message,
                    "status": state,
                    "reason": kind,
                    **extra,
                }
            }
        return {"error": {"message": message, "type": kind, "code": kind, **extra}}

    def error_response(self, message: str, kind: str, status: int, **extra: Any) -> JsonResponse:
        return JsonResponse(
            self.error_body(message, kind, status, **extra),
            status=status,
            json_dumps_params={"ensure_ascii": False},
        )

    def method_not_allowed(self) -> JsonResponse:
        response = self.error_response(f"use POST for {self.what}", "method_not_allowed", 405)
        response["Allow"] = "POST"
        return response

    def drop_notice(self, stream_format: str, error: Exception) -> bytes:
        """The in-band error a client gets after a relayed stream the upstream
        cut, as an event its SDK raises (every SDK raises on an error frame)."""
        message = (
            f"the upstream dropped the connection mid-stream ({type(error).__name__}); "
            "the inspector relayed every byte it received"
        )
        payload = orjson.dumps(self.error_body(message, "upstream_disconnected", 502))
        if stream_format == "sse":
            event = b"event: error\n" if self.style == ANTHROPIC else b""
            return b"\n\n" + event + b"data: " + payload + b"\n\n"
        if stream_format == "json-array":
            return b",\r\n" + payload + b"]"
        return b"\n" + payload + b"\n"


CHAT_WIRE = Wire(CHAT, "chat completions", OPENAI)
RESPONSES_WIRE = Wire(RESPONSES, "responses", OPENAI)
MESSAGES_WIRE = Wire(MESSAGES, "messages", ANTHROPIC)
GEMINI_WIRE = Wire(GEMINI, "generateContent", GOOGLE)


def reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
