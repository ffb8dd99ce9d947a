"""INSPECTOR_REQUIRE_LOGIN: off by default (everything open, as before); on,
Django auth guards the list, upload, compare, every capture page that is not a
share link, the API, ingest, the proxy and the websockets."""

from __future__ import annotations

import urllib.error
import urllib.request

import orjson
import pytest
from access_helpers import (
    CSP,
    PASSWORD,
    ok_stream,
    refused_stream,
    session_cookie,
    store,
    ws_connect,
    ws_ingest,
)
from django.test import Client

from inspector.captures.models import Capture

pytestmark = pytest.mark.django_db(transaction=True)

GUARDED_PAGES = ["/", "/upload/", "/compare/", "/compare/?a=x&b=y", "/?outcome=refused"]
MACHINE = [
    ("get", "/api/captures"),
    ("post", "/api/captures"),
    ("get", "/api/attempts/some-chain"),
    ("post", "/api/ingest"),
    ("post", "/api/ingest/abc/append"),
    ("post", "/api/ingest/abc/close"),
    ("post", "/proxy/local/v1/chat/completions"),
    ("get", "/proxy/local/v1/models"),
    ("post", "/guard/local/v1/chat/completions"),
]


def test_default_is_open_as_before(client, open_mode):
    capture = store(refused_stream(), title="open")
    for url in GUARDED_PAGES + [capture.get_absolute_url(), f"/c/{capture.slug}/frames/1/"]:
        response = client.get(url)
        assert response.status_code == (404 if "a=x" in url else 200), url  # x: no capture
    page = client.get(capture.get_absolute_url()).content.decode()
    assert f"/c/{capture.slug}/minimize" in page  # the Minimize form
    assert f"/c/{capture.slug}/rotate/" in page  # the revoke button
    assert "Log in" not in page
    assert client.get("/api/captures").status_code == 200
    assert client.get(f"/api/captures/{capture.slug}").status_code == 200
    upload = client.post("/api/captures", ok_stream(), content_type="text/event-stream")
    assert upload.status_code == 201
    assert (
        client.post("/upload/", {"text": ok_stream().decode(), "format": "auto"}).status_code == 302
    )


def test_login_required_redirects_every_page_to_the_login_form(client, login_mode):
    capture = store(title="guarded")
    login_mode.INSPECTOR_SHARING = False  # no share links: capture pages are guarded too
    for url in GUARDED_PAGES + [capture.get_absolute_url(), f"/c/{capture.slug}/lenses/"]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url
    response = client.get("/compare/?a=x&b=y")
    assert response["Location"] == "/accounts/login/?next=/compare/%3Fa%3Dx%26b%3Dy"
    # The login form itself, the health probe and the admin's own login stay reachable.
    login = client.get("/accounts/login/?next=/")
    assert login.status_code == 200
    assert b'name="password"' in login.content and b"csrfmiddlewaretoken" in login.content
    assert login["Content-Security-Policy"] == CSP
    assert client.get("/health").status_code == 200
    assert client.get("/admin/login/").status_code == 200


def test_login_required_refuses_state_changing_posts_with_403(client, login_mode):
    capture = store(refused_stream(), title="guarded")
    before = Capture.objects.count()
    assert client.post("/upload/", {"text": ok_stream().decode()}).status_code == 403
    assert client.post(f"/c/{capture.slug}/minimize").status_code == 403
    assert client.post(f"/c/{capture.slug}/rotate/").status_code == 403
    assert Capture.objects.count() == before
    assert Capture.objects.get(pk=capture.pk).slug == capture.slug


@pytest.mark.parametrize("method,url", MACHINE)
def test_login_required_answers_401_json_on_api_ingest_and_proxy(client, login_mode, method, url):
    response = getattr(client, method)(url)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"].startswith("Bearer")
    body = orjson.loads(response.content)
    if url.startswith(("/proxy/", "/guard/")):  # the OpenAI error shape: the SDK shows it
        assert body["error"]["code"] == "unauthorized"
        assert "X-Inspector-Token" in body["error"]["message"]
    else:
        assert "authentication required" in body["error"]


def test_api_detail_of_a_capture_needs_a_login_even_with_sharing_on(client, login_mode):
    capture = store(title="shared")
    for url in (f"/api/captures/{capture.slug}", f"/api/captures/{capture.slug}/lenses"):
        assert client.get(url).status_code == 401


