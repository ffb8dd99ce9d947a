"""Revoking a share link: `GET /c/<slug>/rotate/` asks for confirmation (a
plain page with the form, no JavaScript), and `POST /c/<slug>/rotate/` gives the capture a new
random slug (128 bits, as every slug) and goes to its new address.  The old
link then answers 404 everywhere: its pages, downloads, the API and the
websocket, as they all find a capture by its slug.

Who may rotate is decided by `inspector.access` (a share-link visitor who is
not logged in gets 403); the form carries Django's CSRF token.  A capture
still being recorded keeps its slug until it ends: its recorder publishes to
the old address's channel-layer group and stores under it.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from .models import Capture, new_slug


def rotate_slug(capture: Capture) -> str:
    """Give `capture` a fresh slug; returns it.  Only the slug column is
    written, and only while the capture still has the slug it was read with."""
    for _ in range(3):
        slug = new_slug()
        try:
            with transaction.atomic():
                changed = Capture.objects.filter(pk=capture.pk, slug=capture.slug).update(slug=slug)
        except IntegrityError:  # 128 random bits collided: draw again
            continue
        if not changed:
            raise Http404("no such capture")
        capture.slug = slug
        return slug
    raise RuntimeError("could not draw a free slug")


@require_http_methods(["GET", "POST"])
def rotate_view(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the confirmation page; POST: the new slug, and its page."""
    try:
        capture = Capture.objects.only("id", "slug", "outcome", "title").get(slug=slug)
    except Capture.DoesNotExist:
        raise Http404("no such capture") from None
    if request.method == "GET":
        return render(request, "inspector/rotate_confirm.html", {"capture": capture})
    if capture.outcome == Capture.Outcome.LIVE:
        messages.error(
            request, "This capture is still being recorded: revoke its link once it ends."
        )
        response = HttpResponseRedirect(capture.get_absolute_url())
    else:
        rotate_slug(capture)
        messages.success(
            request, "Share link revoked: this is the capture's new address; the old one is gone."
        )
        response = HttpResponseRedirect(capture.get_absolute_url())
    response.status_code = 303
    return response
