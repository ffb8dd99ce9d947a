"""Hardening round two, the small ones: NUL bytes, static path traversal,
encoded dot segments through the proxy, login throttling, weak keys and
boolean spellings, and recovery at any server start."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from channels.testing import HttpCommunicator, WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from inspector import deploy
from inspector.asgi import application
from inspector.captures import models
from inspector.input_guard import BAD_SOCKET

HOST = [(b"host", b"testserver")]

# -- 11. NUL bytes never reach the database ---------------------------------------------

NUL_PATHS = [
    ("GET", "/c/\x00/"),
    ("GET", "/c/\x00/frames/1/"),
    ("GET", "/c/\x00/raw"),
    ("GET", "/api/captures/\x00"),
    ("GET", "/api/attempts/\x00"),
    ("POST", "/api/ingest/\x00/append"),
    ("POST", "/api/ingest/\x00/close"),
]
NUL_QUERIES = ["/?q=%00", "/?model=%00", "/?har_upload=a%00b", "/api/captures?q=%00", "/?code=%00"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("method", "path"), NUL_PATHS)
async def test_a_nul_in_the_path_is_a_404_before_any_query(method, path):
    response = await HttpCommunicator(application, method, path, headers=HOST).get_response()
    assert response["status"] == 404
    assert b"NUL" in response["body"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", NUL_QUERIES)
async def test_a_nul_in_the_query_is_a_400(path):
    response = await HttpCommunicator(application, "GET", path, headers=HOST).get_response()
    assert response["status"] == 400


@pytest.mark.django_db(transaction=True)
async def test_a_clean_request_still_passes_the_guard():
    response = await HttpCommunicator(application, "GET", "/?q=abc", headers=HOST).get_response()
    assert response["status"] == 200


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/captures/\x00/", "/ws/captures/?after=%00"])
async def test_a_websocket_handshake_with_a_nul_is_refused(path):
    socket = WebsocketCommunicator(application, path)
    connected, code = await socket.connect(timeout=5)
    assert not connected and code == BAD_SOCKET


# -- 12. static files: climbing out is a 404 ----------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/static/../manage.py", "/static/inspector/../../manage.py"])
async def test_a_static_path_out_of_the_roots_is_a_404(path):
    response = await HttpCommunicator(application, "GET", path, headers=HOST).get_response()
    assert response["status"] == 404


# -- 15. proxy paths: no dot segment however encoded, no backslash ------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["%252e%252e/admin", "..%5c..%5cetc", "%2e%2e/x", "a/%252f/b", ".%2e/models"]
)
def test_proxied_paths_that_could_climb_are_refused(path, settings):
    settings.INSPECTOR_UPSTREAMS = "local=http://127.0.0.1:9/v1"
    response = Client().get(f"/proxy/local/v1/{path}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_path"


# -- 13. logins, keys, booleans ----------------------------------------------------------


def login(client: Client, user: str, password: str) -> int:
    return client.post("/accounts/login/", {"username": user, "password": password}).status_code


@pytest.mark.django_db
def test_failed_logins_are_throttled_per_user_and_per_address(settings):
    settings.INSPECTOR_LOGIN_FAILURES = 3
    cache.clear()
    User.objects.create_user("grace", password="right-pa55")
    browser = Client()
    for _ in range(3):
        assert login(browser, "grace", "wrong") == 200  # the form again, with its error
    refused = browser.post("/accounts/login/", {"username": "grace", "password": "right-pa55"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    # Another user from the same address is throttled too (the address used up its tries)...
    assert login(browser, "hopper", "x") == 429
    # ...and the same user from another address too (the name used up its tries).
    elsewhere = Client(REMOTE_ADDR="10.9.8.7")
    assert login(elsewhere, "grace", "right-pa55") == 429
    cache.clear()  # the window has passed
    assert login(elsewhere, "grace", "right-pa55") == 302


def test_weak_secret_keys_refuse_a_login_server():
    weak = deploy.unsafe_startup_reasons(require_login=True, debug=False, secret_key="short-key")
    assert any("weak" in reason for reason in weak)
    repeated = "ab" * 40
    assert deploy.unsafe_startup_reasons(require_login=True, debug=False, secret_key=repeated)
    strong = "x7Qp2-Lm9vR4sT8wZ1cB6nH3jK0dF5gY-aE7uI2oP9qW4eR8tY1uI6oP3aS5dF0gH"
    assert deploy.unsafe_startup_reasons(require_login=True, debug=False, secret_key=strong) == []


@pytest.mark.parametrize("word", ["y", "enable", "ture", "2"])
def test_unknown_boolean_spellings_are_refused(word):
    with pytest.raises(ImproperlyConfigured, match="not a boolean"):
        deploy.env_bool({"INSPECTOR_REQUIRE_LOGIN": word}, "INSPECTOR_REQUIRE_LOGIN", False)
    assert deploy.env_bool({"X": " Yes "}, "X", False) is True
    assert deploy.env_bool({"X": "off"}, "X", True) is False


def test_a_server_refuses_to_start_on_a_misspelt_boolean():
    env = {"INSPECTOR_REQUIRE_LOGIN": "y", "DJANGO_SETTINGS_MODULE": "inspector.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**__import__("os").environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "INSPECTOR_REQUIRE_LOGIN='y' is not a boolean" in done.stderr


# -- 10. any server start closes what a dead predecessor left live -------------------------


@pytest.mark.django_db(transaction=True)
def test_any_daphne_start_recovers_stale_live_captures(daphne_process):
    from inspector.live.session import LiveCapture

    live = LiveCapture.open(stream_format="sse", title="left behind")
    live.append(b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')
    # The process that recorded it died: nothing closes it but recovery.
    daphne_process({"INSPECTOR_LIVE_STALE_SECONDS": "0.5"})
    deadline = time.monotonic() + 15
    while True:
        capture = models.Capture.objects.get(slug=live.slug)
        if capture.outcome != "live" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert capture.outcome == "refused" and capture.interrupted
    assert capture.refusal_code == "INCOMPLETE_STREAM" and capture.frame_count == 1


# -- 14. share links answer HEAD as they answer GET ---------------------------------------


@pytest.mark.django_db
def test_share_links_answer_head():
    stream = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    created = Client().post("/api/captures", stream + b"data: [DONE]\n\n", "text/event-stream")
    assert created.status_code == 201, created.content
    slug = created.json()["slug"]
    for path in (f"/c/{slug}/", f"/c/{slug}/frames/0/", f"/c/{slug}/raw"):
        head, get = Client().head(path), Client().get(path)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"" and head["Content-Type"] == get["Content-Type"]


# -- the attack run (bench/attack.py): an unknown websocket path --------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/no-such-socket/", "/ws/", "/ws/captures/a/b/"])
async def test_an_unknown_websocket_path_is_refused_not_an_error(path):
    """The URL router raised for a path it has no route for: daphne logged an ERROR with
    its traceback and answered the handshake 500."""
    socket = WebsocketCommunicator(application, path)
    connected, _ = await socket.connect(timeout=5)
    assert not connected
