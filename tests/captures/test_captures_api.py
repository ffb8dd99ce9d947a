"""The JSON API: POST /api/captures, GET /api/captures/<slug>, GET /api/captures."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from capture_streams import DONE, chunk, jsonl, sse, tool
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client, RequestFactory

from inspector.assembly import assemble
from inspector.assembly.jsontext import dumps
from inspector.captures import api, fast_rows, models
from inspector.captures.api import capture_path
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

URL = "/api/captures"
CANARY = "sk-CANARY-7f3a9c1e-do-not-store"
CAPTURE_MODELS = (models.Capture, models.Frame, models.Assembly, models.Call, models.Fragment)


# -- small fixture streams ----------------------------------------------------


OK_CHUNKS = (
    chunk(tool(0, "call_A", "read", '{"path":')),
    chunk(tool(0, args=' "/a"}')),
    chunk(finish="tool_calls"),
)
OK_SSE = sse(OK_CHUNKS[0], ": keep-alive\n\n", *OK_CHUNKS[1:], DONE)
OK_JSONL = jsonl(*OK_CHUNKS, "[DONE]")
# Cut off in the middle of the arguments: refused INCOMPLETE_STREAM.
CUT_SSE = sse(chunk(tool(0, "call_B", "write", '{"x":')))
# Two unsettled calls hold index 0 and an id-less fragment arrives.
AMBIGUOUS_SSE = sse(
    chunk(tool(0, "call_A", "read", '{"p":')),
    chunk(tool(0, "call_B", "write", '{"q":')),
    chunk(tool(0, args="1}")),
    chunk(tool(0, "call_A", args="2}")),
    chunk(finish="tool_calls"),
    DONE,
)


def har_entry(url: str, body: str, mime: str = "text/event-stream", *, base64_body=False):
    content: dict[str, Any] = {"size": len(body), "mimeType": mime}
    if base64_body:
        content["text"] = base64.b64encode(body.encode()).decode()
        content["encoding"] = "base64"
    else:
        content["text"] = body
    return {
        "startedDateTime": "2026-01-02T03:04:05.000Z",
        "time": 12,
        "request": {
            "method": "POST",
            "url": url,
            "httpVersion": "HTTP/1.1",
            "headers": [
                {"name": "Authorization", "value": f"Bearer {CANARY}"},
                {"name": "Cookie", "value": f"session={CANARY}"},
                {"name": "x-api-key", "value": CANARY},
                {"name": "Content-Type", "value": "application/json"},
            ],
            "cookies": [{"name": "session", "value": CANARY}],
            "queryString": [{"name": "key", "value": CANARY}],
            "postData": {"mimeType": "application/json", "text": '{"model":"gpt-test"}'},
        },
        "response": {
            "status": 200,
            "statusText": "OK",
            "headers": [{"name": "Content-Type", "value": mime}],
            "cookies": [],
            "content": content,
        },
    }


def har(*entries: dict) -> bytes:
    return orjson.dumps({"log": {"version": "1.2", "creator": {"name": "t"}, "entries": entries}})


def two_stream_har() -> bytes:
    secret_page = orjson.dumps({"token": CANARY, "choices": []}).decode()
    return har(
        har_entry(
            f"https://api.example.com/v1/models?key={CANARY}", secret_page, "application/json"
        ),
        har_entry(
            f"https://user:{CANARY}@api.example.com:8443/v1/chat/completions?key={CANARY}#{CANARY}",
            OK_SSE.decode(),
        ),
        har_entry(
            f"https://api.example.com/v1/chat/completions?api_key={CANARY}",
            CUT_SSE.decode(),
            "text/event-stream; charset=utf-8",
            base64_body=True,
        ),
    )


def bad_base64_har() -> bytes:
    """One event-stream entry whose base64 body is not base64."""
    entry = har_entry("https://api.example.com/v1/chat/completions", "")
    entry["response"]["content"] |= {"text": "!!!", "encoding": "base64"}
    return har(entry)


BAD_BASE64_HAR = bad_base64_har()

# -- helpers --------------------------------------------------------------------


def command_output(capsysbinary, tmp_path, data: bytes, name: str, *args: str) -> bytes:
    """What `python manage.py assemble` prints for `data` saved as `name`."""
    path = tmp_path / name
    path.write_bytes(data)
    capsysbinary.readouterr()
    try:
        call_command("assemble", str(path), *args)
    except SystemExit as exit_:  # 1: refused
        assert exit_.code == 1
    out = capsysbinary.readouterr().out
    assert out.endswith(b"\n")
    return out[:-1]


def row_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in CAPTURE_MODELS}


def assert_nothing_stored() -> None:
    assert row_counts() == {model.__name__: 0 for model in CAPTURE_MODELS}


def stored_text_holding(needle: str) -> list[str]:
    """Every (model, column) of every table whose stored value contains `needle`."""
    hits = []
    for model in apps.get_models():
        for row in model.objects.all().values():
            for column, value in row.items():
                if isinstance(value, memoryview):
                    value = bytes(value)
                if isinstance(value, bytes):
                    found = needle.encode() in value
                elif isinstance(value, str):
                    found = needle in value
                else:
                    found = needle in dumps(value).decode() if value is not None else False
                if found:
                    hits.append(f"{model.__name__}.{column}")
    return hits


def post_raw(client: Client, data: bytes, query: str = "", content_type="text/event-stream"):
    return client.post(URL + query, data=data, content_type=content_type)


def detail(client: Client, slug: str, suffix: str = ""):
    response = client.get(f"{URL}/{slug}{suffix}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response


def result_bytes(response) -> bytes:
    """The raw text under "result", cut out of the response body."""
    body = response.content
    marker = b',"result":'
    assert body.count(marker) >= 1
    start = body.index(marker) + len(marker)
    assert body.endswith(b"}")
    return body[start:-1]


# -- POST -----------------------------------------------------------------------


def test_raw_sse_upload_answers_201_and_the_result_the_command_prints(
    client, capsysbinary, tmp_path
):
    response = post_raw(client, OK_SSE, "?title=first+try")
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"slug", "url", "outcome", "refusal"}
    assert body["outcome"] == "ok"
    assert body["refusal"] is None
    assert body["url"] == f"http://testserver{api.capture_path(body['slug'])}"

    printed = command_output(capsysbinary, tmp_path, OK_SSE, "stream.sse")
    got = detail(client, body["slug"])
    document = got.json()
    assert result_bytes(got) == printed  # byte for byte
    assert document["result"] == orjson.loads(printed)  # and as JSON
    assert printed == dumps(assemble(OK_SSE, fmt="sse").to_dict())
    assert document["result"]["calls"][0]["arguments"] == {"path": "/a"}
    assert document["title"] == "first try"
    assert document["slug"] == body["slug"]
    assert document["input_format"] == document["stream_format"] == "sse"
    assert document["model"] == "gpt-test"
    assert document["byte_size"] == len(OK_SSE)
    assert document["frame_count"] == 5
    assert document["outcome"] == "ok"
    assert document["refusal_code"] == ""
    assert document["lenient_outcome"] == "ok"
    assert document["source"] == "upload"
    assert document["har_upload"] == ""
    assert document["har_entry"] is None
    assert document["created"][:4].isdigit() and "T" in document["created"]


def test_a_refused_upload_carries_the_strict_refusal_object(client, capsysbinary, tmp_path):
    response = post_raw(client, CUT_SSE, content_type="application/octet-stream")
    assert response.status_code == 201
    body = response.json()
    assert body["outcome"] == "refused"
    printed = command_output(capsysbinary, tmp_path, CUT_SSE, "cut.sse")
    expected = orjson.loads(printed)["refusal"]
    assert expected["code"] == "INCOMPLETE_STREAM"
    assert body["refusal"] == expected
    assert list(body["refusal"]) == list(expected)  # same keys, same order
    got = detail(client, body["slug"])
    assert result_bytes(got) == printed
    assert got.json()["refusal_code"] == "INCOMPLETE_STREAM"


def test_curl_style_form_encoded_body_is_taken_raw(client):
    # `curl --data-binary @f` without -H sends application/x-www-form-urlencoded
    response = post_raw(client, OK_SSE, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 201
    capture = models.Capture.objects.get()
    assert bytes(capture.raw) == OK_SSE


def test_multipart_upload_uses_the_file_name_and_form_fields(client, capsysbinary, tmp_path):
    data = OK_JSONL
    upload = SimpleUploadedFile("session.ndjson", data, content_type="application/octet-stream")
    response = client.post(URL, {"file": upload, "title": "from a form"})
    assert response.status_code == 201, response.content
    slug = response.json()["slug"]
    got = detail(client, slug)
    document = got.json()
    assert document["input_format"] == "jsonl"
    assert document["title"] == "from a form"
    assert result_bytes(got) == command_output(capsysbinary, tmp_path, data, "session.ndjson")
    assert document["result"]["outcome"] == "ok"


def test_multipart_title_defaults_to_the_file_name(client):
    upload = SimpleUploadedFile("trace.sse", OK_SSE)
    response = client.post(URL, {"file": upload})
    assert response.status_code == 201
    assert models.Capture.objects.get().title == "trace.sse"


def test_raw_jsonl_upload_is_detected_by_its_first_bytes(client, capsysbinary, tmp_path):
    data = OK_JSONL
    response = post_raw(client, data, content_type="application/x-ndjson")
    assert response.status_code == 201
    got = detail(client, response.json()["slug"])
    assert got.json()["stream_format"] == "jsonl"
    assert result_bytes(got) == command_output(capsysbinary, tmp_path, data, "s.jsonl")


def test_format_from_the_query_or_the_form_overrides_detection(client):
    # Read as JSON Lines, SSE text is one broken line: refused, but stored.
    response = post_raw(client, OK_SSE, "?format=jsonl")
    assert response.status_code == 201
    assert models.Capture.objects.get().input_format == "jsonl"
    upload = SimpleUploadedFile("x.sse", OK_JSONL)
    response = client.post(URL, {"file": upload, "format": "JSONL"})
    assert response.status_code == 201
    assert response.json()["outcome"] == "ok"


def test_har_with_two_streams_makes_two_linked_captures_and_stores_no_secret(
    client, capsysbinary, tmp_path
):
    data = two_stream_har()
    response = client.post(
        URL, {"file": SimpleUploadedFile("session.har", data), "title": "browser"}
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert len(body["captures"]) == 2
    first, second = body["captures"]
    assert {key: body[key] for key in ("slug", "url", "outcome", "refusal")} == first
    assert set(first) == set(second) == {"slug", "url", "outcome", "refusal"}
    assert first["outcome"] == "ok" and first["refusal"] is None
    assert second["outcome"] == "refused"
    assert second["refusal"]["code"] == "INCOMPLETE_STREAM"

    captures = list(models.Capture.objects.order_by("har_entry"))
    assert [c.slug for c in captures] == [first["slug"], second["slug"]]
    assert captures[0].har_upload and captures[0].har_upload == captures[1].har_upload
    assert [c.har_entry for c in captures] == [0, 1]
    assert [bytes(c.raw) for c in captures] == [OK_SSE, CUT_SSE]
    assert captures[0].source_url == "https://api.example.com:8443/v1/chat/completions"
    assert captures[0].provider == "api.example.com"
    assert captures[0].title == "browser [stream 1 of 2]"
    assert stored_text_holding(CANARY) == []
    # the search does see what is stored
    assert {"Capture.raw", "Frame.raw", "Assembly.result_json"} <= set(
        stored_text_holding('"call_A"')
    )
    assert "Call.arguments_text" in stored_text_holding('"/a"')

    for number, entry in enumerate((first, second)):
        got = detail(client, entry["slug"])
        assert got.json()["input_format"] == "har"
        assert got.json()["har_upload"] == captures[0].har_upload
        printed = command_output(
            capsysbinary, tmp_path, data, "session.har", "--entry", str(number)
        )
        assert result_bytes(got) == printed

    listed = client.get(URL, {"har_upload": captures[0].har_upload}).json()
    assert listed["count"] == 2
    # `group`, the filter's first name, as the README promises
    assert client.get(URL, {"group": captures[0].har_upload}).json()["count"] == 2


def test_har_with_one_stream_has_no_har_upload_and_no_captures_list(client):
    data = har(har_entry("https://api.example.com/v1/chat/completions", OK_SSE.decode()))
    response = post_raw(client, data, content_type="application/json")
    assert response.status_code == 201
    assert "captures" not in response.json()
    capture = models.Capture.objects.get()
    assert capture.har_upload == ""
    assert capture.har_entry == 0
    assert capture.input_format == "har"


def test_a_har_entrys_start_and_status_are_in_the_metadata_and_on_the_page(client):
    data = har(har_entry("https://api.example.com/v1/chat/completions", OK_SSE.decode()))
    slug = post_raw(client, data, content_type="application/json").json()["slug"]
    meta = detail(client, slug).json()
    assert meta["started_at"] == "2026-01-02T03:04:05+00:00"
    assert meta["http_status"] == 200
    assert client.get(URL).json()["results"][0]["started_at"] == meta["started_at"]
    page = client.get(capture_path(slug)).content.decode()
    assert 'datetime="2026-01-02T03:04:05+00:00"' in page and "2026-01-02 03:04:05 UTC" in page
    assert "<dt>HTTP status</dt><dd data-http-status>200</dd>" in page


def test_a_raw_upload_has_no_start_or_status(client):
    slug = post_raw(client, OK_SSE, content_type="text/event-stream").json()["slug"]
    meta = detail(client, slug).json()
    assert meta["started_at"] is None and meta["http_status"] is None
    assert "data-started-at" not in client.get(capture_path(slug)).content.decode()


@pytest.mark.parametrize(
    ("data", "query", "reason"),
    [
        (two_stream_har()[:-40], "?format=har", "HAR is not valid JSON"),
        (b"data: not a har\n\n", "?format=har", "HAR is not valid JSON"),
        (b'{"log": {"entries": "none"}}', "", "HAR has no log.entries list"),
        (
            har(har_entry("https://x.example/", '{"a": 1}', "application/json")),
            "",
            "HAR holds no text/event-stream response",
        ),
        (b"\x00\x01binary", "", "can't tell the format"),
        (OK_SSE, "?format=xml", "unknown format 'xml'"),
        (BAD_BASE64_HAR, "", "HAR entry 0: base64 body does not decode"),
    ],
    ids=[
        "broken-har",
        "not-json-har",
        "no-entries",
        "no-event-stream",
        "unknown",
        "bad-format",
        "bad-base64",
    ],
)
def test_bad_input_is_a_400_with_the_reason_and_nothing_stored(client, data, query, reason):
    response = post_raw(client, data, query, content_type="application/octet-stream")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert reason in response.json()["error"]
    assert_nothing_stored()


def test_bad_har_uploaded_as_a_file_is_a_400(client):
    upload = SimpleUploadedFile("broken.har", b'{"log": {"entries": [')
    response = client.post(URL, {"file": upload})
    assert response.status_code == 400
    assert "HAR is not valid JSON" in response.json()["error"]
    assert_nothing_stored()


def test_an_empty_upload_is_a_400(client):
    assert "empty" in post_raw(client, b"").json()["error"]
    response = client.post(URL, {"file": SimpleUploadedFile("e.sse", b"")})
    assert response.status_code == 400
    assert "empty" in response.json()["error"]
    assert_nothing_stored()


def test_upload_through_the_asgi_handler(async_client):
    """Daphne serves ASGI: the body is read from the ASGI request the same way."""
    from asgiref.sync import async_to_sync

    response = async_to_sync(async_client.post)(URL, data=OK_SSE, content_type="text/plain")
    assert response.status_code == 201
    assert bytes(models.Capture.objects.get().raw) == OK_SSE


def test_multipart_without_a_file_field_is_a_400(client):
    response = client.post(URL, {"title": "no file"})
    assert response.status_code == 400
    assert "'file'" in response.json()["error"]
    assert_nothing_stored()


def test_a_broken_multipart_body_is_a_400(client):
    response = client.post(
        URL,
        data=b'--b\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n',
        content_type="multipart/form-data",  # no boundary
    )
    assert response.status_code == 400
    assert "multipart" in response.json()["error"]
    assert_nothing_stored()


def test_over_the_limit_raw_body_is_a_413_and_nothing_stored(client, settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = len(OK_SSE) - 1
    response = post_raw(client, OK_SSE)
    assert response.status_code == 413
    assert str(len(OK_SSE) - 1) in response.json()["error"]
    assert_nothing_stored()
    settings.INSPECTOR_MAX_UPLOAD_BYTES = len(OK_SSE)
    assert post_raw(client, OK_SSE).status_code == 201


def test_over_the_limit_file_is_a_413_and_nothing_stored(client, settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = 100
    upload = SimpleUploadedFile("big.sse", OK_SSE)
    response = client.post(URL, {"file": upload})
    assert response.status_code == 413
    assert "limit is 100" in response.json()["error"]
    assert_nothing_stored()


def test_an_over_the_limit_har_is_a_413(client, settings):
    data = two_stream_har()
    settings.INSPECTOR_MAX_UPLOAD_BYTES = len(data) - 1
    response = post_raw(client, data, content_type="application/json")
    assert response.status_code == 413
    assert_nothing_stored()


def test_content_length_over_the_limit_is_refused_before_reading(settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = 1000
    request = RequestFactory().post(URL, data=b"data: {}\n\n", content_type="text/event-stream")
    request.META["CONTENT_LENGTH"] = str(50 * 1024 * 1024)
    response = api.captures(request)
    assert response.status_code == 413
    assert str(50 * 1024 * 1024) in orjson.loads(response.content)["error"]
    assert_nothing_stored()


def test_djangos_own_body_limit_is_a_413_json_too(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    upload = SimpleUploadedFile("s.sse", OK_SSE)
    response = client.post(URL, {"file": upload, "title": "t" * 1000})
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert "the limit is" in response.json()["error"]
    assert_nothing_stored()


def test_a_failure_while_storing_the_second_stream_leaves_nothing(client, monkeypatch):
    real = fast_rows.insert_rows
    calls = []

    def write_frames_then_fail(model, *args, **kwargs):
        if model is models.Frame:  # the second stream's frames fail
            calls.append(1)
            if len(calls) == 2:
                raise RuntimeError("disk on fire")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(fast_rows, "insert_rows", write_frames_then_fail)
    response = client.post(URL, {"file": SimpleUploadedFile("s.har", two_stream_har())})
    assert len(calls) == 2
    assert response.status_code == 500
    assert response.json() == {"error": "storing the upload failed; nothing was stored"}
    assert_nothing_stored()


def test_post_needs_no_csrf_token():
    client = Client(enforce_csrf_checks=True)
    assert post_raw(client, OK_SSE).status_code == 201


def test_other_methods_are_a_405_json(client):
    response = client.put(URL, data=OK_SSE, content_type="text/event-stream")
    assert response.status_code == 405
    assert response["Allow"] == "GET, POST"
    assert "PUT" in response.json()["error"]
    slug = post_raw(client, OK_SSE).json()["slug"]
    assert client.delete(f"{URL}/{slug}").status_code == 405
    assert models.Capture.objects.count() == 1


# -- GET one --------------------------------------------------------------------


def test_lenient_result_by_path_or_query(client, capsysbinary, tmp_path):
    body = post_raw(client, AMBIGUOUS_SSE).json()
    assert body["outcome"] == "refused"
    assert body["refusal"]["code"] == "AMBIGUOUS_CONTINUATION"
    strict = detail(client, body["slug"])
    assert strict.json()["policy"] == "strict"
    assert strict.json()["lenient_outcome"] == "ok"
    assert result_bytes(strict) == command_output(capsysbinary, tmp_path, AMBIGUOUS_SSE, "a.sse")

    printed = command_output(capsysbinary, tmp_path, AMBIGUOUS_SSE, "a.sse", "--policy", "lenient")
    for suffix in ("/lenient", "?policy=lenient"):
        got = detail(client, body["slug"], suffix)
        assert got.json()["policy"] == "lenient"
        assert got.json()["outcome"] == "refused"  # the capture's (strict) outcome
        assert result_bytes(got) == printed
        assert got.json()["result"]["outcome"] == "ok"

    response = client.get(f"{URL}/{body['slug']}?policy=loose")
    assert response.status_code == 400
    assert "loose" in response.json()["error"]


def test_a_twin_s_result_is_strict_s_under_its_name(client, capsysbinary, tmp_path):
    """A lenient twin stores no document (`twin_rows.copy_twin`): the API
    answers strict's under lenient's name, what the command prints."""
    slug = post_raw(client, OK_SSE).json()["slug"]
    twin = models.Assembly.objects.get(capture__slug=slug, policy="lenient")
    assert twin.result_json is None
    printed = command_output(capsysbinary, tmp_path, OK_SSE, "ok.sse", "--policy", "lenient")
    got = detail(client, slug, "/lenient")
    assert result_bytes(got) == printed and got.json()["result"]["policy"] == "lenient"


def test_detail_reads_two_queries_and_never_the_raw_bytes(client, django_assert_num_queries):
    slug = post_raw(client, OK_SSE).json()["slug"]
    with django_assert_num_queries(2) as context:
        detail(client, slug)
    assert all('."raw"' not in query["sql"] for query in context.captured_queries)


def test_unknown_slug_is_a_404_json(client):
    for path in (f"{URL}/nope", f"{URL}/nope/lenient"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json() == {"error": "no capture 'nope'"}


def test_a_live_capture_without_an_assembly_has_a_null_result(client):
    capture = models.Capture.objects.create(
        input_format="sse", stream_format="sse", outcome="live", raw=b""
    )
    got = detail(client, capture.slug)
    assert got.json()["result"] is None
    assert got.json()["outcome"] == "live"


# -- GET list -------------------------------------------------------------------


@pytest.fixture
def listed():
    """Five captures, oldest first."""
    made = [
        store_stream(OK_SSE, stream_format="sse", title="Alpha read"),
        store_stream(CUT_SSE, stream_format="sse", title="beta cut"),
        store_stream(AMBIGUOUS_SSE, stream_format="sse", title="gamma ALPHA"),
        store_stream(
            sse(chunk(content="hi", finish="stop", model="other-model"), DONE),
            stream_format="sse",
            title="delta text",
        ),
        store_stream(sse(chunk(content="x")), stream_format="sse", title="epsilon cut"),
    ]
    return [capture.slug for capture in made]


def slugs(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["slug"] for row in response.json()["results"]]


def test_list_is_newest_first_with_metadata_and_no_result(client, listed):
    response = client.get(URL)
    body = response.json()
    assert body["count"] == 5
    assert body["page"] == 1 and body["pages"] == 1
    assert slugs(response) == listed[::-1]
    row = body["results"][-1]
    assert "result" not in row
    assert row["title"] == "Alpha read"
    assert row["outcome"] == "ok"
    assert row["frame_count"] == 5
    assert client.get(URL + "/").json()["count"] == 5


def test_list_filters(client, listed):
    assert slugs(client.get(URL, {"outcome": "ok"})) == [listed[3], listed[0]]
    assert slugs(client.get(URL, {"outcome": "refused"})) == [listed[4], listed[2], listed[1]]
    assert slugs(client.get(URL, {"code": "INCOMPLETE_STREAM"})) == [listed[4], listed[1]]
    assert slugs(client.get(URL, {"code": "AMBIGUOUS_CONTINUATION"})) == [listed[2]]
    assert slugs(client.get(URL, {"outcome": "ok", "code": "INCOMPLETE_STREAM"})) == []
    assert slugs(client.get(URL, {"model": "other-model"})) == [listed[3]]
    assert slugs(client.get(URL, {"q": "alpha"})) == [listed[2], listed[0]]
    assert slugs(client.get(URL, {"q": "cut", "outcome": "refused"})) == [listed[4], listed[1]]
    assert client.get(URL, {"outcome": "", "code": ""}).json()["count"] == 5


def test_list_paging(client, listed):
    first = client.get(URL, {"per_page": 2})
    assert first.json()["pages"] == 3 and first.json()["count"] == 5
    assert slugs(first) == [listed[4], listed[3]]
    assert slugs(client.get(URL, {"per_page": 2, "page": 2})) == [listed[2], listed[1]]
    assert slugs(client.get(URL, {"per_page": 2, "page": 3})) == [listed[0]]
    assert slugs(client.get(URL, {"per_page": 2, "page": 4})) == []
    assert client.get(URL, {"per_page": 100000}).json()["per_page"] == 200
    assert client.get(URL).json()["per_page"] == 50


@pytest.mark.parametrize("page", ["99999999999999999999", str(2**63 - 1)])
def test_a_page_far_past_the_last_is_empty_not_a_500(client, listed, page):
    response = client.get(URL, {"per_page": 2, "page": page})
    assert slugs(response) == []
    assert response.json()["count"] == 5 and response.json()["pages"] == 3


@pytest.mark.parametrize(
    "params",
    [
        {"page": "x"},
        {"page": "0"},
        {"per_page": "-1"},
        {"outcome": "maybe"},
        {"code": "NOT_A_CODE"},
    ],
)
def test_bad_list_parameters_are_a_400(client, params):
    response = client.get(URL, params)
    assert response.status_code == 400
    assert response.json()["error"]


def test_list_is_two_queries_without_raw(client, listed, django_assert_num_queries):
    with django_assert_num_queries(2) as context:
        response = client.get(URL, {"outcome": "refused", "q": "a", "per_page": 2})
    assert response.status_code == 200
    assert all('."raw"' not in query["sql"] for query in context.captured_queries)
    store_stream(OK_SSE, stream_format="sse")
    with django_assert_num_queries(2):
        assert client.get(URL).json()["count"] == 6


def test_empty_list(client):
    body = client.get(URL).json()
    assert body == {"count": 0, "page": 1, "pages": 1, "per_page": 50, "results": []}


def test_the_code_filter_is_also_read_as_refusal_as_on_the_list_page(client, listed):
    """One filter form for the page and the API: `code` is the name, `refusal` its alias."""
    by_code = slugs(client.get(URL, {"code": "INCOMPLETE_STREAM"}))
    assert slugs(client.get(URL, {"refusal": "INCOMPLETE_STREAM"})) == by_code
    assert client.get(URL, {"refusal": "NOT_A_CODE"}).status_code == 400
