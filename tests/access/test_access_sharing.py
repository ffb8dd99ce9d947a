"""Share links: with login required, a capture's slug URL (and the read-only
pages under it) opens that one capture for anyone holding it, unless sharing
is off; revoking a link gives the capture a new slug and the old link answers
404 everywhere."""

from __future__ import annotations

import base64
import re

import pytest
from access_helpers import (
    PASSWORD,
    refused_stream,
    session_cookie,
    share_pages,
    store,
    ws_connect,
)
from django.test import Client

from inspector.captures.models import Capture

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_share_link_opens_its_capture_read_only(client, login_mode):
    capture = store(refused_stream(), title="shared one")
    for url in share_pages(capture.slug):
        response = client.get(url)
        assert response.status_code == 200, url
    page = client.get(capture.get_absolute_url()).content.decode()
    assert "shared one" in page
    # Read-only: no Minimize, no revoke, no upload/list/compare navigation, a login link.
    for hidden in (
        f"/c/{capture.slug}/minimize",
        f"/c/{capture.slug}/rotate/",
        'href="/upload/"',
        'href="/compare/',
        'action="/compare/"',
    ):
        assert hidden not in page, hidden
    assert "shared capture, read-only" in page
    assert f"/accounts/login/?next=/c/{capture.slug}/" in page
    lenses = client.get(f"/c/{capture.slug}/lenses/").content.decode()
    assert f"/api/captures/{capture.slug}/lenses" not in lenses  # the API needs a login


def test_a_share_link_visitor_cannot_change_the_capture(client, login_mode):
    capture = store(refused_stream(), title="shared one")
    before = Capture.objects.count()
    assert client.post(f"/c/{capture.slug}/minimize").status_code == 403
    assert client.post(f"/c/{capture.slug}/rotate/").status_code == 403
    assert client.post(capture.get_absolute_url()).status_code == 403
    assert Capture.objects.count() == before
    assert Capture.objects.get(pk=capture.pk).slug == capture.slug


def test_a_share_link_does_not_lead_to_other_captures(client, login_mode, user):
    original = store(refused_stream(), title="the original")
    derived = store(
        refused_stream(), title="the minimized", derived_from=original, derivation="minimized"
    )
    first = store(refused_stream(), title="try 1", retry_chain="grp-1", attempt=1)
    second = store(refused_stream(), title="try 2", retry_chain="grp-1", attempt=2)
    for shared, other in ((derived, original), (original, derived), (second, first)):
        page = client.get(shared.get_absolute_url()).content.decode()
        assert other.slug not in page, (shared.title, other.title)
    # A logged-in user sees the links.
    logged = Client()
    logged.force_login(user)
    assert original.slug in logged.get(derived.get_absolute_url()).content.decode()
    assert first.slug in logged.get(second.get_absolute_url()).content.decode()


def test_the_share_links_live_view_is_open_while_sharing_is_on(login_mode):
    capture = store(title="live view")
    connected, snapshot = ws_connect(f"/ws/captures/{capture.slug}/")
    assert connected and snapshot["type"] == "snapshot"
    assert ws_connect("/ws/captures/") == (False, 4401)  # the list stays guarded


def test_sharing_off_sends_share_links_to_the_login_form(client, login_mode, user):
    login_mode.INSPECTOR_SHARING = False
    capture = store(title="not shared")
    for url in share_pages(capture.slug):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next=/c/"), url
    assert ws_connect(f"/ws/captures/{capture.slug}/") == (False, 4401)
    # Logged in, all of it opens, read-write.
    client.force_login(user)
    for url in share_pages(capture.slug):
        assert client.get(url).status_code == 200, url
    assert ws_connect(f"/ws/captures/{capture.slug}/", session_cookie(client))[0] is True
    page = client.get(capture.get_absolute_url()).content.decode()
    assert f"/c/{capture.slug}/rotate/" in page and "Sharing is off" in page


def test_sharing_off_changes_nothing_without_login(client, open_mode):
    open_mode.INSPECTOR_SHARING = False
    capture = store(title="local")
    for url in share_pages(capture.slug):
        assert client.get(url).status_code == 200, url


def _assert_gone(client, slug: str) -> None:
    for url in share_pages(slug) + [
        f"/api/captures/{slug}",
        f"/api/captures/{slug}/lenient",
        f"/api/captures/{slug}/lenses",
    ]:
        assert client.get(url).status_code == 404, url
    assert ws_connect(f"/ws/captures/{slug}/") == (False, 4404)


def _assert_open(client, slug: str) -> None:
    for url in share_pages(slug) + [f"/api/captures/{slug}"]:
        assert client.get(url).status_code == 200, url
    connected, snapshot = ws_connect(f"/ws/captures/{slug}/")
    assert connected and snapshot["type"] == "snapshot"


