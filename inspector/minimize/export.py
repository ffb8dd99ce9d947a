"""Export a stream as a regression test: a `.sse` file and an expectation in
the shape of the conformance cases (`NAME.sse` + `NAME.expect.json`, holding
`{"about", "argv"?, "expect"}`), for a library maintainer's own test suite.

Pure: bytes in, bytes and a dict out.

What the expectation pins.  The strict (or lenient) assembler's result, cut
down to what the assembly spec pins for every conforming assembler and what
the cases check: the outcome; the refusal's code, frame, call, choice and
retryable flag (not its message, which is ours); the frame count; choice 0's
finish reason, text and the usage; every call's choice, id, name, index,
parsed arguments, arguments text, started and settled frames, and, for the
call whose check failed, `invalid_at`; the dropped deltas; the anomalies.

`invalid_at` keeps its `offset` only when the incremental scan found the
text invalid (a non-`{` start, a mismatched bracket, text after the root:
the scanner's rules, `inspector/assembly/scanner.py`).  When only the strict
parser did, the offset is what our parser reports, and parsers differ, so,
as in the conformance cases, only its frame is pinned.  Messages are never pinned.

JSON Lines become SSE: each line one `data:` block (the `[DONE]` line
`data: [DONE]`), so frames keep their numbers and the result is the same;
so does a JSON array, each element one block (its lines each a `data:`
line); an array the input left without its `]` has no SSE form (SSE has no
such cut) and is not exported.  A HAR gives its chosen event stream.  An
SSE stream is exported byte for byte.
"""

from __future__ import annotations

import re
from typing import Any

from inspector.assembly import (
    AUTO,
    HAR,
    JSON_ARRAY,
    JSONL,
    LENIENT,
    POLICIES,
    SSE,
    STRICT,
    FrameKind,
    JSONArrayReader,
    JSONLReader,
    Result,
    UnreadableInput,
    assemble,
    detect_format,
    stream_bytes,
)
from inspector.assembly.jsontext import dumps

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
SSE_SUFFIX, EXPECT_SUFFIX = ".sse", ".expect.json"


def to_sse(data: bytes, fmt: str, *, entry: int = 0) -> bytes:
    """The stream in `data` as SSE bytes that assemble to the same result."""
    if fmt == AUTO:
        fmt = detect_format(None, data)
    if fmt == HAR:
        return stream_bytes(data, HAR, entry)[1]
    if fmt == SSE:
        return data
    if fmt == JSON_ARRAY:
        return _array_to_sse(data)
    if fmt != JSONL:
        raise UnreadableInput(f"unknown format {fmt!r}: use sse, jsonl, json-array or har")
    reader = JSONLReader()
    frames = reader.feed(data)
    frames.extend(reader.close())
    blocks = []
    for frame in frames:
        # The line is the frame's data; "data: " + line gives that data back.
        data_text = "[DONE]" if frame.kind is FrameKind.DONE else frame.raw
        blocks.append(f"data: {data_text}\n\n")
    return "".join(blocks).encode()


def _array_to_sse(data: bytes) -> bytes:
    reader = JSONArrayReader()
    frames = [*reader.feed(data), *reader.close()]
    if reader.cut_between:
        raise UnreadableInput(
            "this JSON array ended before its ']': SSE has no such cut, so it has no SSE form"
        )
    blocks = []
    for frame in frames:
        lines = frame.raw.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        block = "".join(f"data: {line}\n" for line in lines)
        blocks.append(block if frame.unterminated else block + "\n")
    return "".join(blocks).encode()


def _call(call: Any, document: dict[str, Any]) -> dict[str, Any]:
    out = {
        "choice": document["choice"],
        "id": document["id"],
        "name": document["name"],
        "index": document["index"],
        "arguments": document["arguments"],
        "started_frame": document["started_frame"],
        "settled_frame": document["settled_frame"],
        "arguments_text": document["arguments_text"],
    }
    invalid_at = document["invalid_at"]
    if invalid_at is not None:
        pinned: dict[str, Any] = {"frame": invalid_at["frame"]}
        if call.scanner.invalid_at is not None:  # the scan found it: the spec pins where
            pinned["offset"] = invalid_at["offset"]
        out["invalid_at"] = pinned
    return out


def expectation(result: Result) -> dict[str, Any]:
    """The `expect` object of a case for this result."""
    document = result.to_dict()
    refusal = document["refusal"]
    expect: dict[str, Any] = {"outcome": document["outcome"]}
    expect["refusal"] = (
        {key: refusal[key] for key in ("code", "frame", "call", "choice", "retryable")}
        if refusal
        else None
    )
    if result.policy != STRICT:
        expect["policy"] = result.policy
    expect["frames"] = document["frames"]
    expect["finish_reason"] = document["finish_reason"]
    expect["usage"] = document["usage"]
    expect["text"] = document["text"]
    expect["calls"] = [
        _call(call, call_doc)
        for call, call_doc in zip(result.calls, document["calls"], strict=True)
    ]
    expect["dropped"] = document["dropped"]
    expect["anomalies"] = document["anomalies"]
    return expect


def regression_case(
    data: bytes,
    fmt: str,
    *,
    name: str,
    about: str,
    policy: str = STRICT,
    entry: int = 0,
) -> tuple[bytes, dict[str, Any]]:
    """(the `.sse` bytes, the `.expect.json` document) of a case `name`.

    Raises ValueError for a name that is not a plain file name.
    """
    if not NAME.fullmatch(name):
        raise ValueError(
            f"case name {name!r}: use letters, digits, '_', '-' and '.', "
            "starting with a letter or digit"
        )
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    sse = to_sse(data, fmt, entry=entry)
    result = assemble(sse, fmt=SSE, policy=policy)
    if fmt in (JSONL, JSON_ARRAY, AUTO) and sse is not data:
        original = assemble(data, fmt=fmt, policy=policy, entry=entry).to_dict()
        if original != result.to_dict():  # a guard: the conversion keeps every frame
            raise ValueError("the stream assembles differently once written as SSE")
    case: dict[str, Any] = {"about": about}
    if policy == LENIENT:
        case["argv"] = ["--policy", LENIENT]
    case["expect"] = expectation(result)
    return sse, case


def case_files(
    data: bytes,
    fmt: str,
    *,
    name: str,
    about: str,
    policy: str = STRICT,
    entry: int = 0,
) -> dict[str, bytes]:
    """`{NAME.sse: bytes, NAME.expect.json: bytes}`, ready to write or serve."""
    sse, case = regression_case(data, fmt, name=name, about=about, policy=policy, entry=entry)
    return {name + SSE_SUFFIX: sse, name + EXPECT_SUFFIX: dumps(case, indent=True) + b"\n"}
