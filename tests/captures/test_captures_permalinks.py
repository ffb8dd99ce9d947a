"""Permalinks: /c/<slug>/ and /c/<slug>/frames/<n>/, which opens the page
holding frame n with the row highlighted and each call's state at that
moment, all rendered on the server (no JavaScript needed)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from page_helpers import demo

from inspector.captures import models
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

DONE = "data: [DONE]\n\n"


def frame_data(*tools: dict, finish: str | None = None) -> str:
    delta: dict[str, Any] = {"tool_calls": list(tools)} if tools else {}
    payload = {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return "data: " + orjson.dumps(payload).decode() + "\n\n"


def tool(index: int, id: str | None = None, name: str | None = None, args: str | None = None):
    function = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    entry: dict[str, Any] = {"index": index, "function": function}
    if id is not None:
        entry["id"] = id
    return entry


def long_capture(fragments: int) -> models.Capture:
    """Frame 0 starts the call, frame k (1..fragments) holds fragment k, then
    the closing fragment and [DONE]."""
    frames = [frame_data(tool(0, "call_long", "write_file", '{"content": "'))]
    frames += [frame_data(tool(0, args=f"line {i} ")) for i in range(1, fragments + 1)]
    frames += [frame_data(tool(0, args='"}'), finish="tool_calls"), DONE]
    return store_stream("".join(frames).encode(), stream_format="sse")


def get(client, url: str, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def frame_url(capture: models.Capture, n: int) -> str:
    return reverse("frame", args=[capture.slug, n])


def row(page: str, element_id: str) -> str:
    match = re.search(rf'<tr id="{element_id}"[^>]*>.*?</tr>', page, re.S)
    assert match, f"no row {element_id}"
    return match.group(0)


def state_panel(page: str) -> str:
    start = page.index('<aside class="state')
    return page[start : page.index("</aside>", start)]


def test_urls_are_the_documented_ones():
    assert reverse("capture-list") == "/"
    assert reverse("upload") == "/upload/"
    assert reverse("capture", args=["abc"]) == "/c/abc/"
    assert reverse("frame", args=["abc", 7]) == "/c/abc/frames/7/"
    assert reverse("capture-raw", args=["abc"]) == "/c/abc/raw"
    assert reverse("capture-result", args=["abc"]) == "/c/abc/result.json"


def test_a_frame_permalink_opens_the_page_holding_it_with_the_row_highlighted(client):
    capture = long_capture(450)
    page = get(client, frame_url(capture, 250))
    assert "frames 200–299 of 453 · page 3 of 5" in page
    assert '<tr id="f-200"' in page and '<tr id="f-299"' in page and 'id="f-300"' not in page
    focus = row(page, "f-250")
    assert "is-focus" in focus and "data-focus" in focus and 'aria-current="true"' in focus
    assert page.count("is-focus") == 1 + page.count('<tr id="frag-0-250" class="is-focus"')
    assert '<h2 id="state-title">State at frame 250</h2>' in page


def test_frames_are_paged_by_number_range_not_offset(client):
    capture = long_capture(450)
    with CaptureQueriesContext(connection) as queries:
        page = get(client, capture.get_absolute_url(), page=4)
    assert '<tr id="f-300"' in page and '<tr id="f-399"' in page and 'id="f-400"' not in page
    frame_queries = [q["sql"] for q in queries.captured_queries if "captures_frame" in q["sql"]]
    assert frame_queries and all("OFFSET" not in sql.upper() for sql in frame_queries)
    assert all('"number" >= 300' in sql for sql in frame_queries)


def test_state_at_a_frame_shows_each_calls_identity_and_text_so_far_then(client):
    capture = demo("parallel_calls_ok.sse")
    # Frame 6 holds call 0's second fragment; call 1 has had one fragment (frame 4).
    panel = state_panel(get(client, frame_url(capture, 6)))
    first, second = panel.split('<section class="state-call')[1:3]
    assert "touched here" in first and "touched here" not in second
    assert '<code>call_wx</code> <span class="muted">since frame 1</span>' in first
    assert "25 characters in 2 fragments, the last at frame 6" in first
    assert "{&quot;city&quot;: &quot;Pa<mark>ris&quot;, &quot;units&quot;</mark>" in first
    assert "depth 1" in first and "complete" not in first
    assert "<mark>{&quot;timezone&quot;: </mark>" in second
    # Later events of a call are not shown as if they had happened yet.
    assert "settled" not in panel and "ended" not in panel


def test_state_before_identity_arrives_says_not_yet(client):
    stream = "".join(
        [
            frame_data(tool(0, args='{"q": ')),  # 0: arguments first, no id or name
            frame_data(tool(0, args='"x"}')),  # 1
            frame_data(tool(0, "call_late", "search")),  # 2: identity arrives
            frame_data(finish="tool_calls"),
            DONE,
        ]
    ).encode()
    capture = store_stream(stream, stream_format="sse")
    early = state_panel(get(client, frame_url(capture, 1)))
    assert early.count('<span class="muted">not yet</span>') == 2
    assert "<mark>&quot;x&quot;}</mark>" in early and "complete" in early
    late = state_panel(get(client, frame_url(capture, 2)))
    assert "<code>call_late</code>" in late and "not yet" not in late


def test_the_refusing_frame_permalink_shows_its_marks_and_the_calls_then(client):
    capture = demo("ambiguous_continuation.sse")
    page = get(client, frame_url(capture, 3))
    assert "is-focus" in row(page, "f-3") and "is-refusal" in row(page, "f-3")
    panel = state_panel(page)
    assert '<span class="mark mark-refusal">AMBIGUOUS_CONTINUATION</span>' in panel
    assert "touched no call" in panel
    assert panel.count('<section class="state-call') == 2
    # Previous and next frame links step through the stream.
    assert f'href="{frame_url(capture, 2)}#f-2" rel="prev"' in panel
    assert f'href="{frame_url(capture, 4)}#f-4" rel="next"' in panel


def test_a_frame_permalink_shows_each_calls_fragments_around_that_frame(client):
    capture = long_capture(450)
    page = get(client, frame_url(capture, 250))
    assert "fragments 250–274 of 452" in page  # pages of 25 fragments
    assert '<tr id="frag-0-250" class="is-focus">' in page


def test_fragments_are_paged_with_query_parameters(client):
    capture = long_capture(450)
    page = get(client, capture.get_absolute_url())  # pages of 25 fragments
    assert "fragments 0–24 of 452" in page and 'id="frag-0-25"' not in page
    assert f'href="/c/{capture.slug}/?call=0&amp;frag=2#call-0"' in page
    page = get(client, capture.get_absolute_url(), call=0, frag=3)
    assert "fragments 50–74 of 452" in page and '<tr id="frag-0-50"' in page
    assert "?call=0&amp;frag=2#call-0" in page and "?call=0&amp;frag=4#call-0" in page
    # Out-of-range pages clamp to the last one.
    assert "fragments 450–451 of 452" in get(client, capture.get_absolute_url(), call=0, frag=99)


@pytest.mark.parametrize(
    "params",
    [
        {"call": "²", "frag": "3"},  # str.isdigit() accepts it; int() does not
        {"call": "0", "frag": "²"},
        {"call": "٣", "frag": "3"},  # other scripts' digits are no position either
        {"call": "-0", "frag": " 3"},
        {"call": "9" * 5000, "frag": "9" * 5000},  # past int()'s digit limit
        {"calls": "²", "page": "²"},
    ],
)
def test_page_parameters_that_are_not_numbers_are_ignored(client, params):
    capture = long_capture(450)
    for url in (capture.get_absolute_url(), frame_url(capture, 10)):
        page = get(client, url, **params)
        assert "fragments 0–24 of 452" in page


def test_query_int_reads_only_ascii_digits():
    from inspector.captures.pages.paging import query_int

    assert [query_int(v) for v in ("0", "42", 7, "007")] == [0, 42, 7, 7]
    bad = ("", "²", "٣", "-1", "+1", " 1", "1_0", "1.0", None, -1, True, "9" * 19)
    assert [query_int(v) for v in bad] == [None] * len(bad)


def test_every_frame_and_fragment_row_has_a_permalink_and_a_copy_link_control(client):
    capture = demo("parallel_calls_ok.sse")
    page = get(client, capture.get_absolute_url())
    frame_rows = re.findall(r'<tr id="f-(\d+)"[^>]*>.*?</tr>', page, re.S)
    fragment_rows = re.findall(r'<tr id="frag-\d+-\d+"[^>]*>.*?</tr>', page, re.S)
    assert len(frame_rows) == capture.frame_count and len(fragment_rows) == 5
    for n in frame_rows:
        html = row(page, f"f-{n}")
        link = f"{frame_url(capture, int(n))}#f-{n}"
        assert f'<a href="{link}"' in html
        assert f'<button type="button" class="copy-link" data-href="{link}" hidden>' in html
    fragment = row(page, "frag-1-1")  # call 1's second fragment, at frame 7
    link = f"{frame_url(capture, 7)}#frag-1-1"
    assert f'<a href="{link}"' in fragment and f'data-href="{link}"' in fragment
    # The fragment's permalink lands on a page holding that fragment row.
    assert '<tr id="frag-1-1" class="is-focus">' in get(client, frame_url(capture, 7))


def test_pages_reference_script_only_as_a_deferred_static_file(client):
    capture = demo("parallel_calls_ok.sse")
    for url in (capture.get_absolute_url(), frame_url(capture, 3), "/", "/upload/"):
        scripts = re.findall(r"<script[^>]*>", get(client, url))
        expected = ['<script src="/static/inspector/inspector.js" defer>']
        if url == "/":  # the list watches for captures in progress
            expected.append('<script src="/static/inspector/live.js" defer>')
        if url.startswith("/c/"):  # the lens matrix and the Minimize button
            expected.append('<script src="/static/inspector/reproducers.js" defer>')
        if url == "/upload/":  # the progress bar while a file is sent
            expected.append('<script src="/static/inspector/upload.js" defer>')
        assert scripts == expected


def test_calls_are_paged_and_links_reach_calls_on_other_pages(client):
    starts = [frame_data(tool(i, f"call_{i}", f"tool_{i}", "{}")) for i in range(12)]
    stream = "".join([*starts, frame_data(finish="tool_calls"), DONE]).encode()
    capture = store_stream(stream, stream_format="sse")
    first = get(client, capture.get_absolute_url())
    assert 'id="call-9"' in first and 'id="call-10"' not in first
    assert f'<a href="{capture.get_absolute_url()}?calls=2#call-11">#11</a>' in row(first, "f-11")
    second = get(client, capture.get_absolute_url(), calls=2)
    assert 'id="call-10"' in second and 'id="call-11"' in second and 'id="call-9"' not in second
    # A frame permalink opens the call page of the calls that frame touched.
    touched = get(client, frame_url(capture, 11))
    assert 'id="call-11"' in touched and '<a href="#call-11">#11</a>' in row(touched, "f-11")


def many_calls_capture(calls: int = 30, rounds: int = 30) -> models.Capture:
    """`calls` calls started in frames 0..calls-1 (each with fragment 0), then
    `rounds` rounds of one fragment per call: fragment r+1 of call k is at
    frame calls + r * calls + k."""
    frames = [frame_data(tool(k, f"call_{k}", f"tool_{k}", '{"v": "')) for k in range(calls)]
    for r in range(rounds):
        frames += [frame_data(tool(k, args=f"{k}.{r} ")) for k in range(calls)]
    frames += [frame_data(*(tool(k, args='"}') for k in range(calls)), finish="tool_calls")]
    return store_stream("".join([*frames, DONE]).encode(), stream_format="sse")


def fragment_permalink_on(page: str, anchor: str) -> str:
    """The permalink that a page's fragment row offers (and its copy-link copies)."""
    match = re.search(r'data-href="([^"]+)"', row(page, anchor))
    assert match, f"no copy-link in {anchor}"
    return match.group(1).replace("&amp;", "&")


