"""The live parts of the pages, as the server renders them: a capture still
being recorded carries what live.js needs (slug, outcome, last frame) and
loads it; the list marks captures in progress; retries of one request show
as an attempt strip, read in one query."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from page_helpers import html

from inspector.captures import models
from inspector.captures.store import store_stream
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
LIVE_SCRIPT = '<script src="/static/inspector/live.js" defer></script>'


def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> bytes:
    body: dict = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    body["choices"][0]["finish_reason"] = finish
    if usage is not None:
        body["usage"] = usage
    return b"data: " + orjson.dumps(body) + b"\n\n"


def text_frames(words: int) -> bytes:
    return b"".join(chunk({"content": f"w{i} "}) for i in range(words))


def ok_stream(usage: dict | None = None) -> bytes:
    return chunk({"content": "hi"}) + chunk({}, "stop", usage) + b"data: [DONE]\n\n"


def head(page: str) -> str:
    match = re.search(r'<section class="capture-head[^>]*>', page)
    assert match
    return match.group(0)


# --- the capture page ----------------------------------------------------------------------


def test_a_live_capture_page_carries_slug_outcome_and_last_frame_and_loads_live_js(client):
    live = LiveCapture.open(stream_format="sse", title="in progress")
    live.append(text_frames(3))
    page = html(client.get(reverse("capture", args=[live.slug])))
    tag = head(page)
    assert "data-live-capture" in tag
    assert f'data-slug="{live.slug}"' in tag
    assert 'data-outcome="live"' in tag
    assert 'data-last-frame="2"' in tag and 'data-follow="1"' in tag
    assert page.count(LIVE_SCRIPT) == 1
    assert 'id="frames-body"' in page and 'id="live-calls"' in page
    assert "data-live-status" in page and "data-live-refusal" in page
    assert [int(n) for n in re.findall(r'<tr id="f-(\d+)"', page)] == [0, 1, 2]
    assert "<script>" not in page  # no inline script


def test_a_live_capture_with_no_frames_yet_asks_for_all_of_them(client):
    live = LiveCapture.open(stream_format="sse")
    page = html(client.get(reverse("capture", args=[live.slug])))
    assert 'data-last-frame="-1"' in head(page)
    assert "No frames yet." in page and "No tool calls yet." in page


def test_a_long_live_capture_opens_at_its_newest_frames(client):
    live = LiveCapture.open(stream_format="sse")
    live.append(text_frames(250))
    url = reverse("capture", args=[live.slug])
    page = html(client.get(url))
    numbers = [int(n) for n in re.findall(r'<tr id="f-(\d+)"', page)]
    assert numbers == list(range(200, 250))
    assert 'data-last-frame="249"' in head(page) and 'data-follow="1"' in head(page)
    # An earlier page asked for keeps its rows; live.js then adds none below them.
    first = html(client.get(url + "?page=1"))
    assert 'data-last-frame="249"' in head(first) and 'data-follow="0"' in head(first)
    assert len(re.findall(r'<tr id="f-(\d+)"', first)) == 100


def test_a_closed_capture_page_is_not_live(client):
    live = LiveCapture.open(stream_format="sse")
    live.append(ok_stream())
    live.close()
    page = html(client.get(reverse("capture", args=[live.slug])))
    assert "data-live-capture" not in page and LIVE_SCRIPT not in page
    stored = store_stream(ok_stream(), stream_format="sse")
    page = html(client.get(stored.get_absolute_url()))
    assert "data-live-capture" not in page and LIVE_SCRIPT not in page


def test_a_frame_permalink_of_a_live_capture_is_a_fixed_view(client):
    live = LiveCapture.open(stream_format="sse")
    live.append(text_frames(3))
    page = html(client.get(reverse("frame", args=[live.slug, 1])))
    assert "data-live-capture" not in page and LIVE_SCRIPT not in page


# --- the list ------------------------------------------------------------------------------


def test_the_list_marks_captures_in_progress_and_loads_live_js(client):
    live = LiveCapture.open(stream_format="sse", title="still going")
    done = store_stream(ok_stream(), stream_format="sse", title="done")
    page = html(client.get(reverse("capture-list")))
    assert page.count(LIVE_SCRIPT) == 1
    assert "data-live-list" in page and "data-new-captures" in page
    live_row = re.search(rf'<tr data-slug="{live.slug}">.*?</tr>', page, re.S).group(0)
    done_row = re.search(rf'<tr data-slug="{done.slug}">.*?</tr>', page, re.S).group(0)
    assert re.search(r'class="badge outcome-live live-badge" data-outcome-badge>live<', live_row)
    assert "live-badge" not in done_row
    assert live_row.count('<td class="num muted"') == 2  # frames and size: known at close
    assert 'class="badge outcome-ok" data-outcome-badge>ok<' in done_row


# --- retries as attempts -------------------------------------------------------------------


def retry_chain(name: str, count: int) -> list[models.Capture]:
    """`count` attempts: all but the last cut off (retryable), the last ok with usage."""
    cut = (DEMO / "cut_connection.sse").read_bytes()
    usage = {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42}
    captures = []
    for number in range(1, count + 1):
        data = ok_stream(usage) if number == count else cut
        captures.append(
            store_stream(
                data,
                stream_format="sse",
                title=f"attempt {number}",
                source=models.Capture.Source.PROXY,
                retry_chain=name,
                attempt=number,
            )
        )
    return captures


def strip(page: str) -> str:
    match = re.search(r'<nav class="attempts".*?</nav>', page, re.S)
    assert match, "no attempt strip"
    return match.group(0)


def test_the_attempt_strip_lists_the_chain_in_order_with_links_refusals_and_usage(client):
    first, second, third = retry_chain("grp-1", 3)
    retry_chain("grp-other", 2)  # another chain: not listed
    page = html(client.get(second.get_absolute_url()))
    shown = strip(page)
    hrefs = re.findall(r'<a href="([^"]+)"', shown)
    assert hrefs == [c.get_absolute_url() for c in (first, second, third)]
    assert [int(n) for n in re.findall(r'class="attempt-n">(\d+)<', shown)] == [1, 2, 3]
    assert shown.count("INCOMPLETE_STREAM") == 2 and shown.count(">retryable<") == 2
    assert 'class="badge outcome-ok">ok<' in shown
    assert "12 in · 30 out" in shown
    current = re.findall(r'<li class="attempt is-current">\s*<a href="([^"]+)" aria-current', shown)
    assert current == [second.get_absolute_url()]
    assert "…" not in shown


def test_no_strip_without_a_retry_chain(client):
    capture = store_stream(ok_stream(), stream_format="sse")
    assert '<nav class="attempts"' not in html(client.get(capture.get_absolute_url()))


def test_a_long_chain_shows_a_bounded_window_around_this_attempt(client):
    captures = retry_chain("grp-long", 45)
    shown = strip(html(client.get(captures[29].get_absolute_url())))
    numbers = [int(n) for n in re.findall(r'class="attempt-n">(\d+)<', shown)]
    assert numbers == list(range(20, 40))
    assert shown.count('class="attempt-more"') == 2


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as context:
        html(client.get(url))
    return len(context.captured_queries)


def test_the_attempt_strip_costs_one_query_whatever_the_chain_length(client):
    alone = store_stream(ok_stream(), stream_format="sse")
    baseline = queries(client, alone.get_absolute_url())
    small = retry_chain("grp-small", 3)[-1]
    large = retry_chain("grp-large", 30)[-1]
    assert queries(client, small.get_absolute_url()) == baseline + 1
    assert queries(client, large.get_absolute_url()) == baseline + 1
    assert queries(client, reverse("frame", args=[large.slug, 0])) <= 8 + 1
