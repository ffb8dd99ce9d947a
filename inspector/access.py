"""Who may see and change what: login, share links, API tokens, security headers.

By default (local use) everything is open, as it always was.  Three settings,
all read at request time (so `override_settings` and the `settings` fixture
work):

* `INSPECTOR_REQUIRE_LOGIN` (env `INSPECTOR_REQUIRE_LOGIN=1`): Django auth
  guards every page, the upload form, the JSON API, ingest and the proxy.
* `INSPECTOR_SHARING` (default on; env `INSPECTOR_SHARING=0` turns it off):
  with login required, a capture's share link -- its unguessable slug URL and
  the read-only pages under it -- still opens that one capture for a visitor
  who is not logged in.  Off: every share link asks for a login.
* `INSPECTOR_API_TOKENS` (env, comma-separated): tokens scripts send as
  `Authorization: Bearer <token>` or `X-Inspector-Token: <token>`.  When any
  are configured (or login is required), the JSON API, ingest and the proxy
  need a valid token, or a logged-in session plus the CSRF header.  The proxy
  and guard routes take the token only as `X-Inspector-Token`: their
  `Authorization` header is the upstream's API key and is forwarded upstream
  (the proxy never forwards `X-Inspector-*` headers).

Why one middleware and not decorators: it is default-deny.  Every route,
including the proxy, guard and attempt views other modules add, is guarded
without anyone remembering a decorator; what stays open is the short allow
list below, in one place.  (Django 5.1's `LoginRequiredMiddleware` is
default-deny too, but knows neither share links nor tokens.)

Websockets are guarded by `WebsocketAccess`, mounted under channels'
`AuthMiddlewareStack` in `inspector.asgi`.

`ContentSecurityPolicyMiddleware` sets the Content-Security-Policy that
forbids inline script and inline style; Django's SecurityMiddleware sets
`X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin`.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.deprecation import MiddlewareMixin

TOKEN_HEADER = "X-Inspector-Token"

# Read-only pages of one capture, opened by its share link (GET and HEAD only).
SHARE_PAGES = frozenset(
    {
        "capture",
        "frame",
        "capture-raw",
        "capture-result",
        "capture-lenses",
        "capture-export",
        "capture-find",
    }
)
# Always reachable: logging in and out, the liveness probe.
PUBLIC_PAGES = frozenset({"login", "logout", "health"})
# Machine endpoints: JSON answers, tokens accepted.  The proxy and guard
# routes take the token only from X-Inspector-Token (see the module doc).
MACHINE_PREFIXES = ("/api/", "/proxy/", "/guard/")
PROXY_PREFIXES = ("/proxy/", "/guard/")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self' ws: wss:",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)


# --- settings, read at request time -------------------------------------------------------


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def login_required() -> bool:
    return _flag(settings.INSPECTOR_REQUIRE_LOGIN)


def sharing_enabled() -> bool:
    return _flag(settings.INSPECTOR_SHARING)


def parse_tokens(value: str | Iterable[str] | None) -> list[str]:
    """Tokens from a comma-separated string or a list; blanks dropped."""
    if not value:
        return []
    items = value.split(",") if isinstance(value, str) else value
    return [item.strip() for item in items if item and item.strip()]


def api_tokens() -> list[str]:
    return parse_tokens(settings.INSPECTOR_API_TOKENS)


def machines_guarded() -> bool:
    """Do the API, ingest and proxy need a token or a session?"""
    return login_required() or bool(api_tokens())


def valid_token(presented: str | None) -> bool:
    """`presented` is one of the configured tokens (compared in constant time)."""
    if not presented:
        return False
    given = presented.encode()
    found = False
    for token in api_tokens():
        found |= hmac.compare_digest(given, token.encode())
    return found


def bearer(value: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` value."""
    scheme, _, token = (value or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def presented_token(headers: Any, *, allow_bearer: bool = True) -> str | None:
    """The token a request carries: X-Inspector-Token, else (when allowed)
    `Authorization: Bearer`.  `headers` is a case-insensitive mapping."""
    token = (headers.get(TOKEN_HEADER) or "").strip()
    if token:
        return token
    return bearer(headers.get("Authorization")) if allow_bearer else None


def is_share_view(request: HttpRequest) -> bool:
    """The request came in through a share link, without a login: read-only."""
    return bool(getattr(request, "inspector_share_only", False))


def context(request: HttpRequest) -> dict[str, Any]:
    """Template context: `share_view` (hide what changes state or leads to
    other captures), `login_required`, `sharing`."""
    return {
        "share_view": is_share_view(request),
        "login_required": login_required(),
        "sharing": sharing_enabled(),
    }


# --- HTTP ---------------------------------------------------------------------------------


def unauthorized(request: HttpRequest, message: str) -> HttpResponse:
    """401 in JSON: the OpenAI error shape on proxy routes (the SDK raises an
    AuthenticationError with the message), `{"error": ...}` elsewhere."""
    if request.path_info.startswith(PROXY_PREFIXES):
        body: dict[str, Any] = {
            "error": {"message": message, "type": "inspector_unauthorized", "code": "unauthorized"}
        }
    else:
        body = {"error": message}
    response = JsonResponse(body, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="stream-inspector"'
    return response


def _csrf_failure(request: HttpRequest) -> str | None:
    """Why a session-authenticated unsafe request fails Django's CSRF check
    (token header or field, Origin/Referer), or None when it passes.  The API
    views are csrf_exempt for scripts; a browser's session must still prove
    the request came from our pages."""
    if request.method in SAFE_METHODS:
        return None

    def checked(req: HttpRequest) -> None:  # a stand-in view, not exempt
        return None

    rejected = CsrfViewMiddleware(lambda req: HttpResponse()).process_view(request, checked, (), {})
    if rejected is None:
        return None
    return "CSRF check failed: send the X-CSRFToken header from a page of this site"


class LoginRequiredUnlessShared(MiddlewareMixin):
    """Guards every resolved route (after AuthenticationMiddleware).

    Let through: login/logout, /health, static files, the admin (it guards
    itself), and, with login required, a capture's read-only share pages when
    sharing is on.  API, ingest and proxy requests need a valid token or a
    logged-in session (plus CSRF for unsafe methods) whenever tokens are
    configured or login is required; otherwise 401 JSON.  Other pages with
    login required: GET redirects to the login page, anything else is 403.
    """

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs):
        match = request.resolver_match
        name = match.url_name if match else None
        path = request.path_info
        if name in PUBLIC_PAGES or (match and match.app_name == "admin"):
            return None
        static = settings.STATIC_URL or ""
        if static and path.startswith("/" + static.lstrip("/")):
            return None
        if path.startswith(MACHINE_PREFIXES):
            return self._machine(request, path)
        if not login_required() or request.user.is_authenticated:
            return None
        if name in SHARE_PAGES and sharing_enabled() and request.method in ("GET", "HEAD"):
            request.inspector_share_only = True
            return None
        if request.method in ("GET", "HEAD"):
            from django.contrib.auth.views import redirect_to_login

            return redirect_to_login(request.get_full_path())
        return HttpResponse(
            "Log in to change captures: a share link opens a capture read-only.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )

    def _machine(self, request: HttpRequest, path: str) -> HttpResponse | None:
        if not machines_guarded():
            return None
        token = presented_token(request.headers, allow_bearer=not path.startswith(PROXY_PREFIXES))
        if token is not None:
            if valid_token(token):
                request.inspector_token = True
                return None
            return unauthorized(request, "invalid token")
        if request.user.is_authenticated:
            why = _csrf_failure(request)
            if why is None:
                return None
            return JsonResponse({"error": why}, status=403)
        return unauthorized(
            request,
            f"authentication required: send {TOKEN_HEADER}: <token>"
            + ("" if path.startswith(PROXY_PREFIXES) else " or Authorization: Bearer <token>"),
        )


class ContentSecurityPolicyMiddleware:
    """Content-Security-Policy on every HTML response: no inline script, no
    inline style, nothing from other origins.  Sync and async."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return self._protect(self.get_response(request))

    async def _acall(self, request):
        return self._protect(await self.get_response(request))

    @staticmethod
    def _protect(response: HttpResponse) -> HttpResponse:
        content_type = response.get("Content-Type", "")
        if content_type.startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        return response


# --- websockets ---------------------------------------------------------------------------

CAPTURE_SOCKET = re.compile(r"^/ws/captures/[^/]+/$")
LIST_SOCKET = re.compile(r"^/ws/captures/$")
INGEST_SOCKET = re.compile(r"^/ws/ingest/$")
# Close codes before the handshake (the client sees HTTP 403).
NEEDS_LOGIN = 4401
FORBIDDEN = 4403


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1")
        for name, value in scope.get("headers", [])
    }


def _same_origin(headers: dict[str, str]) -> bool:
    """A browser's socket comes from one of our pages (cross-site websocket
    hijacking rides on the session cookie); a program sends no Origin."""
    origin = headers.get("origin")
    if not origin:
        return True
    return urlsplit(origin).netloc.lower() == headers.get("host", "").lower()


def _socket_token(scope: dict[str, Any], headers: dict[str, str]) -> str | None:
    """The ingest socket's token: a header (as over HTTP), or `?token=`."""
    token = headers.get(TOKEN_HEADER.lower(), "").strip() or bearer(headers.get("authorization"))
    if token:
        return token
    query = scope.get("query_string", b"").decode("latin-1")
    for key, value in parse_qsl(query):
        if key == "token" and value:
            return value
    return None


def websocket_refusal(scope: dict[str, Any]) -> int | None:
    """The close code refusing this websocket, or None to let it through."""
    path = scope.get("path", "")
    headers = _headers(scope)
    user = scope.get("user")
    session_ok = bool(user is not None and user.is_authenticated) and _same_origin(headers)
    if INGEST_SOCKET.match(path):
        if not machines_guarded():
            return None
        token = _socket_token(scope, headers)
        if token is not None:
            return None if valid_token(token) else FORBIDDEN
        return None if session_ok else NEEDS_LOGIN
    if not login_required():
        return None
    if CAPTURE_SOCKET.match(path):
        # The share link's live view; with sharing off, only for a session.
        return None if sharing_enabled() or session_ok else NEEDS_LOGIN
    if LIST_SOCKET.match(path):
        return None if session_ok else NEEDS_LOGIN
    return None if session_ok else NEEDS_LOGIN


class WebsocketAccess:
    """ASGI middleware under AuthMiddlewareStack: refuses a websocket's
    handshake (close before accept) when `websocket_refusal` says so."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "websocket":
            code = websocket_refusal(scope)
            if code is not None:
                message = await receive()
                if message.get("type") == "websocket.connect":
                    await send({"type": "websocket.close", "code": code})
                return
        return await self.inner(scope, receive, send)


def websocket_application(router):
    """The websocket stack: session user, then the access check, then `router`."""
    from channels.auth import AuthMiddlewareStack  # needs the apps loaded

    return AuthMiddlewareStack(WebsocketAccess(router))
