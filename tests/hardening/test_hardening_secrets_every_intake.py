"""A canary secret sent with a request is stored 0 times, whatever the intake.

Every intake path (the upload form, `POST /api/captures` raw and multipart,
a HAR upload, ingest over HTTP and over the websocket, the recording proxy
and guard mode against the fake upstream) gets the canary in the places a
client puts credentials: the Authorization, api-key and x-api-key headers,
cookies, the query string (`?api_key=...&key=...`) and secret-named fields
of the request body (`api_key`, `tokens: [...]`, `auth: {...}`, ...).
Afterwards every column of every table (sessions decoded too) and every
file written under the project is searched for it: no hit is allowed.

The stream itself never holds the canary: what a model answers is the
user's data, and is stored as it came.  Each case also sends a harmless
marker that *is* stored, so an intake that stored nothing would not pass
for one that stored no secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from inspector.captures import models
from inspector.live.fake_upstream import FakeUpstream

pytestmark = pytest.mark.django_db(transaction=True)

# One canary per place, none inside another: the proxy scrubs a header's
# value from every stored string, which must not hide a body field or a
# query parameter that would be stored without it.  All end in SECRET.
SECRET = "XYZ123"
CANARY = f"sk-canary-header-{SECRET}"
QUERY_CANARY = f"sk-canary-query-{SECRET}"
BODY_CANARY = f"sk-canary-body-{SECRET}"
MARK = "visible-mark-5c1d"  # stored by every intake: proves the search sees stored text
HEADERS = {
    "Authorization": f"Bearer {CANARY}",
    "api-key": CANARY,
    "x-api-key": CANARY,
    "Cookie": f"session={CANARY}; theme=dark; sid={CANARY}",
}
QUERY = f"api_key={QUERY_CANARY}&key={QUERY_CANARY}"
# Secret-named request-body fields, flat and nested, singular and plural.
BODY_SECRETS: dict[str, Any] = {
    "api_key": BODY_CANARY,
    "apiKey": BODY_CANARY,
    "password": BODY_CANARY,
    "secret": BODY_CANARY,
    "token": BODY_CANARY,
    "tokens": [BODY_CANARY],
    "auth": {"x": BODY_CANARY},
    "authorization": f"Bearer {BODY_CANARY}",
    "credentials": [{"k": BODY_CANARY}],
    "access_token": BODY_CANARY,
    "refresh_token": BODY_CANARY,
    "client_secret": BODY_CANARY,
    "private_key": BODY_CANARY,
    "session": BODY_CANARY,
    "cookies": {"sid": BODY_CANARY},
    "metadata": {"user_token": BODY_CANARY, "api_keys": [BODY_CANARY], "note": MARK},
}
# Form fields can only be flat.
FORM_SECRETS = {k: v for k, v in BODY_SECRETS.items() if isinstance(v, str)}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "login",
            "parameters": {
                "type": "object",
                "properties": {"api_key": {"type": "string"}, "token": {"type": "string"}},
                "required": ["api_key"],
            },
        },
    }
]


def sse_stream() -> bytes:
    """A small complete stream whose content is the marker (and no secret)."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test"}
    deltas = [({"role": "assistant", "content": MARK}, None), ({}, "stop")]
    frames = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        for delta, finish in deltas
    ]
    return b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames) + (
        b"data: [DONE]\n\n"
    )


def har_with_secrets() -> bytes:
    """A HAR of one streamed request carrying the canary everywhere but the answer."""
    request_body = {"model": "gpt-test", "stream": True, **BODY_SECRETS}
    entry = {
        "startedDateTime": "2026-01-02T03:04:05.000Z",
        "time": 12,
        "request": {
            "method": "POST",
            "url": f"https://user:{CANARY}@api.example.com/v1/chat/completions?{QUERY}#{CANARY}",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": k, "value": v} for k, v in HEADERS.items()],
            "cookies": [{"name": "session", "value": CANARY}],
            "queryString": [
                {"name": "api_key", "value": QUERY_CANARY},
                {"name": "key", "value": QUERY_CANARY},
            ],
            "postData": {"mimeType": "application/json", "text": json.dumps(request_body)},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "headers": [
                {"name": "Content-Type", "value": "text/event-stream"},
                {"name": "Set-Cookie", "value": f"session={CANARY}; HttpOnly"},
            ],
            "cookies": [{"name": "session", "value": CANARY}],
            "content": {"mimeType": "text/event-stream", "text": sse_stream().decode()},
        },
    }
    log = {"version": "1.2", "creator": {"name": "t"}, "entries": [entry]}
    return json.dumps({"log": log}).encode()


