"""The timeline picture's text/reasoning lane and its two x axes: frames
(the default) and arrival time, for captures whose frames have one
(`?timeline=time`, offered by a plain link).  The lane's frames are the ones
the assembler's events name; every mark opens its own frame."""

from __future__ import annotations

import math
import re
from array import array
from pathlib import Path

import pytest
from capture_streams import DONE, chunk, sse, tool
from page_helpers import demo, html
from timeline_helpers import frame_of, links, marks, svg

from inspector.captures.intake import store_upload
from inspector.captures.models import Capture
from inspector.captures.pages.timeline_picture import LEFT
from inspector.captures.store import assemble_stream, store_stream
from inspector.captures.timeline_data import (
    BUCKETS,
    ProseFrames,
    bucket_of,
    join_runs,
    runs_from_buckets,
    summarize,
)

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'
# One stream of each dialect with text, reasoning or both.
PROSE_STREAMS = [
    "inspector/captures/demo/parallel_calls_ok.sse",  # chat content
    "inspector/captures/demo/responses_parallel_calls_ok.sse",  # output_text.delta
    "tests/conformance/responses/local_shell_call_builtin.sse",  # reasoning summary
    "inspector/captures/demo/messages_parallel_calls_ok.sse",  # thinking_delta, text_delta
    "tests/conformance/gemini/thought_parts_are_reasoning.sse",  # thought and text parts
]


def prose_frames(data: bytes) -> dict[str, list[int]]:
    """The frames the strict assembler's events say carried text or reasoning."""
    _, results = assemble_stream(data, "sse")
    out: dict[str, set[int]] = {"text": set(), "reasoning": set()}
    for event in results["strict"].events:
        if event.type in ("text_delta", "reasoning_delta"):
            out[event.type.removesuffix("_delta")].add(event.frame)
    return {kind: sorted(frames) for kind, frames in out.items()}


