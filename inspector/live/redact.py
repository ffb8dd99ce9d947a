"""Secrets are forwarded, never stored.

The proxy forwards every request header (Authorization, api-key headers,
cookies included) but stores only the request body, and that with

* every field whose name looks like a secret (`api_key`, `password`,
  `access_token`, `client_secret`, plurals such as `tokens` or `api_keys`,
  ... at any depth), plus the names or shell-style patterns (`tenant_*`) in
  the setting `INSPECTOR_REDACT_FIELDS`: removed when its value is a string
  or number; when it is a list or object (`{"auth": {"x": ...}}`), every
  string and number inside becomes `[redacted]` and the shape is kept.
  The exception is a JSON Schema (a tool's `parameters` describing a
  `password` parameter): it is kept whole, since the tools are what makes
  a stored request worth reading;
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
        "session",
        "sessionid",
    }
)
SECRET_SUFFIXES = ("apikey", "password", "passwd", "secret", "token", "privatekey", "secretkey")
# A plural is as secret as its singular (`tokens`, `api_keys`), except for the
# suffix `token`: `max_tokens` and `prompt_tokens` are counts.  Plural tokens
# are secret by these names only.
PLURAL_TOKENS = ("accesstoken", "refreshtoken", "idtoken", "authtoken", "apitoken", "sessiontoken")
# Query parameters that carry credentials besides the secret field names:
# Google's `?key=`, SAS and S3 signatures, S3's `X-Amz-Credential`.
SECRET_QUERY_NAMES = frozenset({"key", "sig", "signature"})
SECRET_QUERY_SUFFIXES = ("key", "signature", "credential")
# The words of a JSON Schema: an object under a secret name made of these
# alone (and saying what it describes) is a schema, not a credential.
SCHEMA_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "$ref",
        "$defs",
        "$comment",
        "$anchor",
        "definitions",
        "type",
        "title",
        "description",
        "default",
        "examples",
        "example",
        "deprecated",
        "readOnly",
        "writeOnly",
        "nullable",
        "format",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "minContains",
        "maxContains",
        "minItems",
        "maxItems",
        "uniqueItems",
        "unevaluatedItems",
        "minLength",
        "maxLength",
        "pattern",
        "contentEncoding",
        "contentMediaType",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "strict",
    }
)
SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
# The schema words whose value maps names to schemas.
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# What makes an object of schema words describe something.
SCHEMA_MARKS = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "properties")
# Shorter values are too likely to occur by chance to be scrubbed from text.
MIN_SECRET_VALUE = 8

_PLURAL_SUFFIXES = tuple(s for s in SECRET_SUFFIXES if s != "token")
_NOT_NAME = re.compile(r"[^a-z0-9]")


def compact_name(name: str) -> str:
    return _NOT_NAME.sub("", name.lower())


def _setting_names(name: str) -> list[str]:
    names = getattr(settings, name) or ()
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
    if _is_secret_compact(compact, extra):
        return True
    stem = compact[:-1] if compact.endswith("s") else ""
    if not stem:
        return False
    if stem in SECRET_FIELDS or stem.endswith(PLURAL_TOKENS):
        return True
    return stem.endswith(_PLURAL_SUFFIXES)


def _is_secret_compact(compact: str, extra: frozenset[str]) -> bool:
    if compact in SECRET_FIELDS or compact in extra or compact.endswith(SECRET_SUFFIXES):
        return True
    return any(fnmatchcase(compact, p) for p in extra if "*" in p or "?" in p or "[" in p)


def is_secret_query_name(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """A secret field name, or one only a URL uses for credentials (`key`)."""
    compact = compact_name(name)
    if compact in SECRET_QUERY_NAMES or compact.endswith(SECRET_QUERY_SUFFIXES):
        return True
    return is_secret_field(name, extra)


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


def query_secret_values(query: str) -> list[str]:
    """The values of a query string's secret parameters (`?api-key=...`), so
    that the same key found elsewhere (an echo in the body) is scrubbed too."""
    fields = extra_fields()
    pairs = parse_qsl(query, keep_blank_values=True)
    values = {v.strip() for k, v in pairs if is_secret_query_name(k, fields)}
    return [v for v in values if len(v) >= MIN_SECRET_VALUE]


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
            if not (isinstance(key, str) and is_secret_field(key, fields)):
                out[key] = _redact(item, secrets, fields)
            elif isinstance(item, dict | list):
                out[key] = _blank(item, secrets, fields)
            elif isinstance(item, bool):
                out[key] = item
            # else: a secret string, number or null, removed with its name
        return out
    if isinstance(value, list):
        return [_redact(item, secrets, fields) for item in value]
    if isinstance(value, str):
        return _scrub(value, secrets)
    return value


def _blank(value: Any, secrets: tuple[str, ...], fields: frozenset[str]) -> Any:
    """What stays of a list or object under a secret name: its shape, every
    string and number replaced, except in the JSON Schemas it holds (or is),
    which are redacted like any other part of the body."""
    if isinstance(value, dict):
        if looks_like_schema(value):
            return _redact(value, secrets, fields)
        return {
            (_scrub(k, secrets) if isinstance(k, str) else k): _blank(v, secrets, fields)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_blank(item, secrets, fields) for item in value]
    if value is None or isinstance(value, bool):
        return value
    return REDACTED


def looks_like_schema(value: dict) -> bool:
    """Plainly a JSON Schema: only schema keywords, at least one of which
    says what is described, and a `type` (when there is one) naming JSON
    types.  `{"type": "bearer", "token": ...}` is not one."""
    if not value or not all(isinstance(k, str) and k in SCHEMA_KEYWORDS for k in value):
        return False
    if not any(mark in value for mark in SCHEMA_MARKS):
        return False
    kind = value.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if not all(isinstance(k, str) and k in SCHEMA_TYPES for k in kinds):
        return False
    return all(_holds_schemas(value.get(key)) for key in SCHEMA_MAPS)


def _holds_schemas(value: Any) -> bool:
    """`properties` (and the like) of a schema map names to schemas."""
    return value is None or (
        isinstance(value, dict) and all(isinstance(v, dict | bool) for v in value.values())
    )


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value replaced (for bodies that aren't JSON)."""
    return _scrub(text, tuple(secrets))


