"""Hostile uploads: hypothesis strategies and the property every upload must keep.

Shared by tests/hardening/test_hardening_upload_fuzz.py (a modest run inside the suite) and
bench/fuzz_uploads.py (thousands of cases).  Imported by module name: pytest puts this
directory on sys.path, and the bench adds it.

The property (`check`): an upload is answered 201 (API) or 302 (upload form), and then
exactly the captures it names were added, each whole (its frames, `frame_count` of them; its
two assemblies; their calls), or it is answered with a 4xx (JSON `{"error": ...}` from the
API) and no row of any captures table was added.  Never a 5xx.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

# -- building blocks -----------------------------------------------------------

HUGE_NUMBERS = (
    "1e400",
    "-1e400",
    "9" * 400,
    "-" + "9" * 400,
    str(2**31),
    str(2**31 - 1),
    str(2**53 + 1),
    str(2**63 - 1),
    str(2**63),
    str(2**64),
    str(2**70),
    "1.7976931348623157e308",
    "5e-324",
    "1E+2",
    "-0",
    "0." + "0" * 300 + "1",
)
DEPTHS = (1, 2, 254, 255, 256, 1000, 1023, 1024, 1025, 2000)
BAD_UTF8 = (
    b"\xff",
    b"\xfe\xff",
    b"\xc3",  # a lead byte with no continuation
    b"\x80",  # a lone continuation byte
    b"\xc0\xaf",  # an overlong encoding
    b"\xed\xa0\x80",  # an encoded surrogate
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
    b"\xef\xbb\xbf",  # a BOM in the middle
)
LINE_ENDINGS = ("\n", "\r\n", "\r")
FORMATS = ("", "auto", "sse", "jsonl", "har", "SSE", " jsonl ", "bogus")
NAMES = (
    None,
    "stream.sse",
    "stream.jsonl",
    "stream.har",
    "stream.txt",
    "stream.bin",
    "noext",
    "x" * 300 + ".sse",
    "nul\x00name.jsonl",
    "../../etc/passwd.sse",
    "üñí©ødé.ndjson",
)
FINISH = (None, "stop", "tool_calls", "length", "content_filter", "error", "x" * 60, "a\x00b")

text = st.text(max_size=40)
small_index = st.integers(min_value=-2, max_value=4)


@st.composite
def tool_entry(draw) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if draw(st.booleans()):
        entry["index"] = draw(st.one_of(small_index, st.sampled_from([2**31, 2**63, 2**64 - 1])))
    if draw(st.booleans()):
        entry["id"] = draw(st.one_of(st.sampled_from(["call_a", "call_b", ""]), text))
    function: dict[str, Any] = {}
    if draw(st.booleans()):
        function["name"] = draw(st.one_of(st.sampled_from(["get_weather", "f"]), text))
    if draw(st.booleans()):
        function["arguments"] = draw(
            st.one_of(
                st.sampled_from(['{"city": "Par', 'is"}', "{}", "", "}", '{"a":1}']),
                text,
                st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**64 - 1), max_size=2),
            )
        )
    if function or draw(st.booleans()):
        entry["function"] = function
    return entry


@st.composite
def chunk(draw) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if draw(st.booleans()):
        delta["content"] = draw(text)
    if draw(st.booleans()):
        delta["tool_calls"] = draw(st.lists(tool_entry(), min_size=1, max_size=3))
    choice = {"index": draw(st.one_of(small_index, st.just(2**40))), "delta": delta}
    choice["finish_reason"] = draw(st.sampled_from(FINISH))
    body: dict[str, Any] = {"id": "chatcmpl-fuzz", "model": draw(st.sampled_from(["m", "x" * 250]))}
    body["choices"] = [choice]
    if draw(st.integers(0, 9)) == 0:
        body["usage"] = {"prompt_tokens": draw(st.integers(0, 2**64 - 1)), "total_tokens": 3}
    if draw(st.integers(0, 19)) == 0:
        body = {"error": {"message": draw(text), "code": 500}}
    return body


def sse_frame(body: Any) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


def jsonl_line(body: Any) -> bytes:
    return orjson.dumps(body) + b"\n"


@st.composite
def valid_stream(draw) -> tuple[str, bytes]:
    """(sse or jsonl, a stream of generated chunks, maybe ended by [DONE])."""
    fmt = draw(st.sampled_from(["sse", "jsonl"]))
    bodies = draw(st.lists(chunk(), max_size=12))
    encode = sse_frame if fmt == "sse" else jsonl_line
    data = b"".join(encode(body) for body in bodies)
    if draw(st.booleans()):
        data += b"data: [DONE]\n\n" if fmt == "sse" else b"[DONE]\n"
    return fmt, data


def _insert(draw, data: bytes, pieces: st.SearchStrategy[bytes], most: int = 4) -> bytes:
    """`data` with a few pieces inserted at drawn positions."""
    for _ in range(draw(st.integers(1, most))):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(pieces) + data[at:]
    return data


# -- the hostile kinds -----------------------------------------------------------


@st.composite
def garbage(draw) -> bytes:
    data = draw(st.binary(max_size=3000))
    if draw(st.booleans()):  # make it look like a stream, so it is read rather than refused
        data = draw(st.sampled_from([b"data: ", b"{", b":", b'{"log":'])) + data
    return data


@st.composite
def invalid_utf8(draw) -> bytes:
    _, data = draw(valid_stream())
    return _insert(draw, data or b"data: {}\n\n", st.sampled_from(BAD_UTF8), most=6)


@st.composite
def nul_bytes(draw) -> bytes:
    _, data = draw(valid_stream())
    pieces = st.sampled_from([b"\x00", b"\\u0000", b"\x00" * 5, b'"\\u0000"'])
    return _insert(draw, data or b"data: {}\n\n", pieces, most=6)


def _nest(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


@st.composite
def deep_nesting(draw) -> bytes:
    depth = draw(st.sampled_from(DEPTHS))
    nest = _nest(depth, draw(st.sampled_from(["array", "object"])))
    where = draw(st.sampled_from(["usage", "arguments", "arguments_object", "field", "bare"]))
    head = sse_frame({"choices": [{"index": 0, "delta": {"content": "x"}}]})

    def tool(arguments: str) -> str:
        entry = '{"index":0,"id":"c","function":{"name":"f","arguments":' + arguments + "}}"
        return '{"choices":[{"index":0,"delta":{"tool_calls":[' + entry + "]}}]}"

    if where == "usage":
        frame = '{"choices":[],"usage":{"d":' + nest + "}}"
    elif where == "arguments":
        frame = tool(orjson.dumps('{"a":' + nest + "}").decode())
    elif where == "arguments_object":
        frame = tool(nest)
    elif where == "field":
        frame = '{"x":' + nest + ',"choices":[{"index":0,"delta":{"content":"y"}}]}'
    else:
        frame = nest
    tail = sse_frame({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    data = head + b"data: " + frame.encode() + b"\n\n" + tail + b"data: [DONE]\n\n"
    if draw(st.booleans()):  # the same as JSON Lines
        data = b"\n".join(line[6:] for line in data.split(b"\n\n") if line) + b"\n"
    return data


@st.composite
def huge_numbers(draw) -> bytes:
    number = draw(st.sampled_from(HUGE_NUMBERS))
    where = draw(st.sampled_from(["choice", "tool", "usage", "arguments", "created", "all"]))
    choice = number if where in ("choice", "all") else "0"
    index = number if where in ("tool", "all") else "0"
    usage = number if where in ("usage", "all") else "1"
    created = number if where in ("created", "all") else "0"
    arguments = '{"n":' + number + "}" if where in ("arguments", "all") else "{}"
    quoted = orjson.dumps(arguments).decode()
    entry = '{"index":' + index + ',"id":"c","function":{"name":"f","arguments":' + quoted + "}}"
    delta = '{"tool_calls":[' + entry + "]}"
    frames = [
        '{"created":' + created + ',"choices":[{"index":' + choice + ',"delta":' + delta + "}]}",
        '{"choices":[{"index":'
        + choice
        + ',"delta":{},"finish_reason":"tool_calls"}],'
        + '"usage":{"total_tokens":'
        + usage
        + "}}",
    ]
    if draw(st.booleans()):
        return b"".join(b"data: " + f.encode() + b"\n\n" for f in frames) + b"data: [DONE]\n\n"
    return b"".join(f.encode() + b"\n" for f in frames)


def har_document(streams: list[bytes], *, base64_body: bool = False) -> dict[str, Any]:
    entries = []
    for number, body in enumerate(streams):
        content: dict[str, Any] = {"mimeType": "text/event-stream; charset=utf-8"}
        if base64_body:
            content["text"], content["encoding"] = base64.b64encode(body).decode(), "base64"
        else:
            content["text"] = body.decode("utf-8", "replace")
        entries.append(
            {
                "startedDateTime": "2026-01-02T03:04:05.000Z",
                "request": {"method": "POST", "url": f"https://api.example.com/v1/c?key=k{number}"},
                "response": {"status": 200, "content": content},
            }
        )
    entries.insert(0, {"response": {"content": {"mimeType": "application/json", "text": "{}"}}})
    return {"log": {"version": "1.2", "entries": entries}}


MANGLES = (
    "none",
    "truncate",
    "overwrite",
    "mime",
    "text_type",
    "entries_type",
    "bad_base64",
    "url_type",
    "bad_url",
)


@st.composite
def har_file(draw) -> bytes:
    """A HAR of 1-3 event streams, whole, truncated or mangled."""
    streams = [draw(valid_stream())[1] for _ in range(draw(st.integers(1, 3)))]
    document = har_document(streams, base64_body=draw(st.booleans()))
    mangle = draw(st.sampled_from(MANGLES))
    entries = document["log"]["entries"]
    target = entries[draw(st.integers(1, len(entries) - 1))]
    content = target["response"]["content"]
    if mangle == "mime":
        content["mimeType"] = draw(
            st.sampled_from([None, 5, [], "text/plain", "TEXT/EVENT-STREAM"])
        )
    elif mangle == "text_type":
        content["text"] = draw(st.sampled_from([None, 5, {"a": 1}, ["x"]]))
    elif mangle == "entries_type":
        document["log"]["entries"] = draw(st.sampled_from([None, {}, "x", 3]))
    elif mangle == "bad_base64":
        content["encoding"], content["text"] = (
            "base64",
            draw(st.sampled_from(["!!!", "a", "==", ""])),
        )
    elif mangle == "url_type":
        target["request"]["url"] = draw(st.sampled_from([None, 5, {"a": 1}]))
    elif mangle == "bad_url":
        target["request"]["url"] = draw(
            st.sampled_from(["http://[::1/x", "http://a:99999/", "http://u:p@h\x00st/", "::::"])
        )
    data = orjson.dumps(document)
    if mangle == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif mangle == "overwrite":
        at = draw(st.integers(0, max(0, len(data) - 1)))
        junk = draw(st.binary(min_size=1, max_size=8))
        data = data[:at] + junk + data[at + len(junk) :]
    return data


LINE_KINDS = ("chunk", "done", "comment", "event", "garbage", "blank", "id", "retry", "bare")


@st.composite
def mixed_lines(draw) -> bytes:
    """SSE/JSON Lines lines: valid chunks among comments, fields, junk and blanks."""
    ending = draw(st.sampled_from(LINE_ENDINGS)).encode()
    lines: list[bytes] = []
    for kind in draw(st.lists(st.sampled_from(LINE_KINDS), max_size=30)):
        if kind == "chunk":
            body = orjson.dumps(draw(chunk()))
            lines.append(body if draw(st.booleans()) else b"data: " + body)
        elif kind == "done":
            lines.append(draw(st.sampled_from([b"data: [DONE]", b"[DONE]", b'"[DONE]"'])))
        elif kind == "comment":
            lines.append(b":" + draw(text).encode())
        elif kind == "event":
            lines.append(b"event: " + draw(st.sampled_from([b"error", b"message", b"x\x00"])))
        elif kind == "garbage":
            lines.append(draw(st.binary(max_size=60)).replace(b"\n", b"").replace(b"\r", b""))
        elif kind == "blank":
            lines.append(b"")
        elif kind == "id":
            lines.append(b"id: " + draw(text).encode())
        elif kind == "retry":
            lines.append(b"retry: " + draw(st.sampled_from([b"10", b"-1", b"9" * 50])))
        else:
            lines.append(b"data:" + draw(text).encode())
    data = ending.join(lines)
    if draw(st.booleans()):
        data += ending
    return data


@st.composite
def truncated_stream(draw) -> bytes:
    _, data = draw(valid_stream())
    return data[: draw(st.integers(0, len(data)))]


KINDS = {
    "garbage": garbage(),
    "invalid_utf8": invalid_utf8(),
    "nul_bytes": nul_bytes(),
    "deep_nesting": deep_nesting(),
    "huge_numbers": huge_numbers(),
    "har": har_file(),
    "mixed_lines": mixed_lines(),
    "truncated": truncated_stream(),
}
VIAS = ("body", "multipart", "form_file", "form_text")


@dataclass
class Upload:
    kind: str
    data: bytes
    via: str  # body, multipart (both /api/captures), form_file, form_text (/upload/)
    fmt: str  # the format parameter ("" leaves it out)
    name: str | None  # the file name (multipart and form_file)


@st.composite
def uploads(draw, vias: tuple[str, ...] = VIAS) -> Upload:
    kind = draw(st.sampled_from(sorted(KINDS)))
    return Upload(
        kind=kind,
        data=draw(KINDS[kind]),
        via=draw(st.sampled_from(vias)),
        fmt=draw(st.sampled_from(FORMATS)),
        name=draw(st.sampled_from(NAMES)),
    )


# -- posting and the property --------------------------------------------------------


def post(client, upload: Upload):
    """POST the upload with Django's test client (CSRF is not enforced by it)."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    fmt = upload.fmt
    if upload.via == "body":
        query = f"?format={fmt}" if fmt else ""
        return client.post(
            "/api/captures" + query, data=upload.data, content_type="application/octet-stream"
        )
    name = upload.name if upload.name is not None else "upload"
    if upload.via == "multipart":
        fields: dict[str, Any] = {"file": SimpleUploadedFile(name, upload.data), "title": "fuzz"}
        if fmt:
            fields["format"] = fmt
        return client.post("/api/captures", data=fields)
    form: dict[str, Any] = {"format": fmt.strip().lower() or "auto", "title": "fuzz"}
    if upload.via == "form_file":
        form["file"] = SimpleUploadedFile(name, upload.data)
    else:
        form["text"] = upload.data.decode("utf-8", "replace")
    return client.post("/upload/", data=form)