# -- the search -------------------------------------------------------------------------


def _holds(value: Any, needle: str) -> bool:
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes):
        return needle.encode() in value
    return value is not None and needle in str(value)


def table_cells_holding(needle: str) -> list[str]:
    """`table.column` of every stored value, in every table of the database
    (not only the models'), that contains `needle`."""
    hits = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")  # noqa: S608
            columns = [c[0] for c in cursor.description]
            hits += [
                f"{table}.{column}"
                for row in cursor.fetchall()
                for column, value in zip(columns, row, strict=True)
                if _holds(value, needle)
            ]
    return hits


def sessions_holding(needle: str) -> list[str]:
    """Sessions are stored encoded: search them decoded."""
    from django.contrib.sessions.models import Session

    return [
        f"session {s.session_key}"
        for s in Session.objects.all()
        if _holds(json.dumps(s.get_decoded(), default=str), needle)
    ]


def files_holding(needle: str, since: float) -> list[str]:
    """Files under the project (and MEDIA_ROOT, when set) written since
    `since` that contain `needle`; the database's own files are searched
    by table, above."""
    roots = [Path(settings.BASE_DIR)]
    if getattr(settings, "MEDIA_ROOT", ""):
        roots.append(Path(settings.MEDIA_ROOT))
    skip = {".git", ".venv", "node_modules", "__pycache__"}
    hits = []
    for root in roots:
        for path in _walk(root, skip):
            if "sqlite3" in path.name or path.stat().st_mtime < since:
                continue
            if needle.encode() in path.read_bytes():
                hits.append(str(path))
    return hits


def _walk(root: Path, skip: set[str]) -> Iterator[Path]:
    if not root.is_dir():
        return
    for path in root.iterdir():
        if path.name in skip or path.is_symlink():
            continue
        if path.is_dir():
            yield from _walk(path, skip)
        elif path.is_file():
            yield path


def stored_anywhere(needle: str, since: float) -> list[str]:
    return table_cells_holding(needle) + sessions_holding(needle) + files_holding(needle, since)


# -- the live server and the fake upstream ---------------------------------------------


@pytest.fixture(scope="module")
def fake_upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream(pace_ms=0).start()
    yield fake
    fake.stop()


@pytest.fixture
def live(daphne_factory, fake_upstream) -> Live:
    fake_upstream.reset()
    url = daphne_factory(
        {
            "INSPECTOR_UPSTREAMS": f"fake={fake_upstream.url}",
            "INSPECTOR_GUARD_RETRIES": "2",
            "INSPECTOR_GUARD_BACKOFF_SECONDS": "0.01",
        }
    )
    return Live(url, fake_upstream)


class Live:
    """A daphne process on the test database whose upstream `fake` is the fake."""

    def __init__(self, url: str, fake: FakeUpstream) -> None:
        self.url = url
        self.fake = fake

    def chat(self, mode: str, model: str, *, stream: bool) -> httpx.Response:
        body = {
            "model": model,
            "stream": stream,
            "user": MARK,  # personal data by default: forwarded, not stored
            "messages": [{"role": "user", "content": MARK}],
            "tools": TOOLS,
            **BODY_SECRETS,
        }
        return httpx.post(
            f"{self.url}/{mode}/fake/v1/chat/completions?{QUERY}",
            json=body,
            headers=HEADERS,
            timeout=30,
        )

    def sent_the_canary(self) -> bool:
        """The upstream did get the credentials: they are forwarded, not stored."""
        served = self.fake.served()
        return bool(served) and all(
            CANARY in r.headers.get("authorization", "")
            and r.headers.get("x-api-key") == CANARY
            and CANARY in r.headers.get("cookie", "")
            and f"key={QUERY_CANARY}" in r.path
            and r.body["tokens"] == [BODY_CANARY]
            for r in served
        )