def test_logging_in_opens_everything_and_logging_out_closes_it(client, login_mode, user):
    capture = store(refused_stream(), title="mine")
    response = client.post(
        "/accounts/login/", {"username": "ada", "password": PASSWORD, "next": "/upload/"}
    )
    assert response.status_code == 302 and response["Location"] == "/upload/"
    for url in GUARDED_PAGES + [capture.get_absolute_url()]:
        assert client.get(url).status_code == (404 if "a=x" in url else 200), url
    page = client.get(capture.get_absolute_url()).content.decode()
    assert f"/c/{capture.slug}/minimize" in page and f"/c/{capture.slug}/rotate/" in page
    assert "Log out" in page and "ada" in page
    assert client.get("/api/captures").status_code == 200
    assert client.get(f"/api/captures/{capture.slug}").status_code == 200

    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_a_wrong_password_stays_on_the_login_form(client, login_mode, user):
    response = client.post("/accounts/login/", {"username": "ada", "password": "nope"})
    assert response.status_code == 200
    assert b"form-errors" in response.content
    assert client.get("/").status_code == 302


def test_a_logged_in_browser_posting_to_the_api_needs_the_csrf_header(login_mode, user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    browser.get("/upload/")  # sets the CSRF cookie, as a page of the site would
    token = browser.cookies["csrftoken"].value
    no_header = browser.post("/api/captures", ok_stream(), content_type="text/event-stream")
    assert no_header.status_code == 403
    assert "CSRF" in orjson.loads(no_header.content)["error"]
    with_header = browser.post(
        "/api/captures", ok_stream(), content_type="text/event-stream", HTTP_X_CSRFTOKEN=token
    )
    assert with_header.status_code == 201
    # Reading needs no CSRF header.
    assert browser.get("/api/captures").status_code == 200


def test_forms_keep_csrf_when_logged_in(login_mode, user):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    capture = store(title="csrf")
    assert browser.post("/upload/", {"text": ok_stream().decode()}).status_code == 403
    assert browser.post(f"/c/{capture.slug}/rotate/").status_code == 403
    assert Capture.objects.get(pk=capture.pk).slug == capture.slug


def test_websockets_need_a_session_when_login_is_required(client, login_mode, user):
    capture = store(title="socket")
    login_mode.INSPECTOR_SHARING = False
    assert ws_connect("/ws/captures/") == (False, 4401)
    assert ws_connect(f"/ws/captures/{capture.slug}/") == (False, 4401)
    assert ws_ingest("/ws/ingest/") == {"connected": False, "code": 4401}

    client.force_login(user)
    cookie = session_cookie(client)
    assert ws_connect("/ws/captures/", cookie)[0] is True
    connected, snapshot = ws_connect(f"/ws/captures/{capture.slug}/", cookie)
    assert connected and snapshot["type"] == "snapshot"
    ingest = ws_ingest("/ws/ingest/", cookie)
    assert ingest["opened"]["type"] == "opened" and ingest["closed"]["outcome"] == "ok"


def test_a_session_socket_from_another_site_is_refused(client, login_mode, user):
    client.force_login(user)
    cookie = session_cookie(client)
    host = (b"host", b"inspector.example")
    evil = (b"origin", b"https://evil.example")
    assert ws_connect("/ws/captures/", cookie, host, evil) == (False, 4401)
    same = (b"origin", b"http://inspector.example")
    assert ws_connect("/ws/captures/", cookie, host, same)[0] is True


def test_websockets_stay_open_without_login(open_mode):
    capture = store(title="socket")
    assert ws_connect("/ws/captures/")[0] is True
    assert ws_connect(f"/ws/captures/{capture.slug}/")[0] is True
    assert ws_ingest("/ws/ingest/")["closed"]["outcome"] == "ok"


def _fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_a_real_server_with_login_required(daphne_factory, transactional_db):
    """daphne with INSPECTOR_REQUIRE_LOGIN=1 (and DEBUG on, so it serves static files)."""
    url = daphne_factory({"INSPECTOR_REQUIRE_LOGIN": "1", "INSPECTOR_API_TOKENS": "srv-token"})
    capture = store(title="served")
    status, headers, _ = _fetch(url + "/")
    assert status == 302 and headers["Location"] == "/accounts/login/?next=/"
    assert _fetch(url + "/health")[0] == 200
    status, headers, body = _fetch(url + "/static/inspector/inspector.css")
    assert status == 200 and b"--bg" in body
    status, headers, _ = _fetch(url + "/accounts/login/")
    assert status == 200 and headers["Content-Security-Policy"] == CSP
    assert _fetch(url + capture.get_absolute_url())[0] == 200  # the share link
    assert _fetch(url + "/api/captures")[0] == 401
    status, _, body = _fetch(url + "/api/captures", {"Authorization": "Bearer srv-token"})
    assert status == 200 and orjson.loads(body)["count"] >= 1