def redact_url(url: str, secrets: Iterable[str] = ()) -> str:
    """The URL without secret-looking query parameters (Azure's `api-key=`,
    Google's `key=`, signatures), without the personal ones of
    `INSPECTOR_DROP_FIELDS` (`code=`, `state=`) and without user:password."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        fields, personal = extra_fields(), drop_names()
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [
                (k, v)
                for k, v in pairs
                if not is_secret_query_name(k, fields) and compact_name(k) not in personal
            ]
        )
    out = urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    return _scrub(out, tuple(secrets))


def header_items(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    return [(str(k), str(v)) for k, v in headers.items()]


# -- what leaves for the upstream ---------------------------------------------------------


def inspector_cookie_names() -> frozenset[str]:
    """The inspector's own cookies: its login session and its CSRF token."""
    return frozenset({settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME})


def inspector_header_names() -> frozenset[str]:
    """The inspector's own request headers besides `X-Inspector-*`: the CSRF
    header, named by Django's `CSRF_HEADER_NAME` in its WSGI form
    (`HTTP_X_CSRFTOKEN` is the header `X-CSRFToken`)."""
    name = settings.CSRF_HEADER_NAME
    if name.startswith("HTTP_"):
        name = name[len("HTTP_") :]
    return frozenset({name.replace("_", "-").lower()})


