"""One big upload grows the server by at most 4x its size (issue 12 item 6),
through daphne as the README starts it: the upload page's multipart form and
the API's raw body given no title.  (Twisted under daphne parsed every form
body whole for nothing: 9.8x; the title written after the raw bytes made
SQLite build the row again: 4.3x; `inspector/daphne_requests.py`,
`store.close_capture`.)  Fuller figures: bench/upload_memory.py."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import orjson
import pytest
from hardening_load import rss_kb

from inspector.captures import models

FRAMES = 150_000
LIMIT = 4.0


def _stream(frames: int) -> bytes:
    chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "w "}}]}
    return (b"data: " + orjson.dumps(chunk) + b"\n\n") * frames + b"data: [DONE]\n\n"


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


def _form_upload(client: httpx.Client, data: bytes) -> httpx.Response:
    page = client.get("/upload/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    files = {"file": ("stream.sse", data, "text/event-stream")}
    fields = {"csrfmiddlewaretoken": token, "format": "auto"}
    return client.post("/upload/", data=fields, files=files)


def _api_upload(client: httpx.Client, data: bytes) -> httpx.Response:
    return client.post("/api/captures", content=data)


@pytest.mark.parametrize("send", [_form_upload, _api_upload], ids=["form", "api"])
def test_one_upload_grows_the_server_by_at_most_four_times_its_size(
    send, daphne_process, transactional_db
):
    # DEBUG off, as in production: DEBUG keeps every query, the upload in it.
    server = daphne_process({"INSPECTOR_DEBUG": "0", "INSPECTOR_MAX_UPLOAD_BYTES": str(2**26)})
    data = _stream(FRAMES)
    with httpx.Client(base_url=server.url, timeout=120) as client:
        assert send(client, _stream(50)).status_code in (201, 302)  # warm up
        _reset_peak(server.proc.pid)
        before = rss_kb(server.proc.pid)["VmRSS"]
        answer = send(client, data)
        growth = (rss_kb(server.proc.pid)["VmHWM"] - before) * 1024
    assert answer.status_code in (201, 302), answer.text[:300]
    stored = models.Capture.objects.filter(byte_size=len(data)).get()
    assert stored.frame_count == FRAMES + 1
    assert growth <= LIMIT * len(data), f"{growth / len(data):.2f}x the upload"


@pytest.mark.parametrize(
    "content_type",
    ["multipart/form-data; boundary=X", "multipart/form-data", "multipart/form-data; boundary="],
)
def test_a_malformed_form_body_is_the_apis_clean_400(content_type, daphne_url, transactional_db):
    """Django's parser reads form bodies now, not Twisted's (which answered
    a bare 400 of its own): the API says what is wrong, in JSON."""
    body = b'--X\r\nContent-Disposition: form-data; name="file"; filename="a.sse"\r\n\r\ndata: {}'
    answer = httpx.post(
        daphne_url + "/api/captures", content=body, headers={"Content-Type": content_type}
    )
    assert answer.status_code == 400
    assert "upload" in answer.json()["error"] or "multipart" in answer.json()["error"]
    assert not models.Capture.objects.exists()
