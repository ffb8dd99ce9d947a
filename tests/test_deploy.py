"""Deployment settings from the environment (inspector/deploy.py): HTTPS load balancer,
CSRF trusted origins."""

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