def without_inspector_credentials(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """`headers` less the inspector's own login: its session and CSRF cookies
    are cut out of `Cookie` (the client's other cookies go on; a header left
    empty is dropped) and its CSRF header is dropped.  A browser logged in to
    the inspector sends them with every request, `/proxy/...` included, and
    the upstream must never receive a replayable login to the inspector."""
    own_cookies = inspector_cookie_names()
    own_headers = inspector_header_names()
    out = []
    for name, value in headers:
        lower = name.lower()
        if lower in own_headers:
            continue
        if lower == "cookie":
            kept = [
                part.strip()
                for part in value.split(";")
                if part.strip() and part.split("=", 1)[0].strip() not in own_cookies
            ]
            if not kept:
                continue
            value = "; ".join(kept)
        out.append((name, value))
    return out


# -- personal data: forwarded, never stored -------------------------------------------------


def drop_names() -> frozenset[str]:
    """`INSPECTOR_DROP_FIELDS`, compacted like `compact_name`."""
    return frozenset(compact_name(n) for n in _setting_names("INSPECTOR_DROP_FIELDS"))


def drop_personal_fields(body: Any) -> tuple[Any, list[str]]:
    """The request body without its top-level fields named in
    `INSPECTOR_DROP_FIELDS` (`user`, `metadata`, ...), and the names dropped.
    Only the top level: a tool's parameter schema may well describe a `state`
    or a `user`, and that is what makes a stored request worth reading."""
    names = drop_names()
    if not isinstance(body, dict) or not names:
        return body, []
    dropped = [k for k in body if isinstance(k, str) and compact_name(k) in names]
    if not dropped:
        return body, []
    return {k: v for k, v in body.items() if k not in dropped}, dropped


def dropped_query_names(query: str) -> list[str]:
    """The names of a query string's parameters that `redact_url` leaves out
    as personal data (`?code=`, `?state=`), in order, once each."""
    names = drop_names()
    found = [k for k, _ in parse_qsl(query, keep_blank_values=True) if compact_name(k) in names]
    return list(dict.fromkeys(found))


# -- secrets in logs ------------------------------------------------------------------------

_QUERY_PARAMETER = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&;#\s\"'?]+)=(?P<value>[^&;#\s\"']*)")


def redact_query_values(text: str) -> str:
    """`text` (a log line, a request line) with the value of every secret or
    personal query parameter it shows replaced: `?key=sk-1&q=x` becomes
    `?key=[redacted]&q=x`."""
    if "=" not in text:
        return text
    fields = extra_fields()
    personal = drop_names()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if is_secret_query_name(name, fields) or compact_name(name) in personal:
            return f"{match['lead']}{name}={REDACTED}"
        return match[0]

    return _QUERY_PARAMETER.sub(replace, text)


# -- secrets echoed in a response -----------------------------------------------------------


class StreamScrubber:
    """Replaces secret values in a byte stream that may be cut anywhere.

    An upstream that refuses a key often quotes it ("Incorrect API key
    provided: sk-..."); the stored copy of the response must not keep it, and
    a read can end in the middle of the key.  So the bytes that could be the
    start of a secret are held back until the next read (or `flush`) says
    whether they are: at most the longest secret's length less one byte."""

    def __init__(self, secrets: Iterable[str]) -> None:
        encoded = {s.encode() for s in secrets if s}
        self._secrets = sorted(encoded, key=len, reverse=True)
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        if not self._secrets:
            return data
        text = self._scrub(self._pending + data)
        held = self._held_back(text)
        self._pending = text[len(text) - held :] if held else b""
        return text[: len(text) - held]

    def flush(self) -> bytes:
        pending, self._pending = self._pending, b""
        return pending

    def _scrub(self, data: bytes) -> bytes:
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, REDACTED.encode())
        return data

    def _held_back(self, data: bytes) -> int:
        """The length of the longest end of `data` that begins a secret."""
        longest = 0
        for secret in self._secrets:
            # Ends shorter than the secret, and longer than one already found.
            start, end = max(0, len(data) - len(secret) + 1), len(data) - longest
            at = data.find(secret[:1], start, end)
            while at != -1:
                if secret.startswith(data[at:]):
                    longest = len(data) - at
                    break
                at = data.find(secret[:1], at + 1, end)
        return longest
