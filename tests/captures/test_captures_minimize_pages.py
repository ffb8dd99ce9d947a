"""The Minimize button: a CSRF-protected POST on a refused capture that runs
the minimizer (in a worker thread, bounded by INSPECTOR_MINIMIZE_SECONDS) and
lands on the new capture, linked both ways; a clear message, never a 500,
when there is nothing to minimize.

The minimizer stores its result from a worker thread with a connection of
its own, which sees only committed rows: these tests use `transactional_db`.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from page_helpers import demo, html

from inspector.captures.models import Capture
from inspector.captures.pages import minimize as minimize_page
from inspector.captures.store import store_stream
from inspector.live.session import LiveCapture
from inspector.minimize import NothingToMinimize

pytestmark = pytest.mark.django_db(transaction=True)

OK_STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'


def minimize_url(capture: Capture) -> str:
    return reverse("capture-minimize", args=[capture.slug])


def minimize_form(page: str) -> str | None:
    found = re.search(r'<form class="minimize".*?</form>', page, re.S)
    return found.group(0) if found else None


def test_a_refused_capture_has_the_button_an_ok_one_does_not(client, settings):
    settings.INSPECTOR_MINIMIZE_SECONDS = 12
    refused = demo("identity_conflict.sse")
    form = minimize_form(html(client.get(refused.get_absolute_url())))
    assert form is not None
    assert 'method="post"' in form and f'action="{minimize_url(refused)}"' in form
    assert 'name="csrfmiddlewaretoken"' in form
    assert 'data-budget="12"' in form and "up to 12 s" in form
    assert "<code>IDENTITY_CONFLICT</code>" in form
    ok = store_stream(OK_STREAM, stream_format="sse")
    assert minimize_form(html(client.get(ok.get_absolute_url()))) is None


def test_minimize_lands_on_the_new_capture_linked_both_ways(client):
    original = demo("ambiguous_continuation.sse", "two calls, one index")
    response = client.post(minimize_url(original))
    derived = Capture.objects.get(derived_from=original)
    assert response.status_code == 303
    assert response["Location"] == derived.get_absolute_url()
    assert derived.refusal_code == original.refusal_code == "AMBIGUOUS_CONTINUATION"
    assert derived.frame_count < original.frame_count

    page = html(client.get(response["Location"]))
    derivation = re.search(r'<p class="derivation">(.*?)</p>', page, re.S).group(1)
    assert f'minimized from <a href="{original.get_absolute_url()}" data-original>' in derivation
    assert "two calls, one index</a>" in derivation
    assert ': keeps <code class="code-refusal">AMBIGUOUS_CONTINUATION</code>' in derivation
    assert (
        f"{derived.frame_count} of {original.frame_count} frames, "
        f"{derived.byte_size} of {original.byte_size} bytes"
    ) in derivation
    assert "Minimized in" in page  # the message, shown once
    assert "Minimized in" not in html(client.get(response["Location"]))
    # Compare with the original, prefilled.
    assert f'name="b" value="{original.slug}"' in page

    back = html(client.get(original.get_absolute_url()))
    listed = re.search(r'<div class="derivatives">.*?</div>', back, re.S).group(0)
    assert f'<a href="{derived.get_absolute_url()}" data-derivative>' in listed
    assert "minimized: keeps AMBIGUOUS_CONTINUATION" in listed
    assert f"a={original.slug}&amp;b={derived.slug}" in listed


def test_the_budget_is_the_setting(client, settings, monkeypatch):
    settings.INSPECTOR_MINIMIZE_SECONDS = 7
    seen = []
    real = minimize_page.minimize_capture

    def spy(capture, seconds=None, **kwargs):
        seen.append(seconds)
        return real(capture, seconds=seconds, **kwargs)

    monkeypatch.setattr(minimize_page, "minimize_capture", spy)
    original = demo("invalid_arguments.sse")
    assert client.post(minimize_url(original)).status_code == 303
    assert seen == [7.0]


def test_the_post_needs_the_csrf_token(settings):
    original = demo("identity_conflict.sse")
    strict = Client(enforce_csrf_checks=True)
    assert strict.post(minimize_url(original)).status_code == 403
    page = html(strict.get(original.get_absolute_url()))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = strict.post(minimize_url(original), {"csrfmiddlewaretoken": token})
    assert response.status_code == 303
    assert Capture.objects.filter(derived_from=original).count() == 1


def test_only_post(client):
    original = demo("identity_conflict.sse")
    assert client.get(minimize_url(original)).status_code == 405


def test_an_ok_capture_is_a_message_not_an_error(client):
    ok = store_stream(OK_STREAM, stream_format="sse")
    response = client.post(minimize_url(ok), follow=True)
    assert response.redirect_chain == [(ok.get_absolute_url(), 303)]
    page = html(response)
    assert "Nothing to minimize: it is not refused" in page
    assert 'class="message message-error"' in page
    assert Capture.objects.count() == 1


def test_nothing_to_minimize_is_a_message_not_an_error(client, monkeypatch):
    def nothing(capture, seconds=None, **kwargs):
        raise NothingToMinimize("the frames read back differently")

    monkeypatch.setattr(minimize_page, "minimize_capture", nothing)
    original = demo("identity_conflict.sse")
    response = client.post(minimize_url(original), follow=True)
    assert response.redirect_chain == [(original.get_absolute_url(), 303)]
    assert "Nothing to minimize: the frames read back differently." in html(response)
    assert Capture.objects.count() == 1


def test_a_capture_still_recorded_is_a_message(client):
    live = LiveCapture.open(stream_format="sse", title="in progress")
    page = html(client.get(reverse("capture", args=[live.slug])))
    assert minimize_form(page) is None
    response = client.post(reverse("capture-minimize", args=[live.slug]), follow=True)
    assert "Nothing to minimize: it is still being recorded." in html(response)


def test_unknown_capture_is_404(client):
    assert client.post(reverse("capture-minimize", args=["nope"])).status_code == 404


def test_a_derived_capture_whose_original_is_gone(client):
    original = demo("identity_conflict.sse")
    client.post(minimize_url(original))
    derived = Capture.objects.get(derived_from=original)
    original.delete()
    page = html(client.get(derived.get_absolute_url()))
    assert "minimized from a capture since deleted: keeps" in page


def test_titles_stay_text(client):
    original = demo("identity_conflict.sse", XSS)
    client.post(minimize_url(original))
    derived = Capture.objects.get(derived_from=original)
    for url in (derived.get_absolute_url(), original.get_absolute_url()):
        page = html(client.get(url))
        assert "<script>window" not in page and "<img src=x" not in page
        assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page


PAGE_QUERIES = 11  # as in test_captures_pages: the derivation is joined in


def test_pages_of_original_and_derived_stay_within_the_bound(client, django_assert_max_num_queries):
    original = demo("ambiguous_continuation.sse")
    client.post(minimize_url(original))
    client.post(minimize_url(original))
    derived = Capture.objects.filter(derived_from=original).first()
    for capture in (original, derived):
        for url in (capture.get_absolute_url(), reverse("frame", args=[capture.slug, 1])):
            with django_assert_max_num_queries(PAGE_QUERIES):
                html(client.get(url))
