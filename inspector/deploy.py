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


def env_bool(environ: Mapping[str, str], name: str, default: bool) -> bool:
    value = environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


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
