"""INSPECTOR_API_TOKENS: scripts reach the JSON API, ingest and the proxy with
`Authorization: Bearer <token>` or `X-Inspector-Token: <token>` (the proxy and
guard routes: X-Inspector-Token only, their Authorization goes upstream)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from access_helpers import ok_stream, store, ws_ingest

from inspector import access

pytestmark = pytest.mark.django_db(transaction=True)

BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def tokens(settings):
    settings.INSPECTOR_REQUIRE_LOGIN = False
    settings.INSPECTOR_API_TOKENS = ["tok-one", "tok-two"]
    return settings


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def inspector_token(token: str) -> dict[str, str]:
    return {"HTTP_X_INSPECTOR_TOKEN": token}


def test_the_api_needs_a_token_once_tokens_are_configured(client, tokens):
    capture = store(title="api")
    for url in ("/api/captures", f"/api/captures/{capture.slug}", "/api/attempts/g"):
        response = client.get(url)
        assert response.status_code == 401, url
        assert "authentication required" in orjson.loads(response.content)["error"]
    assert client.get("/api/captures", **bearer("tok-one")).status_code == 200
    assert client.get("/api/captures", **inspector_token("tok-two")).status_code == 200
    detail = client.get(f"/api/captures/{capture.slug}", **bearer("tok-two"))
    assert orjson.loads(detail.content)["slug"] == capture.slug
    # Pages stay open without login: tokens guard only what scripts use.
    assert client.get("/").status_code == 200
    assert client.get(capture.get_absolute_url()).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_AUTHORIZATION": "Bearer tok-three"},
        {"HTTP_AUTHORIZATION": "Bearer tok-one-and-more"},
        {"HTTP_AUTHORIZATION": "Bearer tok-on"},
        {"HTTP_X_INSPECTOR_TOKEN": "TOK-ONE"},
        # A wrong X-Inspector-Token is not rescued by a right Bearer.
        {"HTTP_X_INSPECTOR_TOKEN": "nope", "HTTP_AUTHORIZATION": "Bearer tok-one"},
    ],
)
def test_a_wrong_token_is_401(client, tokens, headers):
    response = client.get("/api/captures", **headers)
    assert response.status_code == 401
    assert orjson.loads(response.content) == {"error": "invalid token"}


def test_a_basic_authorization_header_is_not_a_token(client, tokens):
    response = client.get("/api/captures", HTTP_AUTHORIZATION="Basic dG9rLW9uZTo=")
    assert response.status_code == 401


def test_upload_and_ingest_with_a_token(client, tokens):
    upload = client.post(
        "/api/captures", ok_stream(), content_type="text/event-stream", **bearer("tok-one")
    )
    assert upload.status_code == 201
    assert (
        client.post("/api/captures", ok_stream(), content_type="text/event-stream").status_code
        == 401
    )

    assert client.post("/api/ingest", content_type="application/json").status_code == 401
    opened = client.post("/api/ingest", {"title": "t"}, "application/json", **bearer("tok-one"))
    assert opened.status_code == 201
    slug = orjson.loads(opened.content)["slug"]
    append = f"/api/ingest/{slug}/append"
    assert client.post(append, ok_stream(), "application/octet-stream").status_code == 401
    assert (
        client.post(
            append, ok_stream(), "application/octet-stream", **bearer("tok-two")
        ).status_code
        == 200
    )
    closed = client.post(f"/api/ingest/{slug}/close", **inspector_token("tok-one"))
    assert orjson.loads(closed.content)["outcome"] == "ok"


def test_the_proxy_takes_the_token_only_as_x_inspector_token(client, tokens):
    url = "/proxy/no-such-upstream/v1/chat/completions"
    body = orjson.dumps({"model": "m", "messages": []})
    # Its Authorization is the upstream's API key: never the inspector's token.
    refused = client.post(url, body, "application/json", **bearer("tok-one"))
    assert refused.status_code == 401
    assert orjson.loads(refused.content)["error"]["type"] == "inspector_unauthorized"
    wrong = client.post(url, body, "application/json", **inspector_token("bad"))
    assert wrong.status_code == 401
    # Through the gate: the proxy itself answers (no such upstream).
    passed = client.post(
        url,
        body,
        "application/json",
        HTTP_AUTHORIZATION="Bearer sk-upstream",
        **inspector_token("tok-one"),
    )
    assert passed.status_code == 404
    assert orjson.loads(passed.content)["error"]["code"] == "unknown_upstream"
    guard = client.post(
        "/guard/no-such-upstream/v1/chat/completions",
        body,
        "application/json",
        **inspector_token("tok-two"),
    )
    assert guard.status_code == 404


def test_with_login_required_a_token_opens_the_api_but_not_pages(client, tokens):
    tokens.INSPECTOR_REQUIRE_LOGIN = True
    tokens.INSPECTOR_SHARING = False
    capture = store(title="both")
    assert client.get("/api/captures", **bearer("tok-one")).status_code == 200
    assert client.get(f"/api/captures/{capture.slug}", **bearer("tok-one")).status_code == 200
    assert client.get("/", **bearer("tok-one")).status_code == 302
    assert client.get(capture.get_absolute_url(), **bearer("tok-one")).status_code == 302


def test_without_tokens_or_login_a_token_header_changes_nothing(client, open_mode):
    assert client.get("/api/captures", **bearer("anything")).status_code == 200


def test_the_ingest_socket_takes_a_token(tokens):
    assert ws_ingest("/ws/ingest/") == {"connected": False, "code": 4401}
    assert ws_ingest("/ws/ingest/?token=wrong") == {"connected": False, "code": 4403}
    by_query = ws_ingest("/ws/ingest/?token=tok-one")
    assert by_query["closed"]["outcome"] == "ok"
    by_header = ws_ingest("/ws/ingest/", (b"x-inspector-token", b"tok-two"))
    assert by_header["closed"]["outcome"] == "ok"
    by_bearer = ws_ingest("/ws/ingest/", (b"authorization", b"Bearer tok-one"))
    assert by_bearer["closed"]["outcome"] == "ok"


def test_tokens_parse_from_a_comma_separated_list():
    assert access.parse_tokens(" a, b,,c ,") == ["a", "b", "c"]
    assert access.parse_tokens(["x", " ", "y "]) == ["x", "y"]
    assert access.parse_tokens(None) == []


def test_settings_read_the_environment():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "inspector.settings",
        "INSPECTOR_API_TOKENS": "alpha, beta,",
        "INSPECTOR_REQUIRE_LOGIN": "1",
        "INSPECTOR_SHARING": "0",
    }
    code = (
        "from django.conf import settings as s; "
        "print(s.INSPECTOR_API_TOKENS, s.INSPECTOR_REQUIRE_LOGIN, s.INSPECTOR_SHARING)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "['alpha', 'beta'] True False"
