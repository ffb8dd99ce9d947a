"""A stored capture records its dialect and why; uploads, the API, the list
filter and `manage.py minimize` take a dialect."""

from __future__ import annotations

import orjson
import pytest
from command_line import manage
from dialect_streams import BY_DIALECT, CHAT_OK, MESSAGES_QUIRK, NO_DIALECT, RESPONSES_OK
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from inspector.captures import models
from inspector.captures.intake import store_upload
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("dialect", sorted(BY_DIALECT))
def test_a_stored_capture_records_the_dialect_its_frames_told(dialect):
    for data in BY_DIALECT[dialect]:
        capture = store_stream(data, stream_format="sse")
        capture.refresh_from_db()
        assert (capture.dialect, capture.dialect_basis) == (dialect, "frames")
        result = orjson.loads(capture.assemblies.get(policy="strict").result_json)
        assert result["dialect"] == dialect


def test_a_stream_no_dialect_claims_is_assumed_chat():
    capture = store_stream(NO_DIALECT, stream_format="sse")
    assert (capture.dialect, capture.dialect_basis) == ("chat", "assumed")


def test_a_chosen_dialect_is_used_and_recorded_as_chosen():
    capture = store_stream(RESPONSES_OK, stream_format="sse", dialect="messages")
    assert (capture.dialect, capture.dialect_basis) == ("messages", "chosen")
    # Read as Anthropic, every Responses event is a foreign frame.
    assert "foreign_frame" in capture.frames.get(number=0).marks


def _har(url: str, body: bytes) -> bytes:
    entry = {
        "startedDateTime": "2026-01-02T03:04:05.000Z",
        "request": {"method": "POST", "url": url, "headers": []},
        "response": {
            "status": 200,
            "headers": [],
            "content": {"mimeType": "text/event-stream", "text": body.decode()},
        },
    }
    return orjson.dumps({"log": {"version": "1.2", "entries": [entry]}})


def test_a_har_entry_request_url_is_the_hint():
    # No frame tells (a lone ping-less error is neutral): the URL decides.
    body = b'data: {"error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n'
    (capture,) = store_upload(_har("https://api.anthropic.com/v1/messages", body))
    assert (capture.dialect, capture.dialect_basis) == ("messages", "url")


def test_a_live_capture_gets_its_dialect_when_it_closes():
    from inspector.live.session import LiveCapture

    live = LiveCapture.open(stream_format="sse", title="live")
    assert live.capture.dialect == "chat"  # nothing known yet
    live.append(MESSAGES_QUIRK)
    live.close()
    capture = models.Capture.objects.get(pk=live.capture.pk)
    assert (capture.dialect, capture.dialect_basis) == ("messages", "frames")
    assert capture.refusal_code == "INCONSISTENT_CALL"


def test_the_api_takes_a_dialect_and_lists_it(client):
    answer = client.post(
        "/api/captures?dialect=gemini", RESPONSES_OK, content_type="text/event-stream"
    )
    assert answer.status_code == 201, answer.content
    client.post("/api/captures", CHAT_OK, content_type="text/event-stream")
    listed = client.get("/api/captures").json()["results"]
    assert sorted(row["dialect"] for row in listed) == ["chat", "gemini"]
    only = client.get("/api/captures?dialect=gemini").json()
    assert [row["slug"] for row in only["results"]] == [answer.json()["slug"]]
    detail = client.get(f"/api/captures/{answer.json()['slug']}").json()
    assert detail["dialect"] == "gemini" and detail["result"]["dialect"] == "gemini"


def test_the_api_refuses_an_unknown_dialect(client):
    answer = client.post("/api/captures?dialect=cobol", CHAT_OK, content_type="text/plain")
    assert answer.status_code == 400
    assert "unknown dialect 'cobol'" in answer.json()["error"]
    assert client.get("/api/captures?dialect=cobol").status_code == 400
    assert not models.Capture.objects.exists()


def test_the_upload_form_takes_a_dialect(client):
    answer = client.post(
        "/upload/", {"text": RESPONSES_OK.decode(), "format": "sse", "dialect": "responses"}
    )
    assert answer.status_code == 302
    capture = models.Capture.objects.get()
    assert (capture.dialect, capture.dialect_basis) == ("responses", "chosen")
    assert b'name="dialect"' in client.get("/upload/").content


def test_the_list_page_filters_by_dialect(client):
    for dialect, (ok, _) in BY_DIALECT.items():
        store_stream(ok, stream_format="sse", title=f"the {dialect} one")
    page = client.get("/?dialect=messages").content.decode()
    assert "the messages one" in page and "the chat one" not in page
    assert '<option value="messages" selected>' in page


def test_minimize_takes_a_dialect(tmp_path):
    path = tmp_path / "late.sse"
    path.write_bytes(MESSAGES_QUIRK)
    found = manage("minimize", str(path), "--quiet", "--dialect", "messages", timeout=120)
    assert found.returncode == 0, found.stderr
    assert b"content_block_stop" in found.stdout
    assert b"keeps INCONSISTENT_CALL" in found.stderr
    # Read as Gemini, every Anthropic event is foreign: no candidate ever finishes.
    forced = manage("minimize", str(path), "--quiet", "--dialect", "gemini", timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert b"keeps INCOMPLETE_STREAM" in forced.stderr


@pytest.mark.django_db(transaction=True)
def test_the_migration_makes_existing_captures_chat():
    executor = MigrationExecutor(connection)
    executor.migrate([("captures", "0008_wider_formats")])
    try:
        old = executor.loader.project_state([("captures", "0008_wider_formats")]).apps
        old.get_model("captures", "Capture").objects.create(
            input_format="sse", stream_format="sse", outcome="ok", raw=b""
        )
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([("captures", "0009_capture_dialect")])
        stored = list(
            executor.loader.project_state([("captures", "0009_capture_dialect")])
            .apps.get_model("captures", "Capture")
            .objects.values_list("dialect", "dialect_basis")
        )
        assert stored == [("chat", "")]
    finally:  # the later migrations back, for the tests that follow
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_the_state_panel_names_a_call_s_place_in_its_dialect_s_terms(client):
    from inspector.captures.store import store_stream
    from inspector.live.fake_upstream import DEFAULT_SCENARIOS

    terms = {"responses-ok": "output_index", "messages-ok": "content block"}
    for scenario, term in terms.items():
        data = (DEFAULT_SCENARIOS / f"{scenario}.sse").read_bytes()
        capture = store_stream(data, stream_format="sse")
        page = client.get(f"/c/{capture.slug}/frames/{capture.frame_count - 2}/").content.decode()
        assert f"<dt>{term}</dt>" in page, scenario
        assert "settled: its arguments are complete" in page
