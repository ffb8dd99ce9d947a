"""Deployment settings read from the environment, as plain functions of an environ mapping.

`inspector.settings` calls these at import; tests call them with a dict.  Nothing here
imports Django's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from django.core.exceptions import ImproperlyConfigured

# The SECRET_KEY used when INSPECTOR_SECRET_KEY is unset: fine on a laptop, never in production.
DEV_SECRET_KEY = "dev-only-insecure-key-change-me-stream-inspector"
# What X-Forwarded-Proto the load balancer sets for a request that came in over HTTPS.
FORWARDED_PROTO_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off", ""})


def env_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean variable; any spelling but these is refused, so that a typo
    (`INSPECTOR_REQUIRE_LOGIN=y`) never silently means off."""
    value = environ.get(name)
    if value is None:
        return default
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean: use one of "
        + ", ".join(sorted(TRUE_WORDS | FALSE_WORDS - {""}))
    )


def env_list(environ: Mapping[str, str], name: str) -> list[str]:
    """A comma-separated variable as a list; blanks dropped."""
    return [item.strip() for item in environ.get(name, "").split(",") if item.strip()]


def csrf_trusted_origins(environ: Mapping[str, str]) -> list[str]:
    """INSPECTOR_CSRF_TRUSTED_ORIGINS, e.g. "https://inspector.example.com".

    Each needs its scheme (Django compares scheme and host); a bare host is refused here,
    at startup, rather than by a 403 on the first form post.
    """
    origins = env_list(environ, "INSPECTOR_CSRF_TRUSTED_ORIGINS")
    bare = [origin for origin in origins if "://" not in origin]
    if bare:
        raise ImproperlyConfigured(
            "INSPECTOR_CSRF_TRUSTED_ORIGINS entries need a scheme "
            f"(https://host), got: {', '.join(bare)}"
        )
    return origins


class HttpsProxy(NamedTuple):
    """Settings for daphne behind a load balancer that terminates HTTPS."""

    ssl_header: tuple[str, str] | None  # SECURE_PROXY_SSL_HEADER
    secure_cookies: bool  # SESSION_COOKIE_SECURE and CSRF_COOKIE_SECURE


def https_proxy(environ: Mapping[str, str]) -> HttpsProxy:
    """INSPECTOR_BEHIND_HTTPS_PROXY=1: trust X-Forwarded-Proto and send cookies over HTTPS only.

    Without the header Django sees plain HTTP, so a browser's `Origin: https://...` never
    matches and every form post (login included) fails its CSRF check.  Only set it when the
    balancer overwrites X-Forwarded-Proto: a client could otherwise claim HTTPS.
    """
    if not env_bool(environ, "INSPECTOR_BEHIND_HTTPS_PROXY", False):
        return HttpsProxy(ssl_header=None, secure_cookies=False)
    return HttpsProxy(ssl_header=FORWARDED_PROTO_HEADER, secure_cookies=True)


def unsafe_startup_reasons(*, require_login: bool, debug: bool, secret_key: str) -> list[str]:
    """Why a login-protected server must not start as configured (empty: it may).

    Login asks for protection: DEBUG pages show settings and tracebacks to anyone, and the
    public dev key lets anyone forge a session cookie, which would defeat it.
    """
    if not require_login:
        return []
    reasons = []
    if debug:
        reasons.append("DEBUG is on (set INSPECTOR_DEBUG=0)")
    if not secret_key or secret_key == DEV_SECRET_KEY:
        reasons.append("the development SECRET_KEY is in use (set INSPECTOR_SECRET_KEY)")
    elif weak_secret_key(secret_key):
        reasons.append(
            f"INSPECTOR_SECRET_KEY is weak: use at least {MIN_SECRET_KEY_LENGTH} characters "
            f"with at least {MIN_SECRET_KEY_UNIQUE} different ones (a random string)"
        )
    return reasons


MIN_SECRET_KEY_LENGTH = 50
MIN_SECRET_KEY_UNIQUE = 5


def weak_secret_key(key: str) -> bool:
    """Django's own deployment check's rule: short, or few distinct characters."""
    return len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < MIN_SECRET_KEY_UNIQUE


def refuse_unsafe_startup(
    environ: Mapping[str, str], *, require_login: bool, debug: bool, secret_key: str
) -> None:
    """Raise ImproperlyConfigured for an unsafe login setup, unless INSPECTOR_ALLOW_INSECURE=1.

    Only the environment at startup counts: tests that turn login on with override_settings
    never come here.  The test suite sets INSPECTOR_ALLOW_INSECURE=1 for the daphne servers
    it starts with INSPECTOR_REQUIRE_LOGIN=1 (tests/conftest.py).
    """
    if env_bool(environ, "INSPECTOR_ALLOW_INSECURE", False):
        return
    reasons = unsafe_startup_reasons(
        require_login=require_login, debug=debug, secret_key=secret_key
    )
    if reasons:
        raise ImproperlyConfigured(
            "INSPECTOR_REQUIRE_LOGIN=1 refused: "
            + "; ".join(reasons)
            + ". INSPECTOR_ALLOW_INSECURE=1 overrides this for local trials."
        )