@pytest.mark.parametrize("position", [5, 25, 29])
def test_a_fragment_permalink_opens_the_page_holding_that_row_whatever_the_call(client, position):
    capture = many_calls_capture()
    calls_page = position // 10 + 1
    # Ten calls a page share 100 fragment rows: fragment 25 is on their third page.
    shown = get(client, capture.get_absolute_url(), calls=calls_page, call=position, frag=3)
    link = fragment_permalink_on(shown, f"frag-{position}-25")
    assert link.startswith(frame_url(capture, 30 + 24 * 30 + position))
    page = get(client, link.split("#")[0])
    assert f'<tr id="frag-{position}-25" class="is-focus">' in page


def test_state_at_a_frame_lists_the_calls_touched_there_first(client):
    capture = many_calls_capture()
    panel = state_panel(get(client, frame_url(capture, 30 + 24 * 30 + 25)))
    sections = panel.split('<section class="state-call')[1:]
    assert len(sections) == 20 and "More calls were under way" in panel
    assert '<a href="#call-25">#25</a>' in sections[0] and "touched here" in sections[0]
    assert all("touched here" not in section for section in sections[1:])
    # The last frame touched every call: none is left out for the cap.
    last = state_panel(get(client, frame_url(capture, capture.frame_count - 2)))
    assert last.count("touched here") == 20


@pytest.mark.parametrize("n", [-1, 8, 10_000])
def test_frames_out_of_range_are_404(client, n):
    capture = demo("ambiguous_continuation.sse")  # 8 frames: 0..7
    url = f"/c/{capture.slug}/frames/{n}/"
    assert client.get(url).status_code == 404


def test_unknown_slug_frame_is_404(client):
    assert client.get(reverse("frame", args=["missing", 0])).status_code == 404


def test_a_call_whose_arguments_came_first_says_where_it_was_first_seen(client):
    stream = "".join(
        [
            frame_data(tool(0, args='{"q": ')),  # 0
            frame_data(tool(0, args='"x"}')),  # 1
            frame_data(tool(0, "call_late", "search")),  # 2
            frame_data(finish="tool_calls"),
            DONE,
        ]
    ).encode()
    capture = store_stream(stream, stream_format="sse")
    page = get(client, capture.get_absolute_url())
    assert f'at frame</span> <a href="{frame_url(capture, 0)}#f-0">0</a>' in page
    assert "(arguments came before its id and name)" in page
    assert "started at frame <a" in page and '#f-2">2</a></span>' in page
