"""Secrets are forwarded, never stored.

The proxy forwards every request header (Authorization, api-key headers,
cookies included) but stores only the request body, and that with

* every field whose name looks like a secret removed (`api_key`, `password`,
  `access_token`, `client_secret`, ... at any depth, when its value is a
  string, number or null; a dict under such a name, e.g. a tool's JSON
  schema for a `password` parameter, is kept), plus the names or
  shell-style patterns (`tenant_*`) in the setting `INSPECTOR_REDACT_FIELDS`;
* every occurrence of a secret header's value (the API key itself) replaced
  by `[redacted]` in whatever string it hides in.

Names are compared without case and without `-`/`_`/spaces, so `api-key`,
`api_key` and `apiKey` are the same name.  `INSPECTOR_REDACT_HEADERS` adds
header names or patterns (`x-*-key`) to the built-in list; those headers are
still forwarded, and their values are scrubbed from what is stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings

REDACTED = "[redacted]"

# Request headers that carry credentials (lower case).
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
        "x-auth-token",
        "x-amz-security-token",
    }
)
# Body field names (compact: lower case, letters and digits only).
SECRET_FIELDS = frozenset(
    {
        "apikey",
        "authorization",
        "auth",
        "bearer",
        "cookie",
        "cookies",
        "credential",
        "credentials",
        "password",
        "passwd",
        "secret",
        "token",
        "privatekey",
        "accesskey",
        "secretkey",
        "sessionid",
    }
)
SECRET_SUFFIXES = ("apikey", "password", "passwd", "secret", "token", "privatekey", "secretkey")
# Shorter values are too likely to occur by chance to be scrubbed from text.
MIN_SECRET_VALUE = 8

_NOT_NAME = re.compile(r"[^a-z0-9]")


def compact_name(name: str) -> str:
    return _NOT_NAME.sub("", name.lower())


def _setting_names(name: str) -> list[str]:
    names = getattr(settings, name, ()) or ()
    if isinstance(names, str):
        names = names.split(",")
    return [n.strip() for n in names if n.strip()]


def _compact_pattern(pattern: str) -> str:
    """A name or pattern compacted like `compact_name`, wildcards kept."""
    return re.sub(r"[^a-z0-9*?\[\]]", "", pattern.lower())


def is_secret_header(name: str) -> bool:
    lower = name.lower()
    if lower in SECRET_HEADERS:
        return True
    if any(fnmatchcase(lower, p.lower()) for p in _setting_names("INSPECTOR_REDACT_HEADERS")):
        return True
    compact = compact_name(lower)
    return compact.endswith(("apikey", "secret", "token", "password")) or compact == "auth"


def extra_fields() -> frozenset[str]:
    return frozenset(_compact_pattern(n) for n in _setting_names("INSPECTOR_REDACT_FIELDS"))


def is_secret_field(name: str, extra: frozenset[str] = frozenset()) -> bool:
    compact = compact_name(name)
    if not compact:
        return False
    if compact in SECRET_FIELDS or compact in extra or compact.endswith(SECRET_SUFFIXES):
        return True
    return any(fnmatchcase(compact, p) for p in extra if "*" in p or "?" in p or "[" in p)


def secret_values(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The credential values in `headers`: each secret header's whole value,
    the token after an auth scheme ("Bearer sk-..." gives "sk-..."), and the
    values of cookies.  Longest first, so a scrub replaces whole keys."""
    values: set[str] = set()
    for name, value in headers:
        if not is_secret_header(name) or not value:
            continue
        value = value.strip()
        values.add(value)
        scheme, _, token = value.partition(" ")
        if token.strip() and scheme.isalpha():
            values.add(token.strip())
        if name.lower() in ("cookie", "set-cookie"):
            for part in value.split(";"):
                _, eq, cookie_value = part.partition("=")
                if eq:
                    values.add(cookie_value.strip())
    return sorted((v for v in values if len(v) >= MIN_SECRET_VALUE), key=len, reverse=True)


def redact_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers, each credential replaced by `[redacted]`: for logs and
    displays, never for forwarding."""
    return {name: REDACTED if is_secret_header(name) else value for name, value in headers}


def redact_body(value: Any, secrets: Iterable[str] = (), extra: Iterable[str] = ()) -> Any:
    """A copy of a parsed JSON body with secret fields removed and the
    `secrets` scrubbed out of every string (keys included)."""
    fields = extra_fields() | frozenset(compact_name(n) for n in extra)
    return _redact(value, tuple(secrets), fields)


def _redact(value: Any, secrets: tuple[str, ...], fields: frozenset[str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            key = _scrub(key, secrets) if isinstance(key, str) else key
            if (
                isinstance(key, str)
                and is_secret_field(key, fields)
                and (item is None or isinstance(item, str | int | float))
                and not isinstance(item, bool)
            ):
                continue
            out[key] = _redact(item, secrets, fields)
        return out
    if isinstance(value, list):
        return [_redact(item, secrets, fields) for item in value]
    if isinstance(value, str):
        return _scrub(value, secrets)
    return value


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value replaced (for bodies that aren't JSON)."""
    return _scrub(text, tuple(secrets))


def redact_url(url: str, secrets: Iterable[str] = ()) -> str:
    """The URL without secret-looking query parameters (Azure's `api-key=`)
    and without user:password."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        fields = extra_fields()
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, v) for k, v in pairs if not is_secret_field(k, fields)])
    out = urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    return _scrub(out, tuple(secrets))


def header_items(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in headers.items()]
