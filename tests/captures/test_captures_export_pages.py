"""Export as a regression test: every finished capture links its stream as
`NAME.sse`, its expectation as `NAME.expect.json` (the conformance cases'
shape) and both as `NAME.zip`, NAME made plain from the title."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from django.urls import reverse
from page_helpers import demo, html

from inspector.captures.minimizing import export_files
from inspector.captures.models import Capture
from inspector.captures.pages.export import export_name
from inspector.captures.store import store_stream
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db

OK_LINE = b'{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}'


def export_url(capture: Capture, kind: str) -> str:
    return reverse("capture-export", args=[capture.slug, kind])


def test_every_capture_page_links_the_case(client):
    capture = demo("invalid_arguments.sse", "Bad SQL: run_query")
    page = html(client.get(capture.get_absolute_url()))
    links = re.search(r'<p class="export" id="export">.*?</p>', page, re.S).group(0)
    assert "Regression test:" in links
    assert f'<a href="{export_url(capture, "sse")}" download data-export="sse">' in links
    assert "Bad_SQL_run_query.sse</a>" in links
    assert f'<a href="{export_url(capture, "expect.json")}" download' in links
    assert "Bad_SQL_run_query.expect.json</a>" in links
    assert "Bad_SQL_run_query.zip" in links


def test_the_files_are_the_stream_and_its_expectation(client):
    capture = demo("invalid_arguments.sse", "Bad SQL: run_query")
    expected = export_files(capture, name="Bad_SQL_run_query")

    stream = client.get(export_url(capture, "sse"))
    assert stream.status_code == 200
    assert stream["Content-Disposition"] == 'attachment; filename="Bad_SQL_run_query.sse"'
    assert stream.content == bytes(capture.raw) == expected["Bad_SQL_run_query.sse"]

    expect = client.get(export_url(capture, "expect.json"))
    assert expect["Content-Type"] == "application/json"
    assert expect["Content-Disposition"] == ('attachment; filename="Bad_SQL_run_query.expect.json"')
    case = json.loads(expect.content)
    assert set(case) == {"about", "expect"}
    assert case["expect"]["outcome"] == "refused"
    assert case["expect"]["refusal"]["code"] == "INVALID_ARGUMENTS"
    assert "Bad SQL: run_query" in case["about"]

    archive = client.get(export_url(capture, "zip"))
    assert archive["Content-Type"] == "application/zip"
    assert archive["Content-Disposition"] == 'attachment; filename="Bad_SQL_run_query.zip"'
    with zipfile.ZipFile(io.BytesIO(archive.content)) as opened:
        assert sorted(opened.namelist()) == [
            "Bad_SQL_run_query.expect.json",
            "Bad_SQL_run_query.sse",
        ]
        assert opened.read("Bad_SQL_run_query.sse") == stream.content
        assert opened.read("Bad_SQL_run_query.expect.json") == expect.content


def test_an_ok_capture_and_a_jsonl_one_export_as_sse(client):
    capture = store_stream(OK_LINE + b"\n[DONE]\n", stream_format="jsonl", title="chat")
    stream = client.get(export_url(capture, "sse"))
    assert stream.content == b"data: " + OK_LINE + b"\n\ndata: [DONE]\n\n"
    case = json.loads(client.get(export_url(capture, "expect.json")).content)
    assert case["expect"]["outcome"] == "ok" and case["expect"]["text"] == "hi"


def test_the_lenient_expectation(client):
    capture = demo("ambiguous_continuation.sse", "ambiguous")
    case = json.loads(client.get(export_url(capture, "expect.json") + "?policy=lenient").content)
    assert case["argv"] == ["--policy", "lenient"]
    assert case["expect"]["outcome"] == "ok"
    assert client.get(export_url(capture, "sse") + "?policy=nope").status_code == 404


@pytest.mark.parametrize(
    "title, name",
    [
        ('"; filename="evil.sh', "filename_evil_sh"),
        ("../../etc/passwd", "etc_passwd"),
        ("<script>alert(1)</script>", "script_alert_1_script"),
        ("Übung — 日本", "bung"),
        ("", None),
        ("...", None),
    ],
)
def test_the_name_is_plain(client, title, name):
    capture = demo("identity_conflict.sse", title)
    expected = name or "capture-" + capture.slug
    assert export_name(capture) == expected
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", expected)
    response = client.get(export_url(capture, "sse"))
    assert response["Content-Disposition"] == f'attachment; filename="{expected}.sse"'
    assert "<script>" not in html(client.get(capture.get_absolute_url())).split('id="export"')[1]


def test_long_titles_make_names_of_80_characters(client):
    capture = demo("identity_conflict.sse", "x" * 300)
    assert export_name(capture) == "x" * 80


def test_a_capture_still_recorded_has_no_export(client):
    live = LiveCapture.open(stream_format="sse", title="in progress")
    page = html(client.get(reverse("capture", args=[live.slug])))
    assert 'id="export"' not in page
    response = client.get(reverse("capture-export", args=[live.slug, "sse"]))
    assert response.status_code == 409


def test_unknown_kind_and_capture_are_404(client):
    capture = demo("identity_conflict.sse", "x")
    assert client.get(export_url(capture, "tar")).status_code == 404
    assert client.get(reverse("capture-export", args=["nope", "sse"])).status_code == 404


def test_an_export_reads_one_row(client, django_assert_max_num_queries):
    capture = demo("identity_conflict.sse", "x")
    for kind in ("sse", "expect.json", "zip"):
        with django_assert_max_num_queries(1):
            assert client.get(export_url(capture, kind)).status_code == 200
