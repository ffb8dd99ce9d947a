"""A call's identity and kind in its dialect's own words:
Responses items have an output_index, an item id and a call_id; Anthropic
blocks an index and a tool_use id; Gemini parts a position in their
candidate and, sometimes, an id."""

from __future__ import annotations

from typing import Any

# What each kind of call is, for a chip on its card (function: nothing to say).
KIND_LABELS = {
    "custom": ("custom tool", "free-text input, never parsed as JSON"),
    "builtin": ("built-in tool", "run by the client: its arguments are the item's action"),
    "server": ("server tool", "run by the provider: the client does not answer it"),
}

DIALECT_WORDS = {
    "chat": "OpenAI chat completions",
    "responses": "OpenAI Responses",
    "messages": "Anthropic Messages",
    "gemini": "Google Gemini",
}


# What a call's place in its stream is called, by dialect (the state panel's label).
POSITION_TERMS = {
    "chat": "index",
    "responses": "output_index",
    "messages": "content block",
    "gemini": "functionCall part",
}


def identity_terms(call: Any, dialect: str) -> list[tuple[str, Any]]:
    """(term, value) pairs that place a call in its stream, in the dialect's
    terms; a value of None shows as "none"."""
    if dialect == "responses":
        return [
            ("output_index", call.index),
            ("item id", call.item_id or None),
            ("call_id", call.call_id or None),
        ]
    if dialect == "messages":
        block = call.block if call.block is not None else call.index
        id_term = "tool_use id" if call.kind == "function" else f"{call.kind}_tool_use id"
        return [("content block", block), (id_term, call.call_id or None)]
    if dialect == "gemini":
        return [
            ("functionCall part", f"{call.index} of candidate {call.choice}"),
            ("id", call.call_id or None),
        ]
    return [("index", call.index)]


def kind_label(kind: str) -> tuple[str, str] | None:
    """(label, what it means) for a call that is not a plain function call."""
    return KIND_LABELS.get(kind)


def dialect_note(dialect: str, basis: str) -> str:
    """Which dialect the stream was read in, and why, in one sentence."""
    words = f"{DIALECT_WORDS.get(dialect, dialect)} ({dialect})"
    if basis == "chosen":
        return f"Read as {words}: chosen when it was stored."
    if basis == "url":
        return f"Read as {words}: the recorded request URL names it."
    if basis == "frames":
        return f"Read as {words}, told by its frames."
    if basis == "assumed":
        return (
            f"Read as {words} by assumption: no frame is a JSON object of a known dialect "
            "(no choices, no response.* or Anthropic event type, no Gemini candidates), "
            "so it was read as chat completions, as the inspector always did."
        )
    return f"Read as {words}."


# What each kind of item a frame's row shows (`frame_did.py`) is called on
# each dialect's wire: the frames table speaks the stream's own words.
FRAME_TERMS: dict[str, dict[str, str]] = {
    "chat": {
        "start": "tool_calls[] started",
        "id": "id",
        "name": "function.name",
        "args": "function.arguments",
        "settled": "settled",
        "text": "content",
        "reasoning": "reasoning_content",
        "finish": "finish_reason",
        "usage": "usage",
        "done": "[DONE]",
    },
    "responses": {
        "start": "output_item.added",
        "id": "call_id",
        "name": "name",
        "args": "function_call_arguments.delta",
        "settled": "settled",
        "text": "output_text.delta",
        "reasoning": "reasoning delta",
        "finish": "status",
        "usage": "response.usage",
        "done": "response.completed",
    },
    "messages": {
        "start": "content_block_start",
        "id": "tool_use id",
        "name": "name",
        "args": "input_json_delta",
        "settled": "settled",
        "text": "text_delta",
        "reasoning": "thinking_delta",
        "finish": "stop_reason",
        "usage": "usage",
        "done": "message_stop",
    },
    "gemini": {
        "start": "functionCall",
        "id": "id",
        "name": "name",
        "args": "args",
        "settled": "settled",
        "text": "text",
        "reasoning": "thought",
        "finish": "finishReason",
        "usage": "usageMetadata",
        "done": "end of stream",
    },
}


def frame_term(dialect: str, kind: str) -> str:
    """A frame item's kind in the dialect's words (chat's for an unknown dialect)."""
    return FRAME_TERMS.get(dialect, FRAME_TERMS["chat"]).get(kind, kind)
