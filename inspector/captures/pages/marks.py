"""Each mark a frame can carry, in words: anomalies (every dialect's),
dropped-delta reasons and refusal codes.  Shown
next to the marks on the capture page, so a reader needs no spec."""

from __future__ import annotations

MARK_WORDS = {
    # dropped deltas
    "empty_delta": "a delta that carried nothing for any call; dropped",
    "orphan_continuation": "a continuation for no call that is open; dropped",
    # anomalies, every dialect
    "unterminated_frame": "the input ended before this frame's closing blank line",
    "data_after_done": "frames came after the stream's end; they are ignored",
    "index_reused": "a new call took an index (or block, or output_index) another call held",
    "index_changed": "a later delta sent another index for the call (the first is kept)",
    "guessed_continuation": "the lenient policy guessed which call this text continues",
    "arguments_not_string": "arguments came as JSON, not a string; serialised",
    "malformed_entry": "a tool-call entry that is not an object; skipped",
    "missing_done": "no end frame came, but a finish reason did: complete anyway",
    "finish_mismatch": "the finish reason disagrees with the calls made",
    "no_finish_reason": "the stream ended without a finish reason for a choice",
    "unknown_finish_reason": "a finish reason this dialect does not define; kept as sent",
    "foreign_frame": "a frame of another dialect inside this stream; it changes nothing",
    # OpenAI Responses
    "event_type_mismatch": "the SSE event name and the JSON type differ; the type wins",
    "item_id_changed": "a delta named another item id than its call's (the key is output_index)",
    "call_id_changed": "a later copy sent another call_id; the first one stays",
    "sequence_gap": "sequence_number jumped: events are missing in between",
    "sequence_disorder": "sequence_number repeated or went back",
    "resumed_stream": "the stream starts mid-response (a resumed stream, starting_after)",
    "item_not_done": "a call's item was still open at the terminal event",
    "arguments_only_in_done": "no delta came: the arguments are only in the final copy",
    # Anthropic Messages
    "event_name_missing": "a frame without an event: line (the official SDK drops such frames)",
    "block_not_stopped": "a content block never got its content_block_stop",
    "arguments_only_in_start": "no delta came: the input is the one in content_block_start",
    "start_input_discarded": "deltas replaced the non-empty input of content_block_start",
    "repeated_start": "message_start came again for the same message; ignored",
}


def mark_words(mark: str) -> str:
    """What a mark means, "" for refusal codes (the verdict says those)."""
    return MARK_WORDS.get(mark, "")


def marks_explained(rows: list) -> list[tuple[str, str]]:
    """The marks on the frame rows shown, each once, with its meaning."""
    seen: dict[str, str] = {}
    for row in rows:
        for mark, _ in row.marks:
            if mark not in seen and mark_words(mark):
                seen[mark] = mark_words(mark)
    return sorted(seen.items())
