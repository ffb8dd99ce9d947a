"""Deployment settings from the environment (inspector/deploy.py): HTTPS load balancer,
CSRF trusted origins, and the refusal to start a login-protected server unsafely."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings

from inspector import deploy

BASE_DIR = Path(__file__).resolve().parent.parent
PROBE = (
    "from django.conf import settings as s; "
    "print(s.CSRF_TRUSTED_ORIGINS, s.SECURE_PROXY_SSL_HEADER, "
    "s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.ALLOWED_HOSTS[-1])"
)


def settings_process(**env: str) -> subprocess.CompletedProcess:
    """Import inspector.settings in a fresh interpreter with `env` on top of a clean one."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("INSPECTOR_") and k not in {"DATABASE_URL", "REDIS_URL"}
    }
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=BASE_DIR,
        env={**base, "DJANGO_SETTINGS_MODULE": "inspector.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- parsing -----------------------------------------------------------------------------


def test_csrf_trusted_origins_are_a_comma_list():
    env = {"INSPECTOR_CSRF_TRUSTED_ORIGINS": " https://a.example.com, ,https://b.example.com:8443"}
    assert deploy.csrf_trusted_origins(env) == [
        "https://a.example.com",
        "https://b.example.com:8443",
    ]
    assert deploy.csrf_trusted_origins({}) == []


def test_csrf_trusted_origin_without_scheme_is_refused():
    with pytest.raises(ImproperlyConfigured, match="inspector.example.com"):
        deploy.csrf_trusted_origins({"INSPECTOR_CSRF_TRUSTED_ORIGINS": "inspector.example.com"})


def test_https_proxy_trusts_forwarded_proto_and_secures_cookies_only_when_asked():
    assert deploy.https_proxy({}) == deploy.HttpsProxy(None, False)
    assert deploy.https_proxy({"INSPECTOR_BEHIND_HTTPS_PROXY": "0"}) == (None, False)
    on = deploy.https_proxy({"INSPECTOR_BEHIND_HTTPS_PROXY": "1"})
    assert on == (("HTTP_X_FORWARDED_PROTO", "https"), True)


def test_unsafe_startup_reasons():
    safe = {"debug": False, "secret_key": "a-real-secret-" + "q7W2e9R4t1Y8u3I6o0P5a" * 2}
    assert deploy.unsafe_startup_reasons(require_login=True, **safe) == []
    assert deploy.unsafe_startup_reasons(require_login=False, debug=True, secret_key="") == []
    both = deploy.unsafe_startup_reasons(
        require_login=True, debug=True, secret_key=deploy.DEV_SECRET_KEY
    )
    assert len(both) == 2 and "DEBUG" in both[0] and "SECRET_KEY" in both[1]


# --- the settings module, imported with an environment -----------------------------------


def test_settings_read_the_load_balancer_environment():
    out = settings_process(
        INSPECTOR_CSRF_TRUSTED_ORIGINS="https://inspector.example.com",
        INSPECTOR_BEHIND_HTTPS_PROXY="1",
        INSPECTOR_ALLOWED_HOSTS="inspector.example.com",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "['https://inspector.example.com']",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
        "True",
        "True",
        "inspector.example.com",
    ]


def test_settings_defaults_stay_local():
    out = settings_process()
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "None", "False", "False", "testserver"]


def test_login_with_debug_on_and_the_dev_key_refuses_to_start():
    out = settings_process(INSPECTOR_REQUIRE_LOGIN="1")
    assert out.returncode != 0
    assert "ImproperlyConfigured: INSPECTOR_REQUIRE_LOGIN=1 refused" in out.stderr
    assert "DEBUG is on" in out.stderr and "development SECRET_KEY" in out.stderr


def test_login_with_the_dev_key_refuses_to_start_even_with_debug_off():
    out = settings_process(INSPECTOR_REQUIRE_LOGIN="1", INSPECTOR_DEBUG="0")
    assert out.returncode != 0
    assert "development SECRET_KEY" in out.stderr and "DEBUG is on" not in out.stderr


def test_login_with_debug_off_and_a_real_key_starts():
    out = settings_process(
        INSPECTOR_REQUIRE_LOGIN="1", INSPECTOR_DEBUG="0", INSPECTOR_SECRET_KEY="s3cret-" * 8
    )
    assert out.returncode == 0, out.stderr


def test_allow_insecure_overrides_the_refusal():
    out = settings_process(INSPECTOR_REQUIRE_LOGIN="1", INSPECTOR_ALLOW_INSECURE="1")
    assert out.returncode == 0, out.stderr


# --- why the proxy header matters: the login form behind an HTTPS balancer ---------------


def post_login_over_forwarded_https(client: Client) -> int:
    """Status of a login post a browser sends to https://testserver through the balancer
    (bad credentials: 200 with the form again once CSRF passes, 403 when it fails)."""
    client.get("/accounts/login/")
    return client.post(
        "/accounts/login/",
        {
            "username": "nobody",
            "password": "wrong",
            "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        },
        HTTP_HOST="testserver",  # as the balancer forwards it: no port
        HTTP_ORIGIN="https://testserver",
        HTTP_X_FORWARDED_PROTO="https",
    ).status_code


@pytest.mark.django_db
def test_login_form_behind_https_balancer_needs_the_proxy_header():
    assert post_login_over_forwarded_https(Client(enforce_csrf_checks=True)) == 403
    proxy = deploy.https_proxy({"INSPECTOR_BEHIND_HTTPS_PROXY": "1"})
    with override_settings(SECURE_PROXY_SSL_HEADER=proxy.ssl_header):
        assert post_login_over_forwarded_https(Client(enforce_csrf_checks=True)) == 200