def timed_stream() -> tuple[bytes, list[float]]:
    """Two calls and some text; the second call arrives 2 s after the first
    one's frames (10 frames: 0-4 within 4 ms, 5-9 after the pause)."""
    data = sse(
        chunk(tool(0, "call_a", "lookup", "")),
        chunk(tool(0, args='{"q":')),
        chunk(tool(0, args='"x"}')),
        chunk(content="thinking aloud"),
        chunk(content=" still"),
        chunk(tool(1, "call_b", "fetch", "")),
        chunk(tool(1, args='{"u":')),
        chunk(tool(1, args='"y"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    return data, [0, 1, 2, 3, 4, 2000, 2001, 2002, 2003, 2004]


def timed_capture(**meta):
    data, arrived = timed_stream()
    return store_stream(data, stream_format="sse", arrived_ms=arrived, **meta)


def titled_frame(title: str) -> int:
    """The frame a mark's tooltip names: "... at frame N", "frame N: ...",
    or a run's "..., first–last"."""
    match = re.search(r"at frame (\d+)$", title) or re.match(r"frame (\d+):", title)
    match = match or re.search(r"carried it, (\d+)\u2013\d+$", title)
    assert match, title
    return int(match.group(1))


# --- the text/reasoning lane --------------------------------------------------------------


@pytest.mark.parametrize("path", PROSE_STREAMS)
def test_the_text_lane_holds_the_frames_the_assembler_named(client, path):
    data = (ROOT / path).read_bytes()
    expected = prose_frames(data)
    capture = store_stream(data, stream_format="sse")
    stored = capture.assemblies.get(policy="strict").timeline["prose"]
    assert [lane["kind"] for lane in stored] == [k for k in ("text", "reasoning") if expected[k]]
    for lane in stored:
        frames = expected[lane["kind"]]
        assert sum(count for _, _, count in lane["runs"]) == len(frames)
        assert lane["runs"][0][0] == frames[0]
    picture = svg(html(client.get(capture.get_absolute_url())))
    label = re.search(r'class="tl-label tl-prose-label"[^>]*>([^<]+)<', picture).group(1)
    assert label == " / ".join(lane["kind"] for lane in stored)
    for kind, frames in expected.items():
        bars = [(href, title) for href, title, css, _ in marks(picture) if css == f"tl-{kind}"]
        assert bool(bars) == bool(frames)
        for href, title in bars:
            assert title.startswith(f"{kind}: ") and frame_of(href) in frames


def test_following_frames_are_one_run_by_number_but_a_pause_splits_them_by_time():
    # 28 frames: each is about 11 buckets from the next, more than JOIN_BUCKETS.
    three, four, six = (bucket_of(frame, 28) for frame in (3, 4, 6))
    assert runs_from_buckets([(three, 3, 1), (four, 4, 1)], 28) == [[3, 4, 2]]
    assert runs_from_buckets([(three, 3, 1), (six, 6, 1)], 28) == [[3, 3, 1], [6, 6, 1]]
    # By arrival time, frames 3 and 4 with a pause between them are two bars.
    assert join_runs([(0, 3, 3, 1), (290, 4, 4, 1)]) == [[3, 3, 1], [4, 4, 1]]
    assert join_runs([(0, 3, 3, 1), (2, 4, 4, 1)]) == [[3, 4, 2]]


def test_a_stream_without_text_has_no_text_lane(client):
    capture = demo("invalid_arguments.sse")
    assert prose_frames((ROOT / "inspector/captures/demo/invalid_arguments.sse").read_bytes()) == {
        "text": [],
        "reasoning": [],
    }
    assert capture.assemblies.get(policy="strict").timeline["prose"] == []
    picture = svg(html(client.get(capture.get_absolute_url())))
    assert "tl-prose-label" not in picture and "tl-text" not in picture
    assert "tl-reasoning" not in picture


def test_an_upload_notes_its_text_from_the_drained_events_as_a_whole_store_does():
    data = (ROOT / "inspector/captures/demo/messages_parallel_calls_ok.sse").read_bytes()
    (uploaded,) = store_upload(data, name="thinking.sse")
    stored = store_stream(data, stream_format="sse")
    prose = [c.assemblies.get(policy="strict").timeline["prose"] for c in (uploaded, stored)]
    assert prose[0] == prose[1] and {lane["kind"] for lane in prose[0]} == {"text", "reasoning"}


# --- the time axis ------------------------------------------------------------------------


def test_the_time_axis_places_each_mark_by_its_arrival(client):
    capture = timed_capture()
    url = capture.get_absolute_url()
    by_frames = svg(html(client.get(url)))
    by_time = svg(html(client.get(url + "?timeline=time")))
    assert 'data-axis="frames"' in by_frames and 'data-axis="time"' in by_time
    arrived = timed_stream()[1]
    placed = sorted((arrived[frame_of(href)], x) for href, _, css, x in marks(by_time))
    assert [x for _, x in placed] == sorted(x for _, x in placed)  # x follows arrival
    identity = {t: x for h, t, _, x in marks(by_time) if t == "#1 identity at frame 5"}
    frames_identity = {t: x for h, t, _, x in marks(by_frames) if t == "#1 identity at frame 5"}
    # Frame 5 of 10 is mid-picture by number; by time it is 2000 of 2004 ms along.
    assert frames_identity["#1 identity at frame 5"] == pytest.approx(LEFT + 800 * 5 / 9, abs=1)
    assert identity["#1 identity at frame 5"] == pytest.approx(LEFT + 800 * 2000 / 2004, abs=1)
    assert ">2 s</text>" in by_time and ">arrived</text>" in by_time


def test_the_time_axis_is_bucketed_at_100k_frames():
    calls, rounds = 4, 25_000
    items = [chunk(tool(k, f"call_{k}", f"tool_{k}", '{"v": "')) for k in range(calls)]
    items += [chunk(tool(r % calls, args="x")) for r in range(calls * rounds)]
    items += [chunk(*(tool(k, args='"}') for k in range(calls)), finish="tool_calls"), DONE]
    _, results = assemble_stream(sse(*items), "sse")
    result = results["strict"]
    assert result.frames > 100_000
    # 5 s of frames, a minute's pause, 5 s more; and a frame with no arrival time.
    half = result.frames // 2
    arrived = array("d", (i * 0.1 if i < half else 60_000 + i * 0.1 for i in range(result.frames)))
    arrived[7] = math.nan
    summary = summarize(result, ProseFrames(), arrived)
    time = summary["time"]
    for by_frame, by_time in zip(summary["lanes"], time["lanes"], strict=True):
        assert len(by_frame["runs"]) == 1  # one bar across the stream by frame number
        assert len(by_time["runs"]) == 2  # two by arrival: the pause splits it
        assert sum(run[2] for run in by_time["runs"]) == len(result.calls[0].frames) - (
            by_time["position"] == 3  # frame 7 (call 3's) has no time and is not placed
        )
    assert len(time["clock"]) < 4 * BUCKETS and 7 not in [f for f, _ in time["clock"]]
    assert time["start"] == 0 and time["end"] == pytest.approx(60_000 + (result.frames - 1) * 0.1)


def test_without_arrival_times_the_picture_stays_on_frames_and_offers_no_switch(client):
    capture = demo("parallel_calls_ok.sse")
    assert capture.assemblies.get(policy="strict").timeline["time"] is None
    page = html(client.get(capture.get_absolute_url() + "?timeline=time"))
    assert 'data-axis="frames"' in svg(page) and "tl-switch" not in page


def switch_links(page: str) -> dict[str, tuple[str, bool]]:
    """The axis switch: words -> (href, whether it is the current axis)."""
    found = re.search(r'<p class="tl-switch">(.*?)</p>', page, re.S)
    assert found, "no switch"
    return {
        words: (href.replace("&amp;", "&"), bool(current))
        for href, current, words in re.findall(
            r'<a href="([^"]+)"( aria-current="true")?>([^<]+)</a>', found.group(1)
        )
    }


def test_the_switch_is_a_link_to_each_axis_that_keeps_the_page_s_other_parameters(client):
    capture = timed_capture()
    url = capture.get_absolute_url()
    assert switch_links(html(client.get(url))) == {
        "frame number": ("?timeline=frames#timeline", True),
        "arrival time": ("?timeline=time#timeline", False),
    }
    switched = switch_links(html(client.get(url + "?page=1&timeline=time")))
    assert switched == {
        "frame number": ("?page=1&timeline=frames#timeline", False),
        "arrival time": ("?page=1&timeline=time#timeline", True),
    }
    page = html(client.get(url + switched["frame number"][0].split("#")[0]))
    assert 'data-axis="frames"' in svg(page)


def test_a_closed_live_capture_offers_its_arrival_times(client):
    from inspector.live.session import LiveCapture

    data, _ = timed_stream()
    live = LiveCapture.open(stream_format="sse", title="recorded")
    for frame in data.split(b"\n\n")[:-1]:
        live.append(frame + b"\n\n")
    live.close()
    capture = Capture.objects.get(slug=live.slug)
    clock = capture.assemblies.get(policy="strict").timeline["time"]["clock"]
    assert clock and [ms for _, ms in clock] == sorted(ms for _, ms in clock)
    page = html(client.get(capture.get_absolute_url() + "?timeline=time"))
    assert 'data-axis="time"' in svg(page) and switch_links(page)["arrival time"][1]


def test_a_summary_stored_before_the_text_lane_and_time_axis_still_draws(client):
    capture = timed_capture()
    strict = capture.assemblies.get(policy="strict")
    url = capture.get_absolute_url()
    current = svg(html(client.get(url)))
    old = {key: value for key, value in strict.timeline.items() if key not in ("prose", "time")}
    capture.assemblies.filter(policy="strict").update(timeline=old)
    page = html(client.get(url + "?timeline=time"))
    drawn = svg(page)
    assert 'data-axis="frames"' in drawn and "tl-switch" not in page
    assert "tl-text" not in drawn and "tl-text" in current

    def calls(picture: str) -> list[tuple[str, str]]:
        return [(h, t) for h, t, css, _ in marks(picture) if css not in ("tl-text", "tl-reasoning")]

    assert calls(drawn) == calls(current)


# --- every mark, escaped, opens its frame -------------------------------------------------


@pytest.mark.parametrize("axis", ["frames", "time"])
@pytest.mark.parametrize(
    "name", ["invalid_arguments.sse", "messages_parallel_calls_ok.sse", "identity_conflict.sse"]
)
def test_every_mark_opens_the_frame_it_names(client, name, axis):
    data = (ROOT / "inspector/captures/demo" / name).read_bytes()
    frames = data.count(b"\n\n") + 1
    capture = store_stream(data, stream_format="sse", arrived_ms=[i * 10.0 for i in range(frames)])
    picture = svg(html(client.get(capture.get_absolute_url() + f"?timeline={axis}")))
    assert f'data-axis="{axis}"' in picture
    found = links(picture)
    assert found
    for href, title in found:
        assert frame_of(href) == titled_frame(title.replace("&#x27;", "'"))
    strict = capture.assemblies.get(policy="strict")
    kinds = {css for _, _, css, _ in marks(picture)}
    assert {"tl-start", "tl-frag"} <= kinds
    assert ("tl-refusal" in kinds) == bool(strict.refusal_code)
    assert ("tl-settle" in kinds) == strict.calls.filter(settled_frame__isnull=False).exists()


@pytest.mark.parametrize("axis", ["frames", "time"])
def test_hostile_names_and_parameters_are_escaped_on_both_axes(client, axis):
    data = sse(chunk(tool(0, XSS, XSS, '{"a":1}')), chunk(content=XSS, finish="tool_calls"), DONE)
    capture = store_stream(data, stream_format="sse", arrived_ms=[0.0, 5.0, 9.0])
    page = html(client.get(capture.get_absolute_url() + f"?timeline={axis}&x=%22%3E{XSS}"))
    picture = svg(page)
    assert "<script>" not in picture and "<img" not in picture
    assert "&lt;script&gt;" in picture
    switch = re.search(r'<p class="tl-switch">.*?</p>', page, re.S).group(0)
    hrefs = re.findall(r'<a href="([^"<>]*)"', switch)
    assert "<script>" not in switch and switch.count("<") == 6  # <p>, two <a>, and their ends
    assert len(hrefs) == 2 and all("x=%22%3E%3Cscript%3E" in href for href in hrefs)