def wait_until_closed(count: int, timeout: float = 15.0) -> None:
    """Until `count` captures exist and all are closed (the server closes them
    after answering)."""
    deadline = time.monotonic() + timeout
    while True:
        captures = list(models.Capture.objects.values_list("outcome", flat=True))
        if len(captures) >= count and models.Capture.Outcome.LIVE not in captures:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(captures)} captures, not {count} closed ones")
        time.sleep(0.05)


# -- the intakes ------------------------------------------------------------------------


def client() -> Client:
    return Client(headers=HEADERS)


def upload_form_file(_live: None) -> int:
    upload = SimpleUploadedFile("s.sse", sse_stream())
    data = {"file": upload, "title": MARK, "format": "auto", **FORM_SECRETS}
    response = client().post(f"/upload/?{QUERY}", data, headers=HEADERS)
    assert response.status_code == 302, response.content
    return 1


def upload_form_text(_live: None) -> int:
    data = {"text": sse_stream().decode(), "title": MARK, "format": "sse", **FORM_SECRETS}
    response = client().post(f"/upload/?{QUERY}", data, headers=HEADERS)
    assert response.status_code == 302, response.content
    return 1


def upload_form_har(_live: None) -> int:
    upload = SimpleUploadedFile("session.har", har_with_secrets())
    data = {"file": upload, "title": MARK, "format": "auto", **FORM_SECRETS}
    response = client().post(f"/upload/?{QUERY}", data, headers=HEADERS)
    assert response.status_code == 302, response.content
    return 1


def api_raw(_live: None) -> int:
    response = client().post(
        f"/api/captures?title={MARK}&{QUERY}",
        data=sse_stream(),
        content_type="text/event-stream",
        headers=HEADERS,
    )
    assert response.status_code == 201, response.content
    return 1


def api_multipart(_live: None) -> int:
    upload = SimpleUploadedFile("s.sse", sse_stream())
    data = {"file": upload, "title": MARK, **FORM_SECRETS}
    response = client().post(f"/api/captures?{QUERY}", data, headers=HEADERS)
    assert response.status_code == 201, response.content
    return 1


def api_har_raw(_live: None) -> int:
    response = client().post(
        f"/api/captures?title={MARK}&{QUERY}",
        data=har_with_secrets(),
        content_type="application/json",
        headers=HEADERS,
    )
    assert response.status_code == 201, response.content
    return 1


def api_har_multipart(_live: None) -> int:
    upload = SimpleUploadedFile("session.har", har_with_secrets())
    data = {"file": upload, "title": MARK, **FORM_SECRETS}
    response = client().post(f"/api/captures?{QUERY}", data, headers=HEADERS)
    assert response.status_code == 201, response.content
    return 1


def ingest_http(_live: None) -> int:
    http = client()
    options = {"title": MARK, "format": "sse", **BODY_SECRETS}
    opened = http.post(f"/api/ingest?{QUERY}", options, content_type="application/json")
    assert opened.status_code == 201, opened.content
    body = opened.json()
    appended = http.post(
        f"{body['append_url']}?{QUERY}", sse_stream(), content_type="application/octet-stream"
    )
    assert appended.status_code == 200, appended.content
    closed = http.post(f"{body['close_url']}?{QUERY}")
    assert closed.json()["outcome"] == "ok"
    return 1


def ingest_http_form(_live: None) -> int:
    """Options as form fields and query parameters (`_options` reads both)."""
    http = client()
    opened = http.post(f"/api/ingest?{QUERY}", {"title": MARK, **FORM_SECRETS})
    assert opened.status_code == 201, opened.content
    body = opened.json()
    http.post(body["append_url"], sse_stream(), content_type="text/event-stream")
    assert http.post(body["close_url"]).json()["outcome"] == "ok"
    return 1