def test_revoking_a_link_rotates_the_slug_and_the_old_link_is_gone(client, open_mode):
    capture = store(refused_stream(), title="leaked")
    old = capture.slug
    page = client.get(capture.get_absolute_url()).content.decode()
    assert f'<a class="button" href="/c/{old}/rotate/" data-rotate-button>' in page
    assert "Revoke link…" in page
    confirm = client.get(f"/c/{old}/rotate/").content.decode()  # asks first
    assert re.search(
        rf'<form class="rotate-confirm" method="post" action="/c/{old}/rotate/"', confirm
    )
    assert Capture.objects.get(pk=capture.pk).slug == old

    response = client.post(f"/c/{old}/rotate/", follow=True)
    new = Capture.objects.get(pk=capture.pk).slug
    assert new != old
    assert response.redirect_chain == [(f"/c/{new}/", 303)]
    assert b"Share link revoked" in response.content
    assert len(base64.urlsafe_b64decode(new + "==")) == 16  # 128 random bits, as new_slug
    _assert_gone(client, old)
    _assert_open(client, new)
    # Its frames, calls and assemblies came along.
    assert client.get(f"/c/{new}/frames/2/").status_code == 200
    assert b"INVALID_ARGUMENTS" in client.get(f"/c/{new}/").content


def test_revoking_needs_a_post_a_get_only_asks(client, open_mode):
    capture = store(title="get")
    page = client.get(f"/c/{capture.slug}/rotate/").content.decode()
    assert "Revoke this capture's link?" in page and 'name="csrfmiddlewaretoken"' in page
    assert f'<a class="button" href="/c/{capture.slug}/">Cancel</a>' in page
    assert client.put(f"/c/{capture.slug}/rotate/").status_code == 405
    assert client.get("/c/no-such-slug/rotate/").status_code == 404
    assert client.post("/c/no-such-slug/rotate/").status_code == 404
    assert Capture.objects.get(pk=capture.pk).slug == capture.slug


def test_a_logged_in_user_revokes_a_share_and_the_share_link_visitor_gets_404(login_mode, user):
    owner = Client(enforce_csrf_checks=True)
    owner.force_login(user)
    capture = store(title="shared then revoked")
    old = capture.slug
    visitor = Client()
    assert visitor.get(f"/c/{old}/").status_code == 200

    page = owner.get(f"/c/{old}/")
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1)
    assert owner.post(f"/c/{old}/rotate/").status_code == 403  # CSRF stays on
    response = owner.post(f"/c/{old}/rotate/", {"csrfmiddlewaretoken": token.decode()})
    new = Capture.objects.get(pk=capture.pk).slug
    assert response.status_code == 303 and response["Location"] == f"/c/{new}/"

    assert visitor.get(f"/c/{old}/").status_code == 404
    assert visitor.get(f"/c/{old}/frames/1/").status_code == 404
    assert visitor.get(f"/c/{old}/raw").status_code == 404
    assert ws_connect(f"/ws/captures/{old}/") == (False, 4404)
    assert visitor.get(f"/c/{new}/").status_code == 200  # the new link, shared anew


def test_a_capture_still_being_recorded_keeps_its_link(client, open_mode):
    from inspector.live.session import LiveCapture

    live = LiveCapture.open(stream_format="sse", title="recording")
    response = client.post(f"/c/{live.slug}/rotate/", follow=True)
    assert response.redirect_chain == [(f"/c/{live.slug}/", 303)]
    assert b"still being recorded" in response.content
    assert Capture.objects.filter(slug=live.slug).exists()
    live.close()


@pytest.mark.browser
def test_share_link_then_login_then_revoke_in_a_browser(
    page, daphne_factory, transactional_db, user, output_path
):
    """Chromium against daphne with INSPECTOR_REQUIRE_LOGIN=1: the share link
    shows the capture read-only; logging in from it comes back to it with the
    Revoke button; revoking moves it and the old link is gone."""
    from playwright.sync_api import expect

    url = daphne_factory({"INSPECTOR_REQUIRE_LOGIN": "1"})
    capture = store(refused_stream(), title="shared in a browser")
    old = capture.slug
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(url + f"/c/{old}/")
    expect(page.locator("h1")).to_have_text("shared in a browser")
    expect(page.locator(".shared-note")).to_have_text("shared capture, read-only")
    expect(page.locator("form.minimize")).to_have_count(0)
    expect(page.locator(".share-link")).to_have_count(0)
    expect(page.locator("header.site nav")).to_have_count(0)
    page.screenshot(path=f"{output_path}/share_view.png")

    page.click("header.site .account a")
    expect(page.locator("h1")).to_have_text("Log in")
    page.screenshot(path=f"{output_path}/login.png")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", PASSWORD)
    page.click("form.login button[type=submit]")
    expect(page).to_have_url(url + f"/c/{old}/")
    expect(page.locator("form.minimize")).to_have_count(1)
    expect(page.locator("header.site .account")).to_contain_text("ada")
    page.screenshot(path=f"{output_path}/logged_in.png")

    page.click(".share-link [data-rotate-button]")
    expect(page).to_have_url(url + f"/c/{old}/rotate/")
    expect(page.locator("h1")).to_have_text("Revoke this capture's link?")
    assert Capture.objects.get(pk=capture.pk).slug == old  # nothing yet
    page.click("form.rotate-confirm button[type=submit]")
    expect(page.locator(".message-success")).to_contain_text("Share link revoked")
    new = Capture.objects.get(pk=capture.pk).slug
    assert new != old
    expect(page).to_have_url(url + f"/c/{new}/")
    page.screenshot(path=f"{output_path}/revoked.png")
    assert page.goto(url + f"/c/{old}/").status == 404
