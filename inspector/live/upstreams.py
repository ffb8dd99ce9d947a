"""Named upstreams: where `/proxy/<name>/v1/...` forwards to.

The setting `INSPECTOR_UPSTREAMS` (from the environment variable of the
same name) reads

    openai=https://llm.example.com/v1,local=http://127.0.0.1:9100/v1

Each base URL is the one an OpenAI client would be given (it ends in `/v1`
for OpenAI-compatible servers); the proxy appends the rest of the path.  A
dict {name: base_url} in settings works too.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def parse_upstreams(text: str) -> dict[str, str]:
    """`name=url,name=url` -> {name: url without a trailing slash}."""
    out: dict[str, str] = {}
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, url = item.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise ImproperlyConfigured(
                f"INSPECTOR_UPSTREAMS: {item!r} is not name=url "
                "(example: openai=https://api.openai.com/v1)"
            )
        out[_name(name)] = _url(name, url)
    return out


def _name(name: str) -> str:
    if not NAME.match(name):
        raise ImproperlyConfigured(
            f"INSPECTOR_UPSTREAMS: upstream name {name!r} may hold only letters, digits, _ . -"
        )
    return name


def _url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ImproperlyConfigured(
            f"INSPECTOR_UPSTREAMS: upstream {name!r} needs an http(s) URL, not {url!r}"
        )
    if parts.query or parts.fragment:
        raise ImproperlyConfigured(
            f"INSPECTOR_UPSTREAMS: upstream {name!r}: a base URL takes no query or fragment"
        )
    return url.rstrip("/")


@lru_cache(maxsize=8)
def _parsed(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(parse_upstreams(text).items())


def upstreams() -> dict[str, str]:
    """The configured upstreams, {name: base URL}."""
    value = settings.INSPECTOR_UPSTREAMS
    if isinstance(value, dict):
        return {_name(str(k)): _url(str(k), str(v)) for k, v in value.items()}
    return dict(_parsed(str(value or "")))


def upstream_url(name: str, path: str) -> str | None:
    """The URL for `path` (below the base URL, e.g. "chat/completions") on
    the upstream `name`; None when no upstream has that name."""
    base = upstreams().get(name)
    if base is None:
        return None
    return f"{base}/{path.lstrip('/')}"


# A base URL's trailing API version, which Gemini's paths carry themselves.
_VERSION = re.compile(r"/v\d+(?:alpha|beta)?\d*$")


def upstream_root_url(name: str, path: str) -> str | None:
    """The URL for `path` below the upstream's root: its base URL without a
    trailing version (`https://generativelanguage.googleapis.com/v1beta` and
    `.../v1` both give `https://generativelanguage.googleapis.com`), for
    paths that name their version (`v1beta/models/gemini-2.5-flash:...`)."""
    base = upstreams().get(name)
    if base is None:
        return None
    return f"{_VERSION.sub('', base)}/{path.lstrip('/')}"
