"""The frames panel's parsed rows (what each frame did, from the strict
assembler's events, in its dialect's terms), the folded raw text and
`?raw=1`, the filters (`?frames=call-N|anomalies|text`) with their paging,
links and query counts, and escaping of every new field."""

from __future__ import annotations

import html as html_module
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from capture_streams import DONE, chunk, sse, tool
from dialect_streams import GEMINI_OK, MESSAGES_OK, RESPONSES_OK
from django.urls import reverse
from page_helpers import html

from inspector.assembly.jsontext import compact
from inspector.captures import frame_did, store
from inspector.captures.frame_did import ITEM_TEXT
from inspector.captures.intake import store_upload
from inspector.captures.pages.frame_filter import filtered_frames, frame_filter
from inspector.captures.pages.frame_summary import did_groups
from inspector.captures.pages.frames import FRAMES_PER_PAGE, live_frame_row
from inspector.captures.store import store_stream
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db

CHAT = sse(
    chunk(tool(0, "call_A", "read_file", '{"p":')),  # 0: id, name, start, fragment
    chunk(tool(0, "", "", "1}")),  # 1: empty id and name ignored; settles
    chunk(tool(3)),  # 2: dropped (empty_delta)
    {**chunk(), "choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]},  # 3
    chunk(content="Hi there"),  # 4: text
    chunk(finish="weird_reason"),  # 5: finish, unknown_finish_reason
    {**chunk(), "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}},  # 6
    DONE,  # 7
)


def upload(data: bytes):
    (capture,) = store_upload(data, name="s.sse")
    return capture


def row(page: str, number: int) -> str:
    found = re.search(rf'<tr id="f-{number}".*?</tr>', page, re.S)
    assert found, number
    return found.group(0)


def did_cell(page: str, number: int) -> str:
    return re.search(r'<td class="did">(.*?)</td>', row(page, number), re.S).group(1)


def text_of(cell: str) -> str:
    """A cell's text, tags dropped, entities read, spaces joined."""
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", cell)).split())


# --- the row summary, each dialect -------------------------------------------------------


def test_chat_rows_say_call_identity_fragment_ignored_names_text_finish_usage(client):
    capture = upload(CHAT)
    page = html(client.get(capture.get_absolute_url()))
    first = text_of(did_cell(page, 0))
    assert first == (
        "#0 read_file id call_A function.name read_file tool_calls[] started "
        'function.arguments {"p":'
    )
    assert '<a class="did-call" href="#call-0">#0 read_file</a>' in did_cell(page, 0)
    ignored = text_of(did_cell(page, 1))
    assert 'id "" ignored' in ignored and 'function.name "" ignored' in ignored
    assert ignored.endswith("function.arguments 1} settled")
    assert text_of(did_cell(page, 2)) == "dropped empty_delta"
    assert "is-dropped" in row(page, 2)
    assert text_of(did_cell(page, 3)) == "reasoning_content think"
    assert text_of(did_cell(page, 4)) == "content Hi there"
    assert text_of(did_cell(page, 5)) == "finish_reason weird_reason anomaly unknown_finish_reason"
    assert "is-anomaly" in row(page, 5)
    assert text_of(did_cell(page, 6)) == "usage 3 in · 5 out"
    assert text_of(did_cell(page, 7)) == "[DONE]"


def test_an_upload_in_many_batches_files_the_same_rows_as_one_store(settings):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 2
    for data in (CHAT, RESPONSES_OK, MESSAGES_OK, GEMINI_OK):
        whole = store_stream(data, stream_format="sse")
        batched = upload(data)
        assert list(batched.frames.values_list("did", "has_text")) == list(
            whole.frames.values_list("did", "has_text")
        )
        assert any(did for did, _ in whole.frames.values_list("did", "has_text"))


# Arguments before their call's header: frames 0 and 1 are held, and become
# the call's only when frame 2 names it, after the batches that stored them.
ARGUMENTS_BEFORE_ID = sse(
    chunk(tool(0, args='{"city":')),
    chunk(tool(0, args='"Paris"')),
    chunk(tool(0, "call_A", "get_weather")),
    chunk(tool(1, "call_B", "search", '{"q":"x"}')),
    chunk(tool(0, args="}")),
    chunk(finish="tool_calls"),
    DONE,
)
OWN_CASES = sorted(
    path
    for folder in ("responses", "messages", "gemini")
    for path in (Path(__file__).parent.parent / "conformance" / folder).glob("*.sse")
)


@pytest.mark.parametrize("batch", [1, 2, 5])
@pytest.mark.parametrize("lookups", [store.LOOKUPS, 0])  # 0: the close walks every frame
def test_the_calls_and_marks_of_frames_stored_batch_by_batch_match_one_store(
    settings, monkeypatch, batch, lookups
):
    """The writer stores each frame with the calls it touched as far as
    known, and the close writes again only what changed since (a frame
    touched late, the frames of calls that never started, the marked
    ones): the rows end as a store of the whole stream writes them."""
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = batch
    monkeypatch.setattr(store, "LOOKUPS", lookups)
    streams = [CHAT, ARGUMENTS_BEFORE_ID, many_frames(7, drop_every=3)]
    streams += [path.read_bytes() for path in OWN_CASES]
    for data in streams:
        whole, batched = store_stream(data, stream_format="sse"), upload(data)
        assert rows(batched) == rows(whole), data[:200]


def rows(capture) -> list[tuple]:
    """(number, calls, marks, did) of each frame; an anomaly item's call as a
    batch filed before the call started knows it (None: `frame_did`)."""
    fields = ("number", "calls", "marks", "did")
    return [
        (*row[:3], [item[:2] if item[0] == "anomaly" else item for item in row[3]])
        for row in capture.frames.order_by("number").values_list(*fields)
    ]


def test_what_the_end_of_a_stream_did_reaches_a_frame_stored_before_it(settings):
    """A missing `[DONE]` is an anomaly of the last frame, found only when
    the input ends, after a batch stored that frame: it is added to it."""
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 1
    data = sse(chunk(tool(0, "call_A", "f", "{}")), chunk(finish="tool_calls"))
    last = upload(data).frames.get(number=1)
    assert last.marks == ["missing_done"]
    assert last.did == [["finish", 0, "tool_calls"], ["anomaly", "missing_done", None]]
    first = upload(ARGUMENTS_BEFORE_ID).frames.order_by("number").values_list("calls", flat=True)
    assert list(first)[:3] == [[0], [0], [0]]
    assert len(OWN_CASES) > 40


def test_responses_rows_in_responses_terms(client):
    capture = upload(RESPONSES_OK)
    page = html(client.get(capture.get_absolute_url()))
    assert text_of(did_cell(page, 4)) == "output_text.delta Checking flights"
    assert text_of(did_cell(page, 14)) == (
        "#2 search_hotels call_id call_hotel_3K name search_hotels output_item.added"
    )
    assert (
        text_of(did_cell(page, 16)) == '#2 search_hotels function_call_arguments.delta {"city":"Lis'
    )
    last = text_of(did_cell(page, 25))
    assert "response.usage input_tokens 212" in last
    assert "status completed" in last and last.endswith("response.completed")


def test_messages_rows_in_anthropic_terms(client):
    capture = upload(MESSAGES_OK)
    page = html(client.get(capture.get_absolute_url()))
    assert text_of(did_cell(page, 3)) == "thinking_delta The user wants a flight and a hotel;"
    assert text_of(did_cell(page, 8)).startswith("text_delta I'll search the web")
    assert text_of(did_cell(page, 17)) == '#1 search_flights input_json_delta {"from": "BER",'
    assert text_of(did_cell(page, 16)).startswith("#1 search_flights tool_use id toolu_01Flight")
    end = text_of(did_cell(page, 26))
    assert end.startswith("stop_reason tool_use usage input_tokens 512 · output_tokens 187")
    assert text_of(did_cell(page, 27)) == "message_stop"
    assert text_of(did_cell(page, 1)) == "envelope only"  # the ping


def test_gemini_rows_in_gemini_terms_and_repeated_usage_collapsed(client):
    capture = upload(GEMINI_OK)
    page = html(client.get(capture.get_absolute_url()))
    assert text_of(did_cell(page, 0)).startswith("text Looking up both for you. usageMetadata")
    assert text_of(did_cell(page, 2)) == '#1 search_hotels args $.city = "Lis"'  # no usage again
    end = text_of(did_cell(page, 5))
    assert "finishReason STOP" in end and "usageMetadata promptTokenCount 301" in end


def test_long_pieces_are_cut_and_say_how_much():
    items = [["args", 0, "f", "x" * ITEM_TEXT, 120], ["text", 0, "y", 0]]
    (call, stream) = did_groups(items, "messages", lambda position: f"#call-{position}")
    assert (call.call, call.href, call.name) == (0, "#call-0", "f")
    assert call.parts[0].note == "+120 characters" and call.parts[0].term == "input_json_delta"
    assert stream.call is None and stream.parts[0].term == "text_delta"


def test_a_live_row_carries_the_parsed_summary_when_given_it():
    did = [["id", 0, "f", "call_L"], ["args", 0, "f", "{", 0]]
    html_row = live_frame_row("s", 3, "chunk", "data: {}", 1.0, did=did, dialect="chat")
    assert text_of(re.search(r'<td class="did">(.*?)</td>', html_row, re.S).group(1)) == (
        "#0 f id call_L function.arguments {"
    )
    assert "<details" in html_row and " open" not in html_row


# --- raw folded, ?raw=1 ------------------------------------------------------------------


def test_raw_is_folded_and_raw_1_shows_it_open_with_links_that_keep_it(client):
    capture = store_stream(many_frames(130), stream_format="sse")
    folded = html(client.get(capture.get_absolute_url()))
    assert '<details class="raw-fold"><summary>raw</summary><pre>' in row(folded, 0)
    assert "&quot;chatcmpl-1&quot;" in row(folded, 0)  # the envelope is still there, folded
    assert f'href="/c/{capture.slug}/?raw=1#frames"' in folded
    opened = html(client.get(capture.get_absolute_url(), {"raw": "1"}))
    assert '<details class="raw-fold" open><summary>raw</summary><pre>' in row(opened, 0)
    assert f'href="/c/{capture.slug}/?page=2&amp;raw=1#frames"' in opened
    assert f'href="/c/{capture.slug}/?frames=text&amp;raw=1#frames"' in opened
    assert 'aria-pressed="true"' in opened and "fold raw frames" in opened


# --- filters -----------------------------------------------------------------------------


def many_frames(calls_frames: int, drop_every: int = 0) -> bytes:
    """Two interleaved calls over `calls_frames` frames each, a text frame
    every 50 frames and one dropped frame (and one every `drop_every`)."""
    items: list[Any] = [chunk(tool(0, "call_A", "a", '{"s": "'), tool(1, "call_B", "b", '{"t": "'))]
    for i in range(calls_frames):
        items.append(chunk(tool(i % 2, args=f"{i} ")))
        if i % 50 == 0:
            items.append(chunk(content=f"text {i}"))
        if drop_every and i % drop_every == drop_every - 1:
            items.append(chunk(tool(6)))
    items.insert(7, chunk(tool(5)))  # dropped
    items += [chunk(tool(0, args='"}'), tool(1, args='"}'), finish="tool_calls"), DONE]
    return sse(*items)


def test_filter_call_n_pages_by_frame_number_with_plain_links(client):
    capture = store_stream(many_frames(400), stream_format="sse")
    touching = [n for n, calls in capture.frames.values_list("number", "calls") if 1 in calls]
    assert len(touching) > 2 * FRAMES_PER_PAGE
    url = capture.get_absolute_url()
    page = html(client.get(url, {"frames": "call-1"}))
    shown = [int(n) for n in re.findall(r'<tr id="f-(\d+)"', page)]
    assert shown == touching[:FRAMES_PER_PAGE]
    assert f"{len(touching)} of {capture.frame_count} frames touching call #1" in page
    next_link = f"/c/{capture.slug}/?frames=call-1&amp;from={touching[99] + 1}#frames"
    assert f'href="{next_link}"' in page
    second = html(client.get(html_module.unescape(next_link)))
    assert [int(n) for n in re.findall(r'<tr id="f-(\d+)"', second)] == touching[100:200]
    previous = f"/c/{capture.slug}/?frames=call-1&amp;before={touching[100]}#frames"
    assert f'href="{previous}"' in second
    back = html(client.get(html_module.unescape(previous)))
    assert [int(n) for n in re.findall(r'<tr id="f-(\d+)"', back)] == touching[:100]
    last = html(client.get(url, {"frames": "call-1", "before": touching[-1] + 1}))
    assert [int(n) for n in re.findall(r'<tr id="f-(\d+)"', last)] == touching[-100:]
    assert "frames=call-1&amp;from=" not in last  # no next page
    assert '<option value="call-1" selected>#1</option>' in page  # the form, without JS


def test_filter_anomalies_and_text(client):
    capture = store_stream(many_frames(120), stream_format="sse")
    url = capture.get_absolute_url()
    marked = [n for n, marks in capture.frames.values_list("number", "marks") if marks]
    page = html(client.get(url, {"frames": "anomalies"}))
    assert [int(n) for n in re.findall(r'<tr id="f-(\d+)"', page)] == marked
    assert (
        f"{len(marked)} of {capture.frame_count} frames with an anomaly, a drop or the refusal"
        in page
    )
    texts = html(client.get(url, {"frames": "text"}))
    rows = re.findall(r'<tr id="f-(\d+)".*?</tr>', texts, re.S)
    assert len(rows) == 3  # text 0, 50, 100
    assert all("content" in text_of(did_cell(texts, int(n))) for n in rows)
    assert f'<a href="/c/{capture.slug}/?frames=text#frames" aria-current="true"' in texts


def test_unknown_filters_show_all_frames_and_nothing_matching_says_so(client):
    capture = store_stream(CHAT, stream_format="sse")
    for value in ("call-x", "CALL-1", "call-", "call-" + "9" * 40, "bogus"):
        page = html(client.get(capture.get_absolute_url(), {"frames": value}))
        assert page.count('<tr id="f-') == capture.frame_count
    empty = html(client.get(capture.get_absolute_url(), {"frames": "call-7"}))
    assert "No frame matches this filter." in empty and "0 of 8 frames" in empty


FILTERED_QUERIES = 10  # the capture page's (PAGE_QUERIES, no focus) with the filter's 2


@pytest.mark.parametrize("frames", [20, 3000])
def test_filtered_pages_stay_within_the_bound(client, django_assert_max_num_queries, frames):
    capture = store_stream(many_frames(frames), stream_format="sse")
    for params in (
        {"frames": "call-0"},
        {"frames": "call-1", "from": frames // 2},
        {"frames": "anomalies"},
        {"frames": "text", "before": frames},
        {"raw": "1", "page": 2},
    ):
        with django_assert_max_num_queries(FILTERED_QUERIES):
            page = html(client.get(capture.get_absolute_url(), params))
        assert page.count('<tr id="f-') <= FRAMES_PER_PAGE


# --- escaping ----------------------------------------------------------------------------

XSS = '<script>window.__xss=1</script><img src=x onerror="alert(1)">'


def test_hostile_strings_stay_text_in_every_new_field(client):
    stream = sse(
        chunk(tool(0, XSS, XSS, XSS)),
        {**chunk(), "choices": [{"index": 0, "delta": {"reasoning_content": XSS}}]},
        chunk(tool(0, args=XSS), content=XSS),
        chunk(finish=XSS),
        {**chunk(), "choices": [], "usage": {XSS: XSS}},
        {**chunk(), "choices": [], "usage": {"prompt_tokens": XSS, "completion_tokens": 1}},
        chunk({"index": 0, "id": {"x": XSS}, "function": {"name": [XSS], "arguments": ""}}),
        DONE,
    )
    capture = upload(stream)
    for params in ({}, {"raw": "1"}, {"frames": "text"}, {"frames": "call-0"}):
        page = html(client.get(capture.get_absolute_url(), params))
        assert "<script>window" not in page and "<img src=x" not in page
    page = html(client.get(capture.get_absolute_url()))
    escaped = html_module.escape(XSS, quote=True)
    first = did_cell(page, 0)
    assert f'href="#call-0">#0 {escaped}</a>' in first  # the name in the call's chip
    assert first.count(f"<code>{escaped}</code>") == 3  # id, name, fragment
    assert f"<code>{escaped}</code>" in did_cell(page, 1)  # reasoning
    assert did_cell(page, 2).count(f"<code>{escaped}</code>") == 2  # fragment, text
    assert f"<code>{escaped}</code>" in did_cell(page, 3)  # the finish reason
    assert escaped in did_cell(page, 4) and escaped in did_cell(page, 5)  # usage
    ignored = did_cell(page, 6)  # an id and a name that are no strings, ignored
    assert ignored.count('<span class="did-note">ignored</span>') == 2
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in ignored
    # a hostile filter value is no filter, and is never echoed
    hostile = html(client.get(capture.get_absolute_url(), {"frames": XSS, "from": XSS}))
    assert "<script>window" not in hostile


def test_a_frame_permalink_ignores_the_filter(client):
    capture = store_stream(CHAT, stream_format="sse")
    url = reverse("frame", args=[capture.slug, 4])
    page = html(client.get(url, {"frames": "anomalies"}))
    assert page.count('<tr id="f-') == capture.frame_count
    assert 'data-focus aria-current="true"' in row(page, 4)


def test_a_live_capture_shows_what_its_viewers_were_sent_then_its_parsed_rows(client):
    """While live, a row is what its viewers were sent: the frames are filed
    as they are stored, so both carry what the frame did; the closed
    capture's page shows it parsed in the dialect its frames told."""
    live = LiveCapture.open(stream_format="sse", dialect="messages")
    sent = {}
    for start in range(0, len(MESSAGES_OK), 200):
        message = live.append(MESSAGES_OK[start : start + 200], throttle=False)
        for entry in (message or {}).get("frames", []):
            sent[entry["number"]] = entry["html"]
    while_live = html(client.get(live.capture.get_absolute_url()))
    expected = '#1 search_flights input_json_delta {"from": "BER",'
    assert text_of(did_cell(while_live, 17)) == text_of(did_cell(sent[17], 17)) == expected
    live.close()
    closed = html(client.get(live.capture.get_absolute_url()))
    assert text_of(did_cell(closed, 17)) == expected


@pytest.mark.parametrize("value", ["call-1", "anomalies"])
def test_the_timeline_counted_pages_match_the_counted_ones(django_assert_num_queries, value):
    """Where the strict assembly's timeline data already counted the
    matching frames, the panel reads only the page, and it is the page
    counting them would give."""
    capture = store_stream(many_frames(700, drop_every=3), stream_format="sse")
    timeline = capture.assemblies.get(policy="strict").timeline
    assert len(timeline["marks"]) > 2 * FRAMES_PER_PAGE
    chosen = frame_filter(value)
    base = f"/c/{capture.slug}/?frames={value}"
    params_list = [{}, {"from": "150"}, {"before": "400"}, {"before": "100000"}]
    for params in params_list:
        with django_assert_num_queries(1):
            known = filtered_frames(capture, chosen, params, base, timeline)
        with django_assert_num_queries(2):
            counted = filtered_frames(capture, chosen, params, base, None)
        assert [f.number for f in known.frames] == [f.number for f in counted.frames]
        assert known.frames and (known.total, known.previous, known.next) == (
            counted.total,
            counted.previous,
            counted.next,
        )


def test_a_nul_in_text_or_arguments_is_kept_as_the_replacement_character():
    """PostgreSQL's jsonb refuses \\u0000: what a frame did keeps NUL as
    U+FFFD, as the stored raw text does."""
    data = sse(
        chunk(content="a\u0000b"),
        chunk(tool(0, "call_\u0000", "read", '{"p":"\u0000"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(data, stream_format="sse")
    items = [item for frame in capture.frames.order_by("number") for item in frame.did]
    assert ["text", 0, "a\ufffdb", 0] in items
    assert ["id", 0, "read", "call_\ufffd"] in items
    assert ["args", 0, "read", '{"p":"\ufffd"}', 0] in items


@pytest.mark.parametrize(
    "value", [[["args", 0, "f", 'a"\\\u00e9\U0001f600', 0]], [0, 1], [["text", 0, "\ud800", 0]]]
)
def test_a_json_column_is_json_text_of_the_value_even_where_orjson_refuses_it(value):
    """Compact orjson text; a lone surrogate (which orjson refuses) escaped by
    the standard library instead of failing the frame's row."""
    text = compact(value)
    assert json.loads(text) == value
    if value != [["text", 0, "\ud800", 0]]:
        assert text == orjson.dumps(value).decode()


@pytest.mark.parametrize("name", ["read", "", None, "r\x00d"])
@pytest.mark.parametrize(
    "text", ["{", "a\x00b", "x" * ITEM_TEXT, "y" * (ITEM_TEXT + 1), "\x00" * (ITEM_TEXT + 5)]
)
def test_a_bare_fragment_s_item_is_what_the_general_item_gives(name, text):
    """`did_by_frame`'s shortcut for a bare fragment (`_args_item`) against
    the general item, cut and cleaned of NUL (`_cut`, `_nul_free`)."""
    general = frame_did._nul_free(["args", 3, name or "", *frame_did._cut(text)])
    assert frame_did.did_by_frame([(7, 3, text)], lambda position: name) == {7: [general]}


@pytest.mark.parametrize(
    ("marks", "focus", "classes"),
    [
        ([], None, "kind-chunk"),
        ([], 4, "kind-chunk is-focus"),
        (["empty_delta"], 3, "kind-chunk is-dropped"),
        (
            ["odd", "EMPTY_RESPONSE", "empty_delta", "odd", "orphan_continuation"],
            4,
            "kind-chunk is-anomaly is-dropped is-refusal is-focus",
        ),
    ],
)
def test_a_rows_classes_are_its_kind_its_marks_tones_once_sorted_and_its_focus(
    marks, focus, classes
):
    from inspector.captures.pages.frames import frame_row

    row = frame_row("s", 4, "chunk", "data: {}", 8, None, marks=marks, focus=focus)
    assert row.classes == classes
