"""intake.py: tell the format, split a HAR, store all of an upload or none."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command

from inspector.assembly import UnreadableInput
from inspector.captures import intake, models, store, uploads
from inspector.captures.intake import store_upload
from inspector.captures.uploads import TooLarge

CAPTURE_MODELS = (models.Capture, models.Frame, models.Assembly, models.Call, models.Fragment)
SECRET = "intake-secret-5b1d"


def chunk(content: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "object": "chat.completion.chunk",
        "model": "gpt-intake",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }


SSE = b"".join(
    b"data: " + orjson.dumps(item) + b"\n\n" for item in (chunk("he"), chunk("llo", "stop"))
) + (b"data: [DONE]\n\n")
JSONL = orjson.dumps(chunk("hi", "stop")) + b"\n[DONE]\n"


def entry(url: str, body: str, mime: str = "text/event-stream") -> dict[str, Any]:
    return {
        "request": {
            "method": "POST",
            "url": url,
            "headers": [
                {"name": "Authorization", "value": f"Bearer {SECRET}"},
                {"name": "api-key", "value": SECRET},
            ],
        },
        "response": {"status": 200, "content": {"mimeType": mime, "text": body}},
    }


def har(*entries: dict[str, Any]) -> bytes:
    return orjson.dumps({"log": {"entries": list(entries)}})


def nothing_stored() -> bool:
    return all(model.objects.count() == 0 for model in CAPTURE_MODELS)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "name", "fmt", "expected"),
    [
        (SSE, None, "auto", "sse"),
        (JSONL, None, "auto", "jsonl"),
        (JSONL, "trace.ndjson", "auto", "jsonl"),
        (SSE, "trace.eventstream", "auto", "sse"),
        (JSONL, "trace.txt", "jsonl", "jsonl"),
    ],
)
def test_the_format_comes_from_the_name_the_bytes_or_the_caller(data, name, fmt, expected):
    [capture] = store_upload(data, name=name, fmt=fmt)
    assert capture.input_format == capture.stream_format == expected
    assert capture.outcome == "ok"
    assert capture.title == (name or intake.readable_title(capture))


@pytest.mark.django_db
def test_an_untitled_upload_is_named_by_format_model_and_time():
    """Pasted text or an API body with no title: "format · first model · time", not the slug."""
    [capture] = store_upload(JSONL)
    when = capture.created.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    assert capture.title == f"jsonl · gpt-intake · {when} UTC"
    assert models.Capture.objects.get(pk=capture.pk).title == capture.title  # stored
    stored = store_upload(har(entry("https://a.example/v1/x", SSE.decode()), entry("b", "")))
    first, second = (c.created.astimezone(UTC).strftime("%Y-%m-%d %H:%M") for c in stored)
    assert [c.title for c in stored] == [
        f"har · gpt-intake · {first} UTC · stream 1 of 2",
        f"har · {second} UTC · stream 2 of 2",  # an empty stream names no model
    ]


@pytest.mark.django_db
def test_a_title_wins_over_the_name():
    [capture] = store_upload(SSE, name="x.sse", title="mine")
    assert capture.title == "mine"


@pytest.mark.django_db
def test_unreadable_input_stores_nothing():
    with pytest.raises(UnreadableInput, match="can't tell the format"):
        store_upload(b"\x00garbage")
    with pytest.raises(UnreadableInput, match="not valid JSON"):
        store_upload(b"{", fmt="har")
    with pytest.raises(UnreadableInput, match="no text/event-stream"):
        store_upload(har(entry("https://a.example/", "{}", "application/json")), name="a.har")
    assert nothing_stored()


def base64_entry(text: str) -> dict[str, Any]:
    """An event-stream entry whose body is this base64 text."""
    item = entry("https://a.example/v1", text)
    item["response"]["content"]["encoding"] = "base64"
    return item


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["!!!", "ZGF0YTog*W0RPTkVdCgo=", "ZGF0YQ"])
def test_a_base64_body_that_does_not_decode_is_unreadable_not_empty(text):
    with pytest.raises(UnreadableInput, match="HAR entry 0: base64 body does not decode"):
        store_upload(har(base64_entry(text)), name="a.har")
    assert nothing_stored()


@pytest.mark.django_db
def test_a_base64_body_wrapped_in_lines_decodes():
    encoded = base64.b64encode(SSE).decode()
    wrapped = "\r\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76)) + "\n"
    [capture] = store_upload(har(base64_entry(wrapped)), name="a.har")
    assert bytes(capture.raw) == SSE and capture.outcome == "ok"


def test_assemble_exits_2_on_a_base64_body_that_does_not_decode(tmp_path, capsys):
    path = tmp_path / "bad.har"
    path.write_bytes(har(base64_entry("!!!")))
    with pytest.raises(CommandError, match="base64 body does not decode") as raised:
        call_command("assemble", str(path))
    assert raised.value.returncode == 2
    assert capsys.readouterr().out == ""


@pytest.mark.django_db
def test_too_large_is_refused_before_anything_is_read(settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = len(SSE) - 1
    assert uploads.max_upload_bytes() == len(SSE) - 1
    with pytest.raises(TooLarge, match=f"the upload is {len(SSE)} bytes"):
        store_upload(SSE)
    assert nothing_stored()
    settings.INSPECTOR_MAX_UPLOAD_BYTES = len(SSE)
    assert len(store_upload(SSE)) == 1


@pytest.mark.django_db
def test_a_har_gives_one_capture_per_event_stream():
    data = har(
        entry(f"https://api.example.com/v1/chat/completions?key={SECRET}", SSE.decode()),
        entry("https://api.example.com/v1/models", '{"data": []}', "application/json"),
        entry("http://[::1]:8080/v1/chat?x=1", SSE.decode(), "Text/Event-Stream; charset=utf-8"),
        entry("not a url", SSE.decode()),
    )
    stored = store_upload(data, name="session.har")
    assert len(stored) == 3
    assert len({c.har_upload for c in stored}) == 1 and stored[0].har_upload
    assert [c.har_entry for c in stored] == [0, 1, 2]
    assert [c.title for c in stored] == [
        "session.har [stream 1 of 3]",
        "session.har [stream 2 of 3]",
        "session.har [stream 3 of 3]",
    ]
    assert [c.source_url for c in stored] == [
        "https://api.example.com/v1/chat/completions",
        "http://[::1]:8080/v1/chat",
        "not a url",
    ]
    assert [c.provider for c in stored] == ["api.example.com", "::1", ""]
    assert all(c.input_format == "har" and c.stream_format == "sse" for c in stored)
    assert all(bytes(c.raw) == SSE for c in stored)
    assert not models.Capture.objects.filter(source_url__contains=SECRET).exists()


@pytest.mark.django_db
def test_a_har_with_one_stream_keeps_its_title_and_no_har_upload():
    [capture] = store_upload(har(entry("https://a.example/x", SSE.decode())), title="one")
    assert capture.title == "one"
    assert capture.har_upload == ""
    assert capture.har_entry == 0


def timed_entry(started: Any, status: Any) -> dict[str, Any]:
    item = entry("https://a.example/v1", SSE.decode())
    item["startedDateTime"] = started
    item["response"]["status"] = status
    return item


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("started", "status", "started_at", "http_status"),
    [
        ("2024-06-10T09:00:00.123Z", 200, datetime(2024, 6, 10, 9, 0, 0, 123000, UTC), 200),
        ("2024-06-10T11:00:00+02:00", 429, datetime(2024, 6, 10, 9, 0, 0, tzinfo=UTC), 429),
        ("2024-06-10T09:00:00", 201, datetime(2024, 6, 10, 9, 0, 0, tzinfo=UTC), 201),
        ("2024-13-40T09:00:00Z", 0, None, None),
        ("yesterday", "200", None, None),
        ("9999-12-31T23:59:59-05:00", 2**40, None, None),
        (None, None, None, None),
    ],
    ids=["utc", "offset", "no-offset", "no-such-day", "not-a-time", "overflow", "missing"],
)
def test_a_har_entry_keeps_its_start_and_status(started, status, started_at, http_status):
    [capture] = store_upload(har(timed_entry(started, status)), name="a.har")
    capture.refresh_from_db()
    assert capture.started_at == started_at
    assert capture.http_status == http_status
    assert capture.outcome == "ok"


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("https://user:pw@host.example:8443/p/a?key=1#frag", "https://host.example:8443/p/a"),
        ("https://HOST.example/p;params", "https://host.example/p;params"),
        ("http://[::1]/", "http://[::1]/"),
        ("http://[bad/", ""),
        ("http://host:notaport/", ""),
        ("", ""),
    ],
)
def test_public_url_drops_what_may_hold_a_secret(url, public):
    assert intake._public_url(url) == public


TWO_STREAMS = har(
    entry("https://a.example/1", SSE.decode()), entry("https://a.example/2", SSE.decode())
)


def _fail_on_second_stream(monkeypatch) -> list[int]:
    real = store._store_assembly
    captures: list[int] = []

    def store_assembly(capture, *args, **kwargs):
        if capture.pk not in captures:
            captures.append(capture.pk)
        if len(captures) == 2:
            raise RuntimeError("lost the database")
        return real(capture, *args, **kwargs)

    monkeypatch.setattr(store, "_store_assembly", store_assembly)
    return captures


@pytest.mark.django_db
def test_a_failure_on_the_second_stream_rolls_back_the_first(monkeypatch):
    seen = _fail_on_second_stream(monkeypatch)
    data = har(
        entry("https://a.example/1", SSE.decode()), entry("https://a.example/2", SSE.decode())
    )
    with pytest.raises(RuntimeError, match="lost the database"):
        store_upload(data)
    assert len(seen) == 2
    assert nothing_stored()


@pytest.mark.django_db(transaction=True)
def test_a_failure_leaves_nothing_committed(monkeypatch):
    """The same with real commits: no test transaction around the upload."""
    _fail_on_second_stream(monkeypatch)
    data = har(
        entry("https://a.example/1", SSE.decode()), entry("https://a.example/2", SSE.decode())
    )
    with pytest.raises(RuntimeError):
        store_upload(data)
    assert nothing_stored()
    monkeypatch.undo()
    assert len(store_upload(data)) == 2
    assert models.Capture.objects.count() == 2
