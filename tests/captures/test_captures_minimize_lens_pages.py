"""Minimize keeping a lens's divergence: the lens matrix offers a plain POST
form per diverging lens (no JavaScript needed), the minimize route takes a
`lens` field, stores the result as a new capture whose derivation names the
lens, and answers 400 for an unknown lens or one that does not diverge.

The minimizer stores its result from a worker thread with a connection of
its own, which sees only committed rows: these tests use `transactional_db`.
"""

from __future__ import annotations

import re
import time

import pytest
from capture_streams import DONE, chunk, sse, tool
from django.test import Client
from django.urls import reverse

from inspector.captures import minimize_jobs
from inspector.captures.models import Capture
from inspector.captures.store import store_stream
from inspector.lenses import openai_sdk
from inspector.minimize.lens import signature

pytestmark = pytest.mark.django_db(transaction=True)

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)


# Two calls on index 0 (Ollama), with noise: strict accepts both calls; LiteLLM
# and the OpenAI SDK merge them, Vercel and LangChain agree with strict.
REUSED_INDEX = sse(
    chunk(content="Reading both"),
    chunk(tool(0, "call_a", "read", '{"path":"/a"}')),
    chunk(content="and"),
    chunk(tool(0, "call_b", "read", '{"path":"/b"}')),
    chunk(finish="tool_calls"),
    DONE,
)
OK = sse(chunk(tool(0, "call_a", "read", '{"path":"/a"}')), chunk(finish="tool_calls"), DONE)
# Refused INVALID_ARGUMENTS (a stray brace); LiteLLM would still run the call.
STRAY = sse(
    chunk(content="Reading"),
    chunk(tool(0, "call_a", "read", '{"path":"/a"}}')),
    chunk(content="noise"),
    chunk(finish="tool_calls"),
    DONE,
)


def store(data: bytes, title: str = "lens minimize") -> Capture:
    return store_stream(data, stream_format="sse", title=title)


def fragment(client: Client, capture: Capture, status: int = 200) -> str:
    url = reverse("capture-lenses", args=[capture.slug]) + "?partial=1"
    response = client.get(url)
    # The lenses run in the background at the first visit ("computing…" while
    # they do, lens_cache.py): ask again as reproducers.js does.
    for _ in range(300):
        if response.status_code != 202 and b"lens-pending" not in response.content:
            break
        time.sleep(0.1)
        response = client.get(url)
    assert response.status_code == status
    return response.content.decode()


def lens_forms(page: str) -> dict[str, str]:
    """lens name -> its minimize form."""
    forms = re.findall(r'<form class="minimize-lens".*?</form>', page, re.S)
    return {re.search(r'name="lens" value="([^"]+)"', form).group(1): form for form in forms}


def minimize_url(capture: Capture) -> str:
    return reverse("capture-minimize", args=[capture.slug])


# --- the forms ---------------------------------------------------------------------------


def test_the_matrix_offers_a_form_for_each_diverging_lens(client, settings):
    settings.INSPECTOR_MINIMIZE_SECONDS = 9
    capture = store(REUSED_INDEX)
    page = fragment(client, capture)
    forms = lens_forms(page)
    assert set(forms) == {"openai", "litellm"}  # Vercel and LangChain agree with strict
    form = forms["litellm"]
    assert 'method="post"' in form and f'action="{minimize_url(capture)}"' in form
    assert 'name="csrfmiddlewaretoken"' in form
    assert "Minimize keeping LiteLLM&rsquo;s divergence" in form
    assert "up to 9 s" in page
    assert not INLINE_SCRIPT.search(page)
    # The page of its own (no JavaScript) has them too.
    whole = client.get(reverse("capture-lenses", args=[capture.slug])).content.decode()
    assert set(lens_forms(whole)) == {"openai", "litellm"}


def test_no_form_where_every_lens_agrees(client):
    assert lens_forms(fragment(client, store(OK))) == {}


def test_no_form_for_an_unavailable_lens(client, monkeypatch):
    def missing():
        raise ImportError("No module named 'openai'")

    monkeypatch.setattr(openai_sdk, "_load", missing)
    assert set(lens_forms(fragment(client, store(REUSED_INDEX)))) == {"litellm"}


def test_no_form_through_a_share_link(client, settings):
    settings.INSPECTOR_REQUIRE_LOGIN = True
    settings.INSPECTOR_SHARING = True
    settings.INSPECTOR_API_TOKENS = []
    capture = store(REUSED_INDEX)
    page = fragment(client, capture)
    assert "LiteLLM" in page and lens_forms(page) == {}


# --- the POST ----------------------------------------------------------------------------


