"""Minimize's progress: the run the form names (`job`) reports the
minimizer's progress to an in-process registry, served at
`GET /c/<slug>/minimize/<job>` as JSON for the page's bar, or as a page that
reloads itself for people without JavaScript; an unknown job is a 404.

The minimizer stores its result from a worker thread with a connection of
its own, which sees only committed rows: these tests use `transactional_db`.
"""

from __future__ import annotations

import re

import pytest
from capture_streams import DONE, chunk, sse, tool
from django.urls import reverse
from page_helpers import demo, html

from inspector.captures import minimize_jobs
from inspector.captures.models import Capture
from inspector.captures.pages import minimize as minimize_page
from inspector.captures.store import store_stream
from inspector.minimize import NothingToMinimize
from inspector.minimize.progress import Progress

pytestmark = pytest.mark.django_db(transaction=True)

JOB = "job-test-0001"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'


def big_refused() -> Capture:
    """INVALID_ARGUMENTS (a stray brace) among many text frames."""
    noise = [chunk(content=f"word {n} ") for n in range(60)]
    data = sse(
        *noise[:30],
        chunk(tool(0, "call_a", "read", '{"path":')),
        *noise[30:],
        chunk(tool(0, args='"/a"}}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(data, stream_format="sse", title="many frames")
    assert capture.refusal_code == "INVALID_ARGUMENTS"
    return capture


def status_url(capture: Capture | str, job: str) -> str:
    slug = capture if isinstance(capture, str) else capture.slug
    return reverse("capture-minimize-status", args=[slug, job])


def progress(**fields: object) -> Progress:
    base = {"pass_name": "frames", "round": 1, "tests_run": 3, "size": 400, "frames": 5}
    return Progress(
        **{**base, "original_size": 900, "original_frames": 12, "budget_s": 30.0, **fields}
    )


def test_the_registry_follows_the_run_and_the_status_gives_the_result(client, monkeypatch):
    original = big_refused()
    seen: list[dict] = []
    real_report = minimize_jobs.report

    def observed(job, reported):
        real_report(job, reported)
        seen.append(minimize_jobs.status(job, original.slug))  # what a poll would get

    monkeypatch.setattr(minimize_jobs, "report", observed)
    response = client.post(reverse("capture-minimize", args=[original.slug]), {"job": JOB})
    derived = Capture.objects.get(derived_from=original)
    assert response.status_code == 303 and response["Location"] == derived.get_absolute_url()

    assert len(seen) >= 3
    assert all(record["state"] == "running" for record in seen)
    reports = [record["progress"] for record in seen]
    tried = [report["tests_run"] for report in reports]
    assert tried == sorted(tried) and tried[-1] > tried[0]
    for report in reports:
        assert report["original_size"] == original.byte_size == len(bytes(original.raw))
        assert report["original_frames"] >= report["frames"] > 0
        assert report["original_size"] >= report["size"] > 0
        assert report["budget_s"] == 30.0 and 0 <= report["fraction"] <= 1
    assert {report["original_frames"] for report in reports} == {reports[0]["original_frames"]}
    sizes = [report["size"] for report in reports]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    assert sizes[-1] == derived.byte_size
    assert [report["frames"] for report in reports][-1] < reports[0]["original_frames"]

    answer = client.get(status_url(original, JOB), HTTP_ACCEPT="application/json")
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    body = answer.json()
    assert body["state"] == "done" and body["result"] == derived.get_absolute_url()
    assert body["progress"] == reports[-1] and body["error"] == ""


def test_an_unknown_job_is_a_404(client):
    original = demo("identity_conflict.sse")
    for job in ("never-started-1", "bad id!", "x"):
        answer = client.get(status_url(original, job) + "?format=json")
        assert answer.status_code == 404
        assert answer.json() == {"error": "unknown job"}
    page = client.get(status_url(original, "never-started-1"), HTTP_ACCEPT="text/html")
    assert page.status_code == 404 and "Unknown job" in page.content.decode()
    assert 'http-equiv="refresh"' not in page.content.decode()


def test_a_job_is_known_only_on_its_capture(client):
    minimize_jobs.start(JOB, "slug-a")
    try:
        assert client.get(status_url("slug-a", JOB) + "?format=json").status_code == 200
        assert client.get(status_url("slug-b", JOB) + "?format=json").status_code == 404
    finally:
        minimize_jobs.fail(JOB, "test over")


def test_without_javascript_the_status_is_a_page_that_reloads(client):
    minimize_jobs.start(JOB, "slug-a")
    minimize_jobs.report(JOB, progress(elapsed_s=6.0))
    page = client.get(status_url("slug-a", JOB), HTTP_ACCEPT="text/html,*/*")
    text = page.content.decode()
    assert page.status_code == 200
    assert '<meta http-equiv="refresh" content="1">' in text
    assert '<progress max="1" value="0.2">' in text
    assert "3 candidates tried · 5 of 12 frames · 400 of 900 bytes · 6.0 of 30 s" in text

    minimize_jobs.finish(JOB, "/c/derived-slug/")
    text = client.get(status_url("slug-a", JOB), HTTP_ACCEPT="text/html").content.decode()
    assert '<meta http-equiv="refresh" content="3; url=/c/derived-slug/">' in text
    assert '<a href="/c/derived-slug/" data-minimize-result>' in text


def test_a_failed_job_says_why_as_text(client, monkeypatch):
    def nothing(capture, seconds=None, **kwargs):
        raise NothingToMinimize(XSS)

    monkeypatch.setattr(minimize_page, "minimize_capture", nothing)
    original = demo("identity_conflict.sse")
    client.post(reverse("capture-minimize", args=[original.slug]), {"job": JOB})
    body = client.get(status_url(original, JOB) + "?format=json").json()
    assert body["state"] == "failed" and body["error"] == XSS and body["result"] == ""
    text = client.get(status_url(original, JOB), HTTP_ACCEPT="text/html").content.decode()
    assert "<script>window" not in text and "<img src=x" not in text
    assert "Nothing was stored: &lt;script&gt;window.__xss=1&lt;/script&gt;" in text


def test_the_form_names_a_job_and_where_its_status_is(client):
    original = demo("identity_conflict.sse")
    page = html(client.get(original.get_absolute_url()))
    form = re.search(r'<form class="minimize".*?</form>', page, re.S).group(0)
    job = re.search(r'<input type="hidden" name="job" value="([^"]+)" data-minimize-job>', form)
    assert job and minimize_jobs.valid_job_id(job.group(1))
    assert f'data-status="{reverse("capture-minimize", args=[original.slug])}/"' in form
    assert f'href="{status_url(original, job.group(1))}"' in form  # for no JavaScript
    assert "<progress" in form
    second = html(client.get(original.get_absolute_url()))
    assert job.group(1) not in second  # a fresh one per page


def test_a_post_without_a_job_is_as_before(client):
    original = demo("identity_conflict.sse")
    response = client.post(reverse("capture-minimize", args=[original.slug]))
    assert response.status_code == 303
    assert Capture.objects.filter(derived_from=original).count() == 1


def test_the_registry_forgets_the_oldest(monkeypatch):
    monkeypatch.setattr(minimize_jobs, "MAX_JOBS", 3)
    monkeypatch.setattr(minimize_jobs, "_jobs", {})
    for n in range(5):
        minimize_jobs.start(f"job-forget-{n}", "slug")
    assert minimize_jobs.status("job-forget-0", "slug") is None
    assert minimize_jobs.status("job-forget-4", "slug")["state"] == "running"
