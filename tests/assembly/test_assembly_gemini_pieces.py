"""Gemini `partialArgs` pieces: the adapter joins a streamed string once its
path stops continuing (joining per piece would be quadratic); the arguments
must still be what setting every piece at once makes, whatever the paths
(nested, overlapping, the same path written two ways) and however the bytes
are cut, and a stream never makes the assembler raise."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.assembly import assemble
from inspector.assembly.jsonpath import PathError, parse_path, set_at

VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue")

pieces = st.fixed_dictionaries(
    {"jsonPath": st.sampled_from(["$.a", "$.a.b", "$['a']", "$.a[0]", "$.a[00]", "$.b", "$.a.c"])},
    optional={
        "stringValue": st.sampled_from(["x", "yz", ""]),
        "numberValue": st.sampled_from([1, 2.5]),
        "nullValue": st.none(),
        "willContinue": st.booleans(),
    },
)


def eager(steps: list[dict[str, Any]]) -> str | None:
    """The arguments when each piece is applied as it comes (None: a piece
    that can't be applied, INVALID_ARGUMENTS)."""
    value: dict[str, Any] = {}
    continuing: dict[str, bool] = {}
    for piece in steps:
        path = piece["jsonPath"]
        more = piece.get("willContinue") is True
        key = next((k for k in VALUE_KEYS if k in piece), None)
        if key is None:
            continuing[path] = more
            continue
        item = None if key == "nullValue" else piece[key]
        if type(item) is float and item.is_integer():
            item = int(item)
        try:
            set_at(value, parse_path(path), item, extend=continuing.get(path, False))
        except PathError:
            return None
        continuing[path] = more
    return orjson.dumps(value).decode()


def stream(steps: list[dict[str, Any]]) -> bytes:
    def frame(function: dict[str, Any], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": [{"functionCall": function}]}}
        if finish:
            candidate["finishReason"] = finish
        return b"data: " + orjson.dumps({"candidates": [candidate]}) + b"\n\n"

    frames = [frame({"name": "f", "willContinue": True})]
    frames += [frame({"partialArgs": [piece], "willContinue": True}) for piece in steps]
    frames.append(frame({}, "STOP"))
    return b"".join(frames)


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces, max_size=10), st.integers(1, 40))
def test_pieces_make_what_setting_each_at_once_makes(steps, size):
    data = stream(steps)
    result = assemble(data, fmt="sse", dialect="gemini")
    wanted = eager(steps)
    if wanted is None:
        assert result.refusal is not None and result.refusal.code == "INVALID_ARGUMENTS"
    else:
        assert result.outcome == "ok", result.refusal and result.refusal.message
        assert result.calls[0].arguments_text == wanted
    cut = assemble(data, fmt="sse", dialect="gemini", chunk_bytes=size)
    assert cut.to_dict() == result.to_dict()


def test_a_parent_nulled_then_set_replaces_the_string_streaming_under_it():
    steps = [
        {"jsonPath": "$.a.b", "stringValue": "x", "willContinue": True},
        {"jsonPath": "$.a", "nullValue": None},
        {"jsonPath": "$.a", "stringValue": "y"},
    ]
    result = assemble(stream(steps), fmt="sse", dialect="gemini")
    assert result.outcome == "ok"
    assert result.calls[0].arguments_text == '{"a":"y"}'
