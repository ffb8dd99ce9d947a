"""The timeline picture above the calls: a lane per call, marks that link to
their frames, escaped names, and a size that does not grow with the stream."""

from __future__ import annotations

import pytest
from capture_streams import DONE, chunk, sse, tool
from django.urls import reverse
from page_helpers import demo, html
from timeline_helpers import links, svg

from inspector.captures.pages.timeline_picture import BUCKETS, LANES
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'


def test_a_refused_capture_has_its_lanes_identity_fragments_and_the_refusal(client):
    capture = demo("invalid_arguments.sse")
    strict = capture.assemblies.get(policy="strict")
    picture = svg(html(client.get(capture.get_absolute_url())))
    marks = dict((title, href) for href, title in links(picture))
    call = strict.calls.get(position=0)
    frame = strict.refusal_frame
    assert marks[f"refusal INVALID_ARGUMENTS at frame {frame}"] == (
        reverse("frame", args=[capture.slug, frame]) + f"#f-{frame}"
    )
    assert f"#0 identity at frame {call.started_frame}" in marks
    assert f"#0 invalid at frame {frame}" in marks
    fragments = [title for title in marks if title.startswith("#0: ")]
    assert fragments and all("carried it" in title for title in fragments)
    assert "#0 run_query" in picture


def test_an_accepted_capture_shows_each_call_settling_and_no_refusal(client):
    capture = demo("parallel_calls_ok.sse")
    picture = svg(html(client.get(capture.get_absolute_url())))
    titles = [title for _, title in links(picture)]
    assert not any(title.startswith("refusal") for title in titles)
    assert (
        sum(title.startswith("#0 settled") or title.startswith("#1 settled") for title in titles)
        == 2
    )
    assert "#0 get_weather" in picture and "#1 get_time" in picture


def test_names_and_ids_are_escaped(client):
    capture = store_stream(
        sse(chunk(tool(0, XSS, XSS, '{"a":1}')), chunk(finish="tool_calls"), DONE),
        stream_format="sse",
    )
    picture = svg(html(client.get(capture.get_absolute_url())))
    assert "<script>" not in picture and "<img" not in picture
    assert "&lt;script&gt;" in picture


def test_marked_frames_are_ticks_that_say_what_they_mean(client):
    capture = store_stream(
        sse(chunk(tool(0, "c", "read", '{"a":1}')), chunk(finish="tool_calls"), DONE, DONE),
        stream_format="sse",
    )
    titles = [title for _, title in links(svg(html(client.get(capture.get_absolute_url()))))]
    assert "frame 3: data_after_done (frames came after the stream's end; they are ignored)" in [
        title.replace("&#x27;", "'") for title in titles
    ], titles


def test_the_picture_does_not_grow_with_the_stream(client):
    calls, rounds = 45, 200  # 45 calls: more than get a lane; 9,000 fragment frames
    items = [chunk(tool(k, f"call_{k}", f"tool_{k}", '{"v": "')) for k in range(calls)]
    for r in range(rounds):
        items += [chunk(tool(k, args=f"{r} ")) for k in range(calls)]
    items += [chunk(*(tool(k, args='"}') for k in range(calls)), finish="tool_calls"), DONE]
    capture = store_stream(sse(*items), stream_format="sse")
    picture = svg(html(client.get(capture.get_absolute_url())))
    assert picture.count('class="tl-label"') == LANES + 1  # + the marks strip's label
    assert f"+{calls - LANES} more calls" in picture
    # Interleaved calls fill every bucket: one merged bar per lane, not one per frame.
    assert picture.count('class="tl-frag"') == LANES
    assert len(picture) < 60 * BUCKETS * 10


def test_a_live_capture_has_no_picture_yet(client):
    from inspector.live.session import LiveCapture

    live = LiveCapture.open(stream_format="sse", title="in progress")
    live.append(sse(chunk(tool(0, "c", "read", '{"a":'))))
    assert 'class="tl-picture"' not in html(client.get(reverse("capture", args=[live.slug])))


def test_a_capture_stored_before_timelines_is_counted_from_the_database(client):
    capture = demo("invalid_arguments.sse")
    stored = svg(html(client.get(capture.get_absolute_url())))
    strict = capture.assemblies.get(policy="strict")
    assert strict.timeline["total"] == capture.frame_count
    capture.assemblies.filter(policy="strict").update(timeline=None)
    counted = svg(html(client.get(capture.get_absolute_url())))

    def ticks_and_rules(picture: str) -> list[str]:
        return [title for _, title in links(picture) if not title.startswith("#0: ")]

    assert ticks_and_rules(counted) == ticks_and_rules(stored)
    assert counted.count('class="tl-frag"') >= 1 and stored.count('class="tl-frag"') >= 1


def test_the_page_reads_one_query_for_a_stored_timeline(client, django_assert_num_queries):
    from inspector.captures.pages.assemblies import assemblies
    from inspector.captures.pages.timeline_picture import timeline_picture

    capture = demo("parallel_calls_ok.sse")
    strict = assemblies(capture)["strict"]
    with django_assert_num_queries(1):
        picture = timeline_picture(capture, strict, 2)
    assert "#1 get_time" in picture


@pytest.mark.parametrize(
    ("last", "ticks"),
    [(0, [0]), (4, [0, 1, 2, 3, 4]), (7, [0, 2, 4, 6]), (999, [0, 200, 400, 600, 800]),
     (100_005, [0, 50_000, 100_000])],
)  # fmt: skip
def test_the_axis_has_round_frame_numbers(last, ticks):
    from inspector.captures.pages.timeline_picture import nice_ticks

    assert nice_ticks(last) == ticks
