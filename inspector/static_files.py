"""Static files served by the ASGI application itself, whatever DEBUG says.

daphne serves no files, and `staticfiles_urlpatterns()` serves nothing once
DEBUG is off, so a deployment (INSPECTOR_DEBUG=0) lost its CSS and JS.  The
handler sits in front of Django in `inspector.asgi`, outside the middleware
chain: the async streaming views (the recording proxy relays an async
iterator frame by frame) keep an all-async chain.  WhiteNoise's middleware is
sync-only (6.12 declares no async support), hence Django's own ASGI handler.

Django's docs call its static view "grossly inefficient" for production; for
a dashboard with four small files behind a load balancer it is enough.  Files
are found by the staticfiles finders (no `collectstatic` needed), answered
with Last-Modified (so revalidation gets a 304) and cached for an hour: the
names carry no content hash, so a longer lifetime would keep stale JS after
an upgrade.
"""

from __future__ import annotations

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404, HttpRequest, HttpResponseBase

CACHE_CONTROL = "public, max-age=3600"


class StaticFilesApplication(ASGIStaticFilesHandler):
    """ASGI app: STATIC_URL paths from the finders, everything else to `application`."""

    def serve(self, request: HttpRequest) -> HttpResponseBase:
        """A path that climbs out of the static roots (`/static/%2e%2e/manage.py`)
        is a file that is not there: 404, not the 500 of an uncaught
        SuspiciousFileOperation."""
        try:
            return super().serve(request)
        except SuspiciousFileOperation:
            raise Http404("no such static file") from None

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response = await super().get_response_async(request)
        # Django's middleware (SecurityMiddleware) never sees these responses.
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        if response.status_code in (200, 304):
            response.headers.setdefault("Cache-Control", CACHE_CONTROL)
        return response
