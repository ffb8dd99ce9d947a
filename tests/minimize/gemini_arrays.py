"""Gemini streams as a JSON array (`:streamGenerateContent` without
`alt=sse`), written here for the minimizer tests: pretty-printed elements
joined by `\\n,\\r\\n` as Gemini sends them, with noise around each fault.

Also `elements_of` / `join_elements`, an independent way to split an array
into its elements (the assembler's own JSON-array reader) and put it back
together without one of them.
"""

from __future__ import annotations

from typing import Any

import orjson

from inspector.assembly import JSONArrayReader

MODEL = "gemini-2.5-flash"


def response(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": MODEL, "responseId": "resp-gemini", **extra}


def text(words: str) -> dict[str, Any]:
    return {"text": words}


def call(**function: Any) -> dict[str, Any]:
    return {"functionCall": function}


def piece(path: str, value: Any, *, more: bool = True) -> dict[str, Any]:
    key = "stringValue" if type(value) is str else "numberValue"
    return {"jsonPath": path, key: value, "willContinue": more}


USAGE = {"promptTokenCount": 31, "candidatesTokenCount": 12, "totalTokenCount": 43}


def pretty(element: dict[str, Any]) -> bytes:
    return orjson.dumps(element, option=orjson.OPT_INDENT_2)


def array(*elements: dict[str, Any], closed: bool = True) -> bytes:
    """The elements as Gemini streams them: `[{...}\\n,\\r\\n{...}\\n]`."""
    body = b"\n,\r\n".join(pretty(e) for e in elements)
    return b"[" + body + (b"\n]" if closed else b"\n")


# A streamed call renamed while it streams: IDENTITY_CONFLICT.
RENAMED = array(
    response(text("Let me look that up.")),
    response(text(" One moment.")),
    response(call(name="read_file", willContinue=True)),
    response(call(partialArgs=[piece("$.path", "/etc/", more=True)], willContinue=True)),
    response(call(partialArgs=[piece("$.path", "hosts")], willContinue=True)),
    response(call(name="write_file", args={"path": "/etc/hosts"})),
    response(call(), finish="STOP", usageMetadata=USAGE),
)

# A number where the path holds a string: INVALID_ARGUMENTS.
TYPE_CLASH = array(
    response(text("Reading.")),
    response(call(name="read_file", willContinue=True)),
    response(call(partialArgs=[piece("$.path", "/var/log/")], willContinue=True)),
    response(call(partialArgs=[piece("$.path", 7, more=False)], willContinue=True)),
    response(text("done")),
    response(call(), finish="STOP", usageMetadata=USAGE),
)

# Every candidate finished, but the array never got its `]`.
UNCLOSED = array(
    response(text("Hi")),
    response(text(" there")),
    response(call(name="lookup", args={"q": "x"})),
    response(text("!"), finish="STOP", usageMetadata=USAGE),
    closed=False,
)

# The input ends inside the third element.
CUT = array(
    response(text("Hi")),
    response(call(name="lookup", args={"q": "x"})),
    response(text("more"), finish="STOP"),
    closed=False,
)[:-60]

# A whole non-streamed body: one object, a function call without a name.
WHOLE = pretty(
    response(text("Calling."), call(args={"q": "x"}), finish="STOP", usageMetadata=USAGE)
)

# A number among the elements: INVALID_FRAME.
NOT_AN_OBJECT = (
    array(response(text("Hi")), response(text(" there")))[:-2]
    + b"\n,\r\n42\n,\r\n"
    + pretty(response(text("!"), finish="STOP"))
    + b"\n]"
)

REFUSED = {
    "renamed": RENAMED,
    "type_clash": TYPE_CLASH,
    "unclosed": UNCLOSED,
    "cut": CUT,
    "whole": WHOLE,
    "not_an_object": NOT_AN_OBJECT,
}


def elements_of(data: bytes) -> tuple[list[str], bool]:
    """(each element's text, whether the array was closed with `]`)."""
    reader = JSONArrayReader()
    frames = [*reader.feed(data), *reader.close()]
    return [frame.raw for frame in frames], reader.closed


def join_elements(elements: list[str], closed: bool) -> bytes:
    return ("[" + ",".join(elements) + ("]" if closed else "")).encode()