def table_counts() -> dict[str, int]:
    from inspector.captures import models

    tables = (models.Capture, models.Frame, models.Assembly, models.Call, models.Fragment)
    return {model.__name__: model.objects.count() for model in tables}


def last_capture_id() -> int:
    from inspector.captures import models

    return models.Capture.objects.order_by("-id").values_list("id", flat=True).first() or 0


def check(client, upload: Upload, *, pages: bool = False) -> int:
    """Post `upload` and assert the property; the status code."""
    from inspector.captures import models

    before, last = table_counts(), last_capture_id()
    response = post(client, upload)
    status = response.status_code
    after = table_counts()
    where = f"{upload.kind} via {upload.via} (format {upload.fmt!r}, name {upload.name!r})"
    assert status < 500, f"{where}: {status} {response.content[:300]!r}"
    stored = status in (201, 302)
    if not stored:
        assert 400 <= status < 500, f"{where}: unexpected {status}"
        assert after == before, f"{where}: {status} but rows changed: {before} -> {after}"
        if upload.via in ("body", "multipart"):
            body = orjson.loads(response.content)
            assert type(body) is dict and type(body.get("error")) is str and body["error"]
        return status
    new = list(models.Capture.objects.filter(id__gt=last).defer("raw").order_by("id"))
    assert new, f"{where}: {status} but no capture was stored"
    if status == 201:
        body = orjson.loads(response.content)
        named = [entry["slug"] for entry in body.get("captures", [body])]
        assert sorted(named) == sorted(c.slug for c in new), where
    frames = assemblies = calls = 0
    for capture in new:
        assert capture.outcome in ("ok", "refused"), f"{where}: {capture.outcome}"
        stored_frames = capture.frames.count()
        assert stored_frames == capture.frame_count, f"{where}: half-stored {capture.slug}"
        rows = list(capture.assemblies.all())
        assert sorted(a.policy for a in rows) == ["lenient", "strict"], where
        for assembly in rows:
            counted = assembly.calls.count()
            assert counted == len(_document(assembly.document())["calls"]), where
            calls += counted
        frames += stored_frames
        assemblies += len(rows)
        if capture.input_format != "har":
            raw = models.Capture.objects.values_list("raw", flat=True).get(pk=capture.pk)
            assert bytes(raw) == upload_bytes(upload), f"{where}: raw differs"
        if pages:
            page = client.get(f"/c/{capture.slug}/")
            assert page.status_code == 200, f"{where}: page {page.status_code}"
    grown = {name: after[name] - before[name] for name in after}
    assert grown["Capture"] == len(new), where
    assert grown["Frame"] == frames, where
    assert grown["Assembly"] == assemblies, where
    assert grown["Call"] == calls, where
    assert grown["Fragment"] >= 0, where
    return status


def _document(text: str) -> dict[str, Any]:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # deeper than orjson reads (1,024 levels)
        return json.loads(text)


def upload_bytes(upload: Upload) -> bytes:
    """The bytes the server received as the stream."""
    if upload.via == "form_text":
        return upload.data.decode("utf-8", "replace").encode("utf-8")
    return upload.data
