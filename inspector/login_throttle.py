"""Failed logins are throttled, per user name and per client address.

After `INSPECTOR_LOGIN_FAILURES` failures (default 5) within
`INSPECTOR_LOGIN_WINDOW_SECONDS` (default 900) for one user name, or for one
address, the login form answers 429 with `Retry-After` until the window has
passed, without checking the password: guessing costs a window per handful
of tries.  A success clears its user name's count.  The counts live in
Django's cache, the process's memory unless CACHES says otherwise: with N
server processes a guesser gets at most N times the failures per window.
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


def _key(kind: str, value: str) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:32]
    return f"inspector:login-failures:{kind}:{digest}"


def _keys(request: HttpRequest) -> list[str]:
    name = (request.POST.get("username") or "").strip().lower()
    address = request.META.get("REMOTE_ADDR") or "?"
    return [_key("user", name), _key("address", address)]


def retry_after(request: HttpRequest) -> int | None:
    """Seconds until this request's user name and address may try again, or
    None when neither has used up its failures."""
    now = time.time()
    limit = settings.INSPECTOR_LOGIN_FAILURES
    waits = [
        int(first + settings.INSPECTOR_LOGIN_WINDOW_SECONDS - now) + 1
        for count, first in (cache.get(key, (0, now)) for key in _keys(request))
        if count >= limit
    ]
    return max(waits) if waits else None


def record_failure(request: HttpRequest) -> None:
    now, window = time.time(), settings.INSPECTOR_LOGIN_WINDOW_SECONDS
    for key in _keys(request):
        count, first = cache.get(key, (0, now))
        cache.set(key, (count + 1, first), timeout=max(1, int(first + window - now)))


class ThrottledLoginView(auth_views.LoginView):
    """Django's login view, refusing with 429 while its user or address is throttled."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        wait = retry_after(request)
        if wait is not None:
            response = HttpResponse(
                "Too many failed logins: try again later.\n",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        record_failure(self.request)
        return super().form_invalid(form)

    def form_valid(self, form) -> HttpResponse:
        cache.delete(_keys(self.request)[0])
        return super().form_valid(form)