def ingest_websocket(_live: None) -> int:
    """Headers and query string on the handshake; secret fields in `open`."""
    async_to_sync(_ingest_websocket)()
    return 1


async def _ingest_websocket() -> None:
    from inspector.asgi import application

    headers = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
    socket = WebsocketCommunicator(application, f"/ws/ingest/?{QUERY}", headers=headers)
    connected, _ = await socket.connect(timeout=5)
    assert connected
    await socket.send_json_to({"open": {"title": MARK, "format": "sse", **BODY_SECRETS}})
    assert (await socket.receive_json_from(timeout=5))["type"] == "opened"
    await socket.send_to(bytes_data=sse_stream())
    await socket.send_json_to({"close": True, **BODY_SECRETS})
    closed = await socket.receive_json_from(timeout=5)
    assert closed["type"] == "closed" and closed["outcome"] == "ok", closed
    await socket.disconnect()


def proxy_streamed(live: Live) -> int:
    response = live.chat("proxy", "ok-tool-call", stream=True)
    assert response.status_code == 200, response.text
    assert live.sent_the_canary()
    return 1


def proxy_whole(live: Live) -> int:
    response = live.chat("proxy", "ok-tool-call", stream=False)
    assert response.status_code == 200, response.text
    assert live.sent_the_canary()
    return 1


def proxy_upstream_error(live: Live) -> int:
    """The fake answers 404 (no such scenario): recorded as an error line."""
    response = live.chat("proxy", "no-such-scenario", stream=True)
    assert response.status_code == 404, response.text
    return 1


def guard_retried(live: Live) -> int:
    """Cut twice, then complete: three recorded attempts."""
    response = live.chat("guard", "flaky-twice", stream=True)
    assert response.status_code == 200, response.text
    assert [r.ended for r in live.fake.served()] == ["cut", "cut", "complete"]
    assert live.sent_the_canary()
    return 3


IN_PROCESS: list[Callable[[None], int]] = [
    upload_form_file,
    upload_form_text,
    upload_form_har,
    api_raw,
    api_multipart,
    api_har_raw,
    api_har_multipart,
    ingest_http,
    ingest_http_form,
    ingest_websocket,
]
THROUGH_DAPHNE: list[Callable[[Live], int]] = [
    proxy_streamed,
    proxy_whole,
    proxy_upstream_error,
    guard_retried,
]


def assert_stored_without_the_canary(count: int, since: float) -> None:
    wait_until_closed(count)
    assert stored_anywhere(SECRET, since) == []
    # The search does see what the intake stored.
    assert table_cells_holding(MARK), "the intake stored nothing to search"


@pytest.mark.parametrize("intake", IN_PROCESS, ids=lambda f: f.__name__)
def test_no_canary_is_stored_in_process(intake):
    since = time.time() - 1
    count = intake(None)
    assert_stored_without_the_canary(count, since)


@pytest.mark.parametrize("intake", THROUGH_DAPHNE, ids=lambda f: f.__name__)
def test_no_canary_is_stored_through_the_server(intake, live):
    since = time.time() - 1
    count = intake(live)
    assert_stored_without_the_canary(count, since)


def test_the_search_finds_a_canary_wherever_it_is_stored(tmp_path, settings):
    """The search itself: a canary in a capture's columns, in a session, in
    a file under MEDIA_ROOT."""
    since = time.time() - 1
    models.Capture.objects.create(
        title="t", outcome="ok", raw=f"x{CANARY}y".encode(), request_json=f'{{"k":"{CANARY}"}}'
    )
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session["note"] = CANARY
    session.save()
    settings.MEDIA_ROOT = str(tmp_path)
    (tmp_path / "f.bin").write_bytes(b"\x00" + CANARY.encode())
    hits = stored_anywhere(CANARY, since)
    assert "captures_capture.raw" in hits and "captures_capture.request_json" in hits
    assert any(h.startswith("session ") for h in hits)
    assert str(tmp_path / "f.bin") in hits
