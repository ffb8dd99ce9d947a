"""Issue 12, item 5: one upload can't hold the server.  A HAR's entries and an upload's
captures are capped (413 naming the setting, nothing stored); a big upload is stored in
short write transactions, never one for the whole upload; an upload whose client goes
away stops and keeps nothing (the API's upload view is async: Django's ASGI handler
cancels it on disconnect)."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.db import connection
from django.test import Client

from inspector.captures import intake, models
from inspector.captures.intake import plan_upload, store_upload, upload_steps
from inspector.captures.uploads import large_upload_slot

URL = "/api/captures"


def chunk(text: str) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def text_stream(frames: int) -> bytes:
    return b"".join(chunk(f"w{n} ") for n in range(frames)) + b"data: [DONE]\n\n"


def har(streams: int, others: int = 0) -> bytes:
    """A HAR of `streams` event-stream entries and `others` entries of other kinds."""
    stream = {"mimeType": "text/event-stream", "text": text_stream(2).decode()}
    entry = {"request": {"url": "https://api.test/v1/chat/completions"}}
    entries = [{**entry, "response": {"status": 200, "content": stream}}] * streams
    image = {"mimeType": "image/png", "text": ""}
    entries += [{**entry, "response": {"status": 200, "content": image}}] * others
    return orjson.dumps({"log": {"version": "1.2", "entries": entries}})


def post(client: Client, data: bytes, name: str = "x.har"):
    return client.post(f"{URL}?title={name}", data, content_type="application/octet-stream")


@pytest.mark.django_db
def test_a_har_over_the_entry_limit_is_413_naming_it_and_nothing_is_stored(client, settings):
    settings.INSPECTOR_MAX_HAR_ENTRIES = 10
    response = client.post(URL, har(2, others=9), content_type="application/json")
    assert response.status_code == 413
    error = response.json()["error"]
    assert "11 entries" in error and "INSPECTOR_MAX_HAR_ENTRIES" in error and "10" in error
    assert models.Capture.objects.count() == 0
    page = client.post("/upload/", {"text": har(2, others=9).decode(), "format": "har"})
    assert page.status_code == 413 and models.Capture.objects.count() == 0


@pytest.mark.django_db
def test_an_upload_over_the_capture_limit_is_413_naming_it_and_nothing_is_stored(client, settings):
    settings.INSPECTOR_MAX_CAPTURES_PER_UPLOAD = 3
    response = client.post(URL, har(4), content_type="application/json")
    assert response.status_code == 413
    error = response.json()["error"]
    assert "4 event streams" in error and "INSPECTOR_MAX_CAPTURES_PER_UPLOAD" in error
    assert models.Capture.objects.count() == 0
    assert client.post(URL, har(3), content_type="application/json").status_code == 201
    assert models.Capture.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_big_upload_is_stored_in_short_transactions(settings):
    """Between two steps no transaction is open (another writer gets the database), and
    each step writes at most a batch of frames (plus what one 16 KB slice completes)."""
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 100
    data = text_stream(2000)
    stored: list[models.Capture] = []
    steps = upload_steps(plan_upload(data, name="big.sse"), stored)
    counts = []
    for _ in steps:
        assert not connection.in_atomic_block
        counts.append(models.Frame.objects.count())
        # another writer is never kept waiting for the whole upload
        models.Capture.objects.create(input_format="sse", stream_format="sse", outcome="ok")
    grown = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert len(counts) > 10 and max(grown) <= 100 + 16 * 1024 // len(chunk("w0 "))
    (capture,) = stored
    capture.refresh_from_db()
    assert (capture.outcome, capture.frame_count, capture.frames.count()) == ("ok", 2001, 2001)
    assert bytes(capture.raw) == data and capture.finished is None


@pytest.mark.django_db(transaction=True)
def test_a_failed_upload_keeps_nothing_of_what_it_stored(monkeypatch):
    calls = []

    def fail_on_the_third_stream(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return original(self, *args, **kwargs)

    original = intake.CaptureWriter.finish
    monkeypatch.setattr(intake.CaptureWriter, "finish", fail_on_the_third_stream)
    with pytest.raises(RuntimeError):
        store_upload(har(4), name="x.har")
    assert models.Capture.objects.count() == 0 and models.Frame.objects.count() == 0


def asgi_post(data: bytes) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": URL,
        "raw_path": URL.encode(),
        "query_string": b"title=big.sse",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"text/event-stream"),
            (b"content-length", str(len(data)).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }


async def post_and_leave(monkeypatch, scope: dict, body: bytes) -> int:
    """POST `body` to the ASGI app and disconnect once three upload steps
    ran; how many steps ran in all."""
    started = asyncio.Event()
    loop = asyncio.get_running_loop()
    steps_run = []

    def counted(steps):
        steps_run.append(1)
        if len(steps_run) == 3:
            loop.call_soon_threadsafe(started.set)
        return advance(steps)

    advance = intake.advance
    monkeypatch.setattr(intake, "advance", counted)
    messages = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def receive():
        message = next(messages, None)
        if message is not None:
            return message
        await started.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        pass

    await asyncio.wait_for(get_asgi_application()(scope, receive, send), 30)
    return len(steps_run)


async def nothing_stored() -> bool:
    captures = await sync_to_async(models.Capture.objects.count)()
    return captures == 0 and await sync_to_async(models.Frame.objects.count)() == 0


@pytest.mark.django_db(transaction=True)
async def test_an_upload_whose_client_goes_away_stops_and_keeps_nothing(monkeypatch, settings):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 50
    data = text_stream(5000)  # about 100 steps
    steps = await post_and_leave(monkeypatch, asgi_post(data), data)
    assert 3 <= steps < 20  # stopped soon after the client left
    assert await nothing_stored()


@pytest.mark.django_db
def test_one_large_upload_too_many_is_503_with_retry_after(client, settings):
    """Issue 12 item 6: large uploads are stored at most INSPECTOR_MAX_LARGE_UPLOADS at a
    time per process; one more is refused at once (it would hold its body in memory
    while it waits), smaller ones go on."""
    settings.INSPECTOR_LARGE_UPLOAD_BYTES = 1000
    settings.INSPECTOR_MAX_LARGE_UPLOADS = 1
    large, small = text_stream(40), text_stream(2)
    assert len(large) >= 1000 > len(small)
    with large_upload_slot(len(large)):  # another large upload is being stored
        busy = client.post(URL, large, content_type="text/event-stream")
        assert busy.status_code == 503 and busy["Retry-After"] == "5"
        assert "INSPECTOR_MAX_LARGE_UPLOADS" in busy.json()["error"]
        assert models.Capture.objects.count() == 0
        assert client.post(URL, small, content_type="text/event-stream").status_code == 201
    assert client.post(URL, large, content_type="text/event-stream").status_code == 201
    assert models.Capture.objects.count() == 2


@pytest.mark.django_db
def test_the_upload_page_takes_the_same_turns(client, settings):
    """The upload form holds the same slots as the API: one more large upload is
    a 503 page with Retry-After, and nothing is stored."""
    settings.INSPECTOR_LARGE_UPLOAD_BYTES = 1000
    settings.INSPECTOR_MAX_LARGE_UPLOADS = 1
    large = text_stream(40)
    form = {"text": large.decode(), "format": "sse"}
    with large_upload_slot(len(large)):
        busy = client.post("/upload/", form)
        assert busy.status_code == 503 and busy["Retry-After"] == "5"
        assert "INSPECTOR_MAX_LARGE_UPLOADS" in busy.content.decode()
        assert models.Capture.objects.count() == 0
    assert client.post("/upload/", form).status_code == 302
    assert models.Capture.objects.count() == 1


@pytest.mark.django_db
def test_an_upload_being_stored_is_never_taken_for_a_stale_live_capture(settings):
    """An upload is live while it is stored, in steps, for as long as it takes; its
    frames have no arrival time, so the stale-capture rule would close it mid-way."""
    from datetime import timedelta

    from django.utils import timezone

    from inspector.live.recovery import recover_interrupted

    stored: list[models.Capture] = []
    steps = upload_steps(plan_upload(text_stream(10), name="x.sse"), stored)
    next(steps)
    next(steps)
    later = timezone.now() + timedelta(seconds=settings.INSPECTOR_LIVE_STALE_SECONDS + 60)
    assert recover_interrupted(now=later) == []
    for _ in steps:
        pass
    (capture,) = stored
    capture.refresh_from_db()
    assert capture.outcome == "ok" and not capture.interrupted


@pytest.mark.django_db(transaction=True)
async def test_a_page_upload_whose_client_goes_away_stops_and_keeps_nothing(monkeypatch, settings):
    """The upload page, as the API: an async view that Django cancels when its
    client disconnects, so the upload stops after the step in hand and deletes
    what it had stored."""
    from urllib.parse import urlencode

    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 50
    secret = "s" * 32  # a CSRF secret, sent as the cookie and as the form's token
    body = urlencode(
        {"text": text_stream(5000).decode(), "format": "sse", "csrfmiddlewaretoken": secret}
    ).encode()
    scope = asgi_post(body)
    scope.update(path="/upload/", raw_path=b"/upload/", query_string=b"")
    scope["headers"] = [
        (b"host", b"testserver"),
        (b"content-type", b"application/x-www-form-urlencoded"),
        (b"content-length", str(len(body)).encode()),
        (b"cookie", f"csrftoken={secret}".encode()),
        (b"referer", b"http://testserver/upload/"),
    ]
    steps = await post_and_leave(monkeypatch, scope, body)
    assert 3 <= steps < 20  # stopped soon after the client left
    assert await nothing_stored()
