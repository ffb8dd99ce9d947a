"""Secrets, round two: the inspector's own login never goes upstream, no query
key reaches a log line, a key the upstream echoes is not stored, and personal
request fields are forwarded but not stored.

Each live test drives a real daphne process against the fake upstream and
then looks where a secret could end up: the headers the upstream received,
the server's whole log (daphne's access log included), every column of the
capture tables.
"""

from __future__ import annotations

import json
import secrets
import time

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client
from test_hardening_secrets_every_intake import table_cells_holding, wait_until_closed

from inspector.captures import models
from inspector.live.fake_upstream import FakeUpstream
from inspector.live.redact import (
    REDACTED,
    StreamScrubber,
    drop_personal_fields,
    dropped_query_names,
    redact_query_values,
    without_inspector_credentials,
)

CHAT = "/proxy/fake/v1/chat/completions"
KEY = "sk-echoed-" + "k" * 24 + "-XYZ987"


def chat_body(model: str, **extra) -> dict:
    return {
        "model": model,
        "stream": True,
        "messages": [{"role": "user", "content": "visible-mark-2b7e"}],
        **extra,
    }


@pytest.fixture(scope="module")
def fake_upstream():
    fake = FakeUpstream(pace_ms=0).start()
    yield fake
    fake.stop()


# -- 1. the inspector's login stays home -------------------------------------------------


def test_own_session_and_csrf_cookies_and_header_are_cut_out(settings):
    settings.SESSION_COOKIE_NAME = "insp_session"
    settings.CSRF_COOKIE_NAME = "insp_csrf"
    settings.CSRF_HEADER_NAME = "HTTP_X_INSP_CSRF"
    headers = [
        ("Cookie", "insp_session=s3cr3t-session; theme=dark; insp_csrf=tok3n-csrf"),
        ("X-Insp-Csrf", "tok3n-csrf"),
        ("Authorization", "Bearer sk-upstream"),
        ("X-CSRFToken", "not ours under these settings"),
    ]
    assert without_inspector_credentials(headers) == [
        ("Cookie", "theme=dark"),
        ("Authorization", "Bearer sk-upstream"),
        ("X-CSRFToken", "not ours under these settings"),
    ]
    only_ours = [("Cookie", "insp_session=a; insp_csrf=b")]
    assert without_inspector_credentials(only_ours) == []


