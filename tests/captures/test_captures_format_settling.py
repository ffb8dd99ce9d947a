"""The same bytes get the same answer from every intake: the upload form, the
API (raw body, or a multipart file under any name) and the command line.
Bytes that hold no stream are a 400 (exit 2) everywhere and are never stored
as a 0-frame capture; a format that reads no frame gives way to one that does
(JSON Lines saved as `.txt` or `.sse`)."""

from __future__ import annotations

import pytest
from command_line import manage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from inspector.assembly import UnreadableInput, settle_format
from inspector.captures.models import Capture

pytestmark = pytest.mark.django_db

LINE = b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n'
NO_STREAM = [b"aaaa", b"hello world\n", b"\x00\x01binary"]
NAMES = ["capture.sse", "capture.txt", "capture.jsonl", "capture.json", "upload.bin"]


@pytest.mark.parametrize("data", NO_STREAM)
@pytest.mark.parametrize("name", NAMES)
def test_bytes_without_a_stream_are_refused_by_every_intake(data, name, tmp_path):
    client = Client()
    raw = client.post("/api/captures", data, content_type="application/octet-stream")
    multipart = client.post("/api/captures", {"file": SimpleUploadedFile(name, data)})
    form = client.post("/upload/", {"file": SimpleUploadedFile(name, data), "format": "auto"})
    path = tmp_path / name
    path.write_bytes(data)
    command = manage("assemble", str(path))
    assert (raw.status_code, multipart.status_code, form.status_code) == (400, 400, 400)
    assert command.returncode == 2 and command.stdout == b""
    assert Capture.objects.count() == 0


@pytest.mark.parametrize("name", ["vercel.chunks.txt", "stream.sse", "stream.jsonl", None])
def test_json_lines_under_any_name_read_as_json_lines(name, tmp_path):
    data = LINE * 3
    assert settle_format(name, data) == "jsonl"
    upload = SimpleUploadedFile(name or "upload", data)
    answer = Client().post("/api/captures", {"file": upload}).json()
    assert answer["outcome"] == "ok"
    assert Capture.objects.get(slug=answer["slug"]).frame_count == 3


def test_a_stream_format_that_reads_frames_is_kept():
    sse = b"data: " + LINE + b"\n"
    assert settle_format("x.txt", sse) == "sse"
    assert settle_format(None, b"data: [1, 2]\n\n") == "sse"  # a frame, if an invalid one
    with pytest.raises(UnreadableInput, match="no stream in these bytes"):
        settle_format("x.sse", b"aaaa")