def test_minimize_keeping_a_lens_divergence_of_an_accepted_capture(client):
    original = store(REUSED_INDEX, "two calls, one index")
    assert original.outcome == Capture.Outcome.OK
    response = client.post(minimize_url(original), {"lens": "litellm"})
    derived = Capture.objects.get(derived_from=original)
    assert response.status_code == 303
    assert response["Location"] == derived.get_absolute_url()
    assert derived.derivation == "minimized: keeps LiteLLM diverges: merges calls"
    assert derived.outcome == Capture.Outcome.OK
    assert derived.byte_size < original.byte_size
    assert signature("litellm", bytes(derived.raw), "sse")[1] == ("merges calls",)

    page = client.get(response["Location"]).content.decode()
    assert "keeps <code" in page and "LiteLLM diverges: merges calls</code>" in page
    assert "Minimized in" in page


def test_a_lens_divergence_of_a_refused_capture_keeps_the_refusal(client):
    original = store(STRAY)
    assert original.refusal_code == "INVALID_ARGUMENTS"
    assert client.post(minimize_url(original), {"lens": "litellm"}).status_code == 303
    derived = Capture.objects.get(derived_from=original)
    assert derived.refusal_code == "INVALID_ARGUMENTS"
    assert "LiteLLM diverges: runs a call strict refuses" in derived.derivation


def test_the_form_posts_with_its_csrf_token():
    original = store(REUSED_INDEX)
    strict = Client(enforce_csrf_checks=True)
    form = lens_forms(fragment(strict, original))["openai"]
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]+)"', form))
    assert strict.post(minimize_url(original), {"lens": "openai"}).status_code == 403
    response = strict.post(minimize_url(original), fields)
    assert response.status_code == 303
    derived = Capture.objects.get(derived_from=original)
    assert derived.derivation.startswith("minimized: keeps The OpenAI SDK diverges: merges calls")


@pytest.mark.parametrize(
    ("data", "lens", "message"),
    [
        (
            REUSED_INDEX,
            "nope",
            "unknown lens 'nope': use one of openai, anthropic, google-genai, vercel",
        ),
        (REUSED_INDEX, "vercel", "Vercel agrees with strict on this stream"),
        (OK, "litellm", "LiteLLM agrees with strict on this stream"),
    ],
)
def test_a_bad_lens_is_400(client, data, lens, message):
    original = store(data)
    response = client.post(minimize_url(original), {"lens": lens})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Capture.objects.count() == 1


def test_an_unavailable_lens_is_400(client, monkeypatch):
    def missing():
        raise ImportError("No module named 'openai'")

    monkeypatch.setattr(openai_sdk, "_load", missing)
    response = client.post(minimize_url(store(REUSED_INDEX)), {"lens": "openai"})
    assert response.status_code == 400
    assert "the openai lens is unavailable" in response.content.decode()


def test_without_a_lens_an_accepted_capture_is_still_nothing_to_minimize(client):
    original = store(REUSED_INDEX)
    response = client.post(minimize_url(original), {"lens": ""}, follow=True)
    assert "Nothing to minimize: it is not refused" in response.content.decode()
    assert Capture.objects.count() == 1


# --- its progress: the same job as the capture page's Minimize ---------------------------


def test_each_lens_form_names_a_job_of_its_own_and_where_its_status_is(client):
    capture = store(REUSED_INDEX)
    forms = lens_forms(fragment(client, capture))
    jobs = {}
    for lens, form in forms.items():
        job = re.search(r'name="job" value="([^"]+)" data-minimize-job', form).group(1)
        assert minimize_jobs.valid_job_id(job)
        jobs[lens] = job
        assert f'data-status="{minimize_url(capture)}/"' in form
        status = reverse("capture-minimize-status", args=[capture.slug, job])
        assert f'href="{status}"' in form  # for no JavaScript, inside <noscript>
        assert "<progress" in form and "data-minimize-progress" in form
    assert len(set(jobs.values())) == 2
    again = lens_forms(fragment(client, capture))
    assert jobs["litellm"] not in again["litellm"]  # a fresh one per page


def test_a_lens_job_reports_and_its_status_names_the_lens(client):
    original = store(REUSED_INDEX)
    job = "lens-job-0001"
    response = client.post(minimize_url(original), {"lens": "litellm", "job": job})
    derived = Capture.objects.get(derived_from=original)
    assert response.status_code == 303
    status = reverse("capture-minimize-status", args=[original.slug, job])
    body = client.get(status, HTTP_ACCEPT="application/json").json()
    assert (body["state"], body["lens"], body["result"]) == (
        "done",
        "litellm",
        derived.get_absolute_url(),
    )
    assert body["progress"]["tests_run"] > 0
    assert body["progress"]["size"] == derived.byte_size


def test_without_javascript_a_running_lens_job_is_a_page_that_reloads(client):
    minimize_jobs.start("lens-job-0002", "slug-a", "litellm")
    try:
        status = reverse("capture-minimize-status", args=["slug-a", "lens-job-0002"])
        page = client.get(status, HTTP_ACCEPT="text/html").content.decode()
        assert '<meta http-equiv="refresh" content="1">' in page
        assert "Minimize keeping LiteLLM&rsquo;s divergence" in page
        assert "on which LiteLLM still parts from strict the same way" in page
        assert '<progress max="1" value="0">' in page
    finally:
        minimize_jobs.fail("lens-job-0002", "test over")