@pytest.mark.django_db(transaction=True)
def test_a_logged_in_browser_s_login_never_reaches_the_upstream(daphne_factory, fake_upstream):
    """With login required, a real session (and its CSRF pair) lets the
    request through the inspector, and none of it goes further."""
    fake_upstream.reset()
    url = daphne_factory(
        {"INSPECTOR_UPSTREAMS": f"fake={fake_upstream.url}", "INSPECTOR_REQUIRE_LOGIN": "1"}
    )
    browser = Client()
    browser.force_login(User.objects.create_user("ada", password="pw-not-used-here"))
    session = browser.cookies["sessionid"].value
    csrf = secrets.token_hex(16)
    cookies = f"sessionid={session}; csrftoken={csrf}; upstream_affinity=zone-b"
    response = httpx.post(
        url + CHAT,
        json=chat_body("ok-tool-call"),
        headers={"Cookie": cookies, "X-CSRFToken": csrf, "Authorization": "Bearer sk-up"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    (served,) = fake_upstream.served()
    assert served.headers["cookie"] == "upstream_affinity=zone-b"
    assert "x-csrftoken" not in served.headers
    assert served.headers["authorization"] == "Bearer sk-up"
    sent = json.dumps(served.headers)
    assert session not in sent and csrf not in sent
    # The session really was live: without it the proxy refuses.
    anonymous = httpx.post(url + CHAT, json=chat_body("ok-tool-call"), timeout=30)
    assert anonymous.status_code == 401
    wait_until_closed(1)
    assert [c for c in table_cells_holding(session) if c.startswith("captures_")] == []


# -- 2. no key in a log line -------------------------------------------------------------


def test_query_values_of_secret_and_personal_parameters_are_redacted():
    line = '127.0.0.1 - - "POST /proxy/g/v1/x?key=AIza-1&alt=sse&code=abc&sig=s1&q=kept" 200'
    assert redact_query_values(line) == (
        f'127.0.0.1 - - "POST /proxy/g/v1/x?key={REDACTED}&alt=sse&code={REDACTED}'
        f'&sig={REDACTED}&q=kept" 200'
    )
    assert redact_query_values("no query here = fine") == "no query here = fine"
    assert redact_query_values("/ws/ingest/?token=t0k&x=1") == f"/ws/ingest/?token={REDACTED}&x=1"


@pytest.mark.django_db(transaction=True)
def test_no_query_canary_in_the_server_log(daphne_factory, fake_upstream):
    """Proxy, guard and ingest requests with keys in their query strings,
    and a stream the upstream cuts (logged with its URL): the log shows the
    requests, never the keys."""
    fake_upstream.reset()
    url = daphne_factory(
        {"INSPECTOR_UPSTREAMS": f"fake={fake_upstream.url}", "INSPECTOR_GUARD_RETRIES": "0"}
    )
    canary = "CANARY" + secrets.token_hex(8)
    query = f"key={canary}&api_key={canary}&access_token={canary}&sig={canary}&code={canary}"
    for mode in ("proxy", "guard"):
        for model in ("ok-tool-call", "cut-mid-stream"):
            httpx.post(f"{url}/{mode}/fake/v1/chat/completions?{query}", json=chat_body(model))
    httpx.get(f"{url}/proxy/fake/v1/models?{query}")
    opened = httpx.post(f"{url}/api/ingest?{query}", json={"format": "sse"})
    assert opened.status_code == 201, opened.text
    httpx.post(opened.json()["close_url"] + f"?{query}")
    wait_until_closed(5)
    time.sleep(0.3)  # the access log line is written after the response
    log = daphne_factory.logs[url].read_text()
    assert "/proxy/fake/v1/chat/completions?" in log and "/api/ingest?" in log
    assert "dropped mid-stream" in log  # the cut was logged, with its URL
    assert REDACTED in log
    assert canary not in log


# -- 3. a key the upstream echoes is not stored ------------------------------------------


@pytest.mark.parametrize("cut", range(0, 40))
def test_the_scrubber_finds_a_key_cut_anywhere(cut):
    text = f'data: {{"error":{{"message":"Incorrect API key provided: {KEY}."}}}}\n\n'.encode()
    start = text.index(KEY.encode())
    cuts = sorted({start - 3 + cut, start + cut // 2, len(text) - 1})
    scrubber = StreamScrubber([KEY, "sk-other-key-000"])
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    out = b"".join(scrubber.feed(piece) for piece in pieces) + scrubber.flush()
    assert out == text.replace(KEY.encode(), REDACTED.encode())


def test_the_scrubber_holds_back_only_what_may_start_a_key():
    scrubber = StreamScrubber([KEY])
    assert scrubber.feed(b"plain text ") == b"plain text "
    assert scrubber.feed(b"then sk-ec") == b"then "
    assert scrubber.feed(b"ho, not a key") == b"sk-echo, not a key"
    assert scrubber.flush() == b""
    assert StreamScrubber([]).feed(b"sk-") == b"sk-"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", ["echo-key", "echo-key-stream"])
def test_an_echoed_key_reaches_the_client_but_is_not_stored(
    scenario, daphne_factory, fake_upstream
):
    fake_upstream.reset()
    url = daphne_factory({"INSPECTOR_UPSTREAMS": f"fake={fake_upstream.url}"})
    response = httpx.post(
        url + CHAT, json=chat_body(scenario), headers={"Authorization": f"Bearer {KEY}"}
    )
    assert KEY in response.text  # the client gets the answer unchanged
    wait_until_closed(1)
    capture = models.Capture.objects.get()
    assert REDACTED.encode() in bytes(capture.raw)
    assert capture.outcome == "refused" and capture.refusal_code == "UPSTREAM_ERROR"
    assert table_cells_holding(KEY) == []
    page = Client().get(capture.get_absolute_url())
    assert page.status_code == 200 and KEY not in page.content.decode()


# -- 4. personal data: forwarded, not stored, named ---------------------------------------


def test_personal_fields_are_dropped_at_the_top_level_only():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {}}}}]
    tools[0]["function"]["parameters"]["properties"]["state"] = {"type": "string"}
    body = {
        "model": "m",
        "user": "u-42",
        "metadata": {"a": 1},
        "tools": tools,
        "Safety-Identifier": 1,
    }
    kept, dropped = drop_personal_fields(body)
    assert dropped == ["user", "metadata", "Safety-Identifier"]
    assert kept == {"model": "m", "tools": tools}
    assert dropped_query_names("code=1&state=2&code=3&alt=sse") == ["code", "state"]


def test_the_setting_names_what_is_dropped(settings):
    settings.INSPECTOR_DROP_FIELDS = ["tenant"]
    assert drop_personal_fields({"user": "u", "tenant": "t"}) == ({"user": "u"}, ["tenant"])
    settings.INSPECTOR_DROP_FIELDS = []
    assert drop_personal_fields({"user": "u"}) == ({"user": "u"}, [])


@pytest.mark.django_db(transaction=True)
def test_personal_fields_are_forwarded_not_stored_and_named(daphne_factory, fake_upstream):
    fake_upstream.reset()
    url = daphne_factory({"INSPECTOR_UPSTREAMS": f"fake={fake_upstream.url}"})
    person = "person-" + secrets.token_hex(6)
    body = chat_body(
        "ok-tool-call",
        user=person,
        safety_identifier=person,
        prompt_cache_key=person,
        metadata={"customer": person},
    )
    response = httpx.post(f"{url}{CHAT}?code={person}&state={person}&alt=x", json=body)
    assert response.status_code == 200, response.text
    (served,) = fake_upstream.served()
    assert served.body["user"] == person and f"code={person}" in served.path
    wait_until_closed(1)
    assert table_cells_holding(person) == []
    capture = models.Capture.objects.get()
    assert capture.not_stored == [
        "query.code",
        "query.state",
        "body.user",
        "body.safety_identifier",
        "body.prompt_cache_key",
        "body.metadata",
    ]
    assert "visible-mark-2b7e" in capture.request_json and "alt=x" in capture.source_url
    page = Client().get(capture.get_absolute_url()).content.decode()
    assert "body.metadata" in page and "INSPECTOR_DROP_FIELDS" in page
    api = Client().get(f"/api/captures/{capture.slug}").json()
    assert api["not_stored"] == capture.not_stored
