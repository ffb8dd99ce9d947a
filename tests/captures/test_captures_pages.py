"""The pages: capture list, upload form, capture page, downloads; escaping of
stream content, and query counts that do not grow with a capture's size."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from capture_streams import DONE, chunk, sse, tool
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from page_helpers import demo, html

from inspector.assembly import assemble
from inspector.assembly.jsontext import dumps
from inspector.captures import models
from inspector.captures.intake import store_upload
from inspector.captures.pages import capture_list as capture_list_page
from inspector.captures.pages.calls import FRAGMENTS_PER_PAGE
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

BAD_BASE64_HAR = orjson.dumps(
    {
        "log": {
            "entries": [
                {
                    "response": {
                        "content": {
                            "mimeType": "text/event-stream",
                            "text": "!!!",
                            "encoding": "base64",
                        }
                    }
                }
            ]
        }
    }
).decode()
DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'


def long_stream(fragments: int) -> bytes:
    """One call whose arguments arrive in `fragments` frames (+3 frames)."""
    items: list[Any] = [chunk(tool(0, "call_long", "write_file", '{"content": "'))]
    items += [chunk(tool(0, args=f"line {i}\\n")) for i in range(fragments)]
    items += [chunk(tool(0, args='"}'), finish="tool_calls"), DONE]
    return sse(*items)


def row(page: str, element_id: str) -> str:
    """The opening tag and content of the <tr> with this id."""
    match = re.search(rf'<tr id="{element_id}"[^>]*>.*?</tr>', page, re.S)
    assert match, f"no row {element_id}"
    return match.group(0)


# --- the list ----------------------------------------------------------------------------


def test_list_shows_each_capture_with_outcome_refusal_model_frames_and_age(client):
    ok = demo("parallel_calls_ok.sse", "parallel")
    refused = demo("ambiguous_continuation.sse", "ambiguous")
    page = html(client.get(reverse("capture-list")))
    assert f'href="{ok.get_absolute_url()}"' in page
    assert f'href="{refused.get_absolute_url()}"' in page
    assert "AMBIGUOUS_CONTINUATION" in page
    assert "lenient: ok" in page  # the policies disagree on this one
    assert "gpt-4o-mini-2024-07-18" in page
    assert f'<td class="num">{refused.frame_count}</td>' in page
    assert "minutes ago" in page


def listed_titles(page: str) -> list[str]:
    """The capture titles a list page shows, in order (slugs may contain any text)."""
    return re.findall(r'<td class="title"><a [^>]*>([^<]*)</a>', page)


def test_list_filters_by_outcome_refusal_model_and_title(client):
    demo("parallel_calls_ok.sse", "parallel calls")
    demo("ambiguous_continuation.sse", "ambiguous one")
    demo("identity_conflict.sse", "renamed call")
    store_stream(sse(chunk(content="hi", finish="stop"), DONE), stream_format="sse", title="chat")

    def titles(**params) -> set[str]:
        return set(listed_titles(html(client.get(reverse("capture-list"), params))))

    assert titles() == {"parallel calls", "ambiguous one", "renamed call", "chat"}
    assert titles(outcome="ok") == {"parallel calls", "chat"}
    assert titles(outcome="refused", refusal="IDENTITY_CONFLICT") == {"renamed call"}
    assert titles(outcome="refused", code="IDENTITY_CONFLICT") == {"renamed call"}
    assert titles(model="gpt-test") == {"chat"}
    # The search reads titles and the calls' ids (`call_…`): every capture with a call.
    assert titles(q="CALL") == {"parallel calls", "ambiguous one", "renamed call"}
    assert titles(q="renamed") == {"renamed call"}
    assert titles(outcome="refused", q="parallel") == set()


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"outcome": "zzz"}, "Outcome: Select a valid choice. zzz is not one of"),
        ({"refusal": "NOT_A_CODE", "outcome": "ok"}, "Refusal: Select a valid choice."),
        ({"model": "m" * 201}, "Model: Ensure this value has at most 200 characters"),
    ],
    ids=["outcome", "refusal", "model-too-long"],
)
def test_an_invalid_filter_is_a_400_listing_nothing_with_the_reason(client, params, reason):
    demo("parallel_calls_ok.sse", "parallel calls")
    response = client.get(reverse("capture-list"), params)
    page = response.content.decode()
    assert response.status_code == 400
    assert 'role="alert"' in page and "these filters can't be used" in page
    assert reason in page
    assert listed_titles(page) == [] and "No capture matches" not in page
    assert '<form class="filters"' in page


def test_list_is_paged(client, monkeypatch):
    monkeypatch.setattr(capture_list_page, "CAPTURES_PER_PAGE", 2)
    for number in range(5):
        store_stream(
            sse(chunk(content="hi", finish="stop"), DONE), stream_format="sse", title=f"c{number}"
        )
    first = html(client.get(reverse("capture-list")))
    assert "page 1 of 3" in first and listed_titles(first) == ["c4", "c3"]
    last = html(client.get(reverse("capture-list"), {"page": 3, "outcome": "ok"}))
    assert listed_titles(last) == ["c0"]
    assert "outcome=ok&amp;page=2" in last  # filters survive paging


HUGE_PAGE = "99999999999999999999"


def test_a_page_far_past_the_last_opens_the_last_page(client, monkeypatch):
    monkeypatch.setattr(capture_list_page, "CAPTURES_PER_PAGE", 2)
    for number in range(3):
        store_stream(
            sse(chunk(content="hi", finish="stop"), DONE), stream_format="sse", title=f"c{number}"
        )
    page = html(client.get(reverse("capture-list"), {"page": HUGE_PAGE}))
    assert "page 2 of 2" in page and listed_titles(page) == ["c0"]


@pytest.mark.parametrize(
    "params", [{"page": HUGE_PAGE}, {"calls": HUGE_PAGE}, {"call": "0", "frag": HUGE_PAGE}]
)
def test_capture_page_paging_past_the_end_is_clamped_not_a_500(client, params):
    capture = store_stream(long_stream(FRAGMENTS_PER_PAGE + 1), stream_format="sse")
    assert 'id="call-0"' in html(client.get(capture.get_absolute_url(), params))


def test_empty_list_points_to_upload(client):
    page = html(client.get(reverse("capture-list")))
    assert "No captures yet" in page and f'href="{reverse("upload")}"' in page


# --- upload ------------------------------------------------------------------------------


def post_upload(client, **data):
    return client.post(reverse("upload"), {"format": "auto", **data})


def test_upload_form_offers_a_file_pasted_text_and_a_format(client):
    page = html(client.get(reverse("upload")))
    assert 'type="file"' in page and "<textarea" in page
    for value in ("auto", "sse", "jsonl", "har"):
        assert f'value="{value}"' in page


def test_uploading_a_file_lands_on_its_capture_page(client):
    with open(DEMO / "invalid_arguments.sse", "rb") as stream:
        response = post_upload(client, file=stream, title="from the form")
    capture = models.Capture.objects.get()
    assert response.status_code == 302 and response["Location"] == capture.get_absolute_url()
    assert capture.title == "from the form" and capture.refusal_code == "INVALID_ARGUMENTS"
    assert bytes(capture.raw) == (DEMO / "invalid_arguments.sse").read_bytes()


def test_pasted_text_in_a_chosen_format_is_stored_as_is(client):
    text = orjson.dumps(chunk(content="hello", finish="stop")).decode() + "\n[DONE]\n"
    response = client.post(reverse("upload"), {"format": "jsonl", "text": text})
    capture = models.Capture.objects.get()
    assert response.status_code == 302
    assert capture.input_format == "jsonl" and capture.outcome == "ok"
    assert bytes(capture.raw) == text.encode()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"text": "hello there"}, "can&#x27;t tell the format"),
        ({"text": "{not json", "format": "har"}, "HAR is not valid JSON"),
        ({"text": BAD_BASE64_HAR, "format": "har"}, "base64 body does not decode"),
        ({}, "Choose a file or paste a stream."),
    ],
)
def test_bad_input_is_an_error_on_the_form_and_stores_nothing(client, data, message):
    response = client.post(reverse("upload"), {"format": "auto", **data})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'role="alert"' in page and "Nothing was stored." in page and message in page
    assert models.Capture.objects.count() == 0


def test_a_file_and_text_together_are_refused(client):
    with open(DEMO / "cut_connection.sse", "rb") as stream:
        response = post_upload(client, file=stream, text="data: [DONE]\n\n")
    assert response.status_code == 400 and "not both" in response.content.decode()
    assert models.Capture.objects.count() == 0


def test_too_large_an_upload_is_a_413_with_the_error_on_the_form(client, settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = 100
    with open(DEMO / "cut_connection.sse", "rb") as stream:
        response = post_upload(client, file=stream)
    assert response.status_code == 413 and "the limit is 100" in response.content.decode()
    response = post_upload(client, text="data: [DONE]\n\n" * 20)
    assert response.status_code == 413 and "the limit is 100" in response.content.decode()
    assert 'role="alert"' in response.content.decode()
    assert models.Capture.objects.count() == 0


def test_a_body_over_djangos_own_limit_is_a_413_with_the_error_on_the_form(client, settings):
    settings.INSPECTOR_MAX_UPLOAD_BYTES = 100
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    response = post_upload(client, text="data: [DONE]\n\n" * 40)
    page = response.content.decode()
    assert response.status_code == 413 and "Nothing was stored." in page
    assert "the limit is 100" in page
    assert models.Capture.objects.count() == 0


def har(*bodies: bytes | None) -> bytes:
    """A HAR whose event-stream responses have these bodies (None: a broken one)."""
    entries = []
    for number, body in enumerate(bodies):
        content: dict[str, Any] = {"mimeType": "text/event-stream"}
        if body is None:
            content["text"] = 12  # not a string: the HAR can't be read
        else:
            content |= {"text": base64.b64encode(body).decode(), "encoding": "base64"}
        entries.append(
            {
                "request": {"url": f"https://api.example.com/v1/chat/completions?n={number}"},
                "response": {"status": 200, "content": content},
            }
        )
    return orjson.dumps({"log": {"version": "1.2", "entries": entries}})


def test_a_har_with_several_streams_makes_several_captures_all_linked(client):
    ok = (DEMO / "parallel_calls_ok.sse").read_bytes()
    refused = (DEMO / "identity_conflict.sse").read_bytes()
    response = client.post(
        reverse("upload"), {"format": "auto", "text": har(ok, refused).decode(), "title": "session"}
    )
    captures = list(models.Capture.objects.order_by("har_entry"))
    assert len(captures) == 2 and captures[0].har_upload == captures[1].har_upload != ""
    assert response.status_code == 302
    listing = f"{reverse('capture-list')}?har_upload={captures[0].har_upload}"
    assert response["Location"] == listing
    page = html(client.get(response["Location"]))
    assert "These captures came from one HAR upload (2 streams)" in page
    for capture in captures:
        assert f'href="{capture.get_absolute_url()}"' in page
        assert f'href="{listing}"' in html(client.get(capture.get_absolute_url()))
    assert "session [stream 1 of 2]" in page and "session [stream 2 of 2]" in page
    # `?group=`, the filter's first name, still lists them
    older = html(client.get(reverse("capture-list"), {"group": captures[0].har_upload}))
    assert "These captures came from one HAR upload (2 streams)" in older


def test_a_har_with_one_broken_stream_stores_none_of_them(client):
    ok = (DEMO / "parallel_calls_ok.sse").read_bytes()
    response = client.post(reverse("upload"), {"format": "har", "text": har(ok, None).decode()})
    assert response.status_code == 400
    assert models.Capture.objects.count() == 0


# --- the capture page --------------------------------------------------------------------


def test_header_shows_outcome_refusal_finish_reason_and_usage(client):
    capture = demo("invalid_arguments.sse")
    page = html(client.get(capture.get_absolute_url()))
    assert '<span class="refusal-code">INVALID_ARGUMENTS</span>' in page
    assert "arguments of call #0 are not one JSON object" in page
    frame_link = reverse("frame", args=[capture.slug, 4]) + "#f-4"
    assert f'href="{frame_link}" class="refusal-frame-link">frame 4</a>' in page
    assert "not retryable" in page
    assert '<dd class="mono">tool_calls</dd>' in page
    assert "strict policy; lenient agrees" in page

    ok = demo("parallel_calls_ok.sse")
    page = html(client.get(ok.get_absolute_url()))
    assert "prompt_tokens 84" in page and "total_tokens 125" in page
    assert "Checking the weather and the local time." in page
    assert "refusal-code" not in page


def test_where_policies_disagree_both_outcomes_are_shown(client):
    capture = demo("ambiguous_continuation.sse")
    page = html(client.get(capture.get_absolute_url()))
    assert "Strict and lenient disagree on this stream." in page
    disagree = page[page.index('<div class="disagree"') :]
    disagree = disagree[: disagree.index("</div>")]
    assert 'strict: <span class="badge outcome-refused">refused</span>' in disagree
    assert 'lenient: <span class="badge outcome-ok">ok</span>' in disagree
    # What lenient made of it: the guessed continuation's frame is linked.
    assert "/var/log/syslog" in disagree and "/etc/hosts" in disagree
    assert reverse("frame", args=[capture.slug, 3]) + "#f-3" in disagree


def test_identity_timeline_shows_establishment_ignored_repeats_and_the_conflict(client):
    capture = demo("identity_conflict.sse")
    page = html(client.get(capture.get_absolute_url()))
    card = page[page.index('id="call-0"') :]
    assert "id established: call_file" in card and "name established: read_file" in card
    assert "id &quot;&quot; ignored" in card and "name null ignored" in card
    assert "refused IDENTITY_CONFLICT: call &#x27;call_file&#x27; is named" in card
    assert "later delta names it &#x27;write_file&#x27;" in card


def test_ignored_repeats_are_folded_into_one_row(client):
    blank = {"index": 0, "id": "", "function": {"name": ""}}
    stream = sse(
        chunk(tool(0, "call_A", "read", "{")),
        *[chunk(blank) for _ in range(40)],
        chunk(tool(0, args="}"), finish="tool_calls"),
        DONE,
    )
    capture = store_stream(stream, stream_format="sse")
    page = html(client.get(capture.get_absolute_url()))
    assert page.count("id &quot;&quot; ignored") == 1
    assert page.count("name &quot;&quot; ignored") == 1
    assert page.count('<span class="chip">×40</span>') == 2


def test_index_changes_are_in_the_timeline(client):
    stream = sse(
        chunk(tool(0, "call_A", "read", '{"a":')),
        chunk({"index": 1, "id": "call_A", "function": {"arguments": "1}"}}),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(stream, stream_format="sse")
    page = html(client.get(capture.get_absolute_url()))
    assert "index changed" in page


def test_argument_evolution_has_a_row_per_fragment_with_text_so_far_and_state(client):
    capture = demo("invalid_arguments.sse")
    page = html(client.get(capture.get_absolute_url()))
    first = row(page, "frag-0-0")
    assert "{&quot;sql&quot;: &quot;SELECT name FROM users</pre>" in first  # the fragment
    assert "<mark>{&quot;sql&quot;: &quot;SELECT name FROM users</mark>" in first
    assert "depth 1" in first and "inside a string" in first
    third = row(page, "frag-0-2")
    assert re.search(r'<td class="n"><a href="[^"]*#f-4">4</a></td>', third)  # its frame
    assert "&quot;params&quot;: [7, <mark>8}</mark>" in third
    assert "invalid from offset 68" in third
    # The parse error, with the offending character marked.
    assert "Not one JSON object: &#x27;}&#x27; does not close &#x27;[&#x27; at offset 68" in page
    assert '<mark class="bad">}</mark>' in page


def test_final_arguments_are_pretty_printed(client):
    capture = demo("parallel_calls_ok.sse")
    page = html(client.get(capture.get_absolute_url()))
    assert '<pre class="json" id="call-0-final">{\n  &quot;city&quot;: &quot;Paris&quot;,\n' in page
    assert "arguments parsed" in page


def test_text_so_far_is_a_bounded_window(client):
    capture = store_stream(long_stream(400), stream_format="sse")
    last_page = 399 // FRAGMENTS_PER_PAGE + 1
    page = html(client.get(capture.get_absolute_url(), {"call": 0, "frag": last_page}))
    last = row(page, "frag-0-399")
    so_far = re.search(r'<td class="so-far"><pre>(.*?)</pre>', last, re.S).group(1)
    assert so_far.startswith('<span class="ellipsis">…</span>')
    assert so_far.endswith("<mark>line 398\\n</mark>")
    assert 300 < len(so_far) < 450


def test_the_text_before_a_fragment_page_is_cut_from_its_call_by_position(client):
    """Reading it through the call (`fragments__seq=`) made SQLite scan every
    fragment of the call: 17 ms of a 100k-frame capture's frame permalink.  It
    is cut from the call's arguments at the offset of the first fragment the
    page shows (read already), the calls found by position."""
    capture = store_stream(long_stream(400), stream_format="sse")
    with CaptureQueriesContext(connection) as queries:
        page = html(client.get(capture.get_absolute_url(), {"call": 0, "frag": 3}))
    # The window's start is Greatest(): MAX() on SQLite, GREATEST() on PostgreSQL.
    (before,) = [
        sql
        for sql in (q["sql"].upper() for q in queries.captured_queries)
        if "SUBSTR" in sql and ("MAX(" in sql or "GREATEST(" in sql)
    ]
    assert 'FROM "CAPTURES_CALL"' in before and "CAPTURES_FRAGMENT" not in before
    assert '"CAPTURES_CALL"."POSITION" IN' in before
    seq = int(re.search(r'<tr id="frag-0-(\d+)"', page).group(1))  # the page's first
    assert seq > 0
    so_far = re.search(r'<td class="so-far"><pre>(.*?)</pre>', row(page, f"frag-0-{seq}"), re.S)
    # Fragment `seq` is line seq-1; the text before it ends with the line before.
    assert f"line {seq - 2}\\n<mark>line {seq - 1}" in so_far.group(1)


def test_each_cards_fragments_are_read_by_their_call_not_the_whole_capture(client):
    """One query reads every card's page of fragments; each branch names the
    capture, so the (capture, position, seq) index finds each card's page.
    With the capture ANDed outside the branches, SQLite read every fragment
    of the capture: 10.5 ms of a 100k-fragment capture's page."""
    items = [chunk(tool(i, f"call_{i}", "write", '{"n": "')) for i in range(3)]
    items += [chunk(tool(i % 3, args=f"{i} ")) for i in range(300)]
    items += [chunk(tool(i, args='"}')) for i in range(3)] + [chunk(finish="tool_calls"), DONE]
    capture = store_stream(sse(*items), stream_format="sse")
    with CaptureQueriesContext(connection) as queries:
        page = html(client.get(capture.get_absolute_url()))
    assert 'id="frag-2-0"' in page
    sql = [q["sql"] for q in queries.captured_queries]
    (fragments,) = [q for q in sql if q.startswith('SELECT "captures_fragment"."id"')]
    where = fragments[fragments.index("WHERE") :]
    assert where.count('"captures_fragment"."capture_id" =') == 3  # one a card
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {fragments}")
            plan = [row[-1] for row in cursor.fetchall() if "captures_fragment" in row[-1]]
        assert plan and all("position=? AND seq>? AND seq<?" in step for step in plan), plan


def test_frames_table_marks_dropped_and_anomalous_frames(client):
    stream = sse(
        chunk(tool(0, "call_A", "read", '{"p":')),  # 0
        chunk(tool(0, "call_B", "stat", '{"q":')),  # 1: index_reused
        chunk(tool(3)),  # 2: dropped, empty_delta
        chunk(tool(0, "call_A", args="1}")),  # 3
        chunk(tool(0, "call_B", args="2}"), finish="tool_calls"),  # 4
        DONE,
    )
    capture = store_stream(stream, stream_format="sse")
    page = html(client.get(capture.get_absolute_url()))
    assert 'class="kind-chunk is-anomaly"' in row(page, "f-1")
    assert '<span class="mark mark-anomaly">index_reused</span>' in row(page, "f-1")
    assert 'class="kind-chunk is-dropped"' in row(page, "f-2")
    assert '<span class="mark mark-dropped">empty_delta</span>' in row(page, "f-2")
    assert '<a href="#call-0">#0</a>' in row(page, "f-3")  # which call it touched
    assert 'class="kind-done"' in row(page, "f-5")


def test_the_refusing_frame_is_highlighted(client):
    capture = demo("ambiguous_continuation.sse")
    page = html(client.get(capture.get_absolute_url()))
    refusing = row(page, "f-3")
    assert "is-refusal" in refusing
    assert '<span class="mark mark-refusal">AMBIGUOUS_CONTINUATION</span>' in refusing


def test_stream_content_stays_text(client):
    stream = sse(
        chunk(content=XSS),
        chunk(tool(0, XSS, XSS, '{"html": "' + XSS.replace('"', '\\"') + '"}')),
        chunk(tool(0, XSS, args=""), finish="tool_calls"),
        DONE,
    )
    capture = store_stream(stream, stream_format="sse", title=XSS)
    for url in (
        capture.get_absolute_url(),
        reverse("frame", args=[capture.slug, 1]),
        reverse("capture-list"),
    ):
        page = html(client.get(url))
        assert "<script>window" not in page and "<img src=x" not in page
        assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page


def test_downloads_give_the_stream_as_received_and_the_result_json(client):
    data = (DEMO / "ambiguous_continuation.sse").read_bytes()
    (capture,) = store_upload(data, name="a.sse")
    raw = client.get(reverse("capture-raw", args=[capture.slug]))
    assert raw.status_code == 200 and raw.content == data
    assert f'filename="{capture.slug}.sse"' in raw["Content-Disposition"]
    result = client.get(reverse("capture-result", args=[capture.slug]))
    assert result["Content-Type"] == "application/json"
    assert orjson.loads(result.content)["refusal"]["code"] == "AMBIGUOUS_CONTINUATION"
    lenient = client.get(reverse("capture-result", args=[capture.slug]), {"policy": "lenient"})
    assert orjson.loads(lenient.content)["outcome"] == "ok"
    assert (
        client.get(reverse("capture-result", args=[capture.slug]), {"policy": "x"}).status_code
        == 404
    )
    assert client.get(reverse("capture-raw", args=["nope"])).status_code == 404


def test_a_twin_s_result_download_is_strict_s_under_its_name(client):
    data = (DEMO / "invalid_arguments.sse").read_bytes()
    (capture,) = store_upload(data, name="twin.sse")
    assert capture.assemblies.get(policy="lenient").result_json is None  # a twin
    got = client.get(reverse("capture-result", args=[capture.slug]), {"policy": "lenient"})
    assert got.status_code == 200
    assert got.content == dumps(assemble(data, fmt="sse", policy="lenient").to_dict())


def test_unknown_capture_is_404(client):
    assert client.get(reverse("capture", args=["no-such-slug"])).status_code == 404


# --- large captures ----------------------------------------------------------------------

PAGE_QUERIES = 11  # capture, assemblies, frames, calls, fragments, lenient calls, state (2),
# the timeline (its calls, fragment buckets, marked frames)


@pytest.mark.parametrize("fragments", [3, 5000])
def test_capture_page_queries_do_not_grow_with_the_capture(
    client, django_assert_max_num_queries, fragments
):
    capture = store_stream(long_stream(fragments), stream_format="sse")
    assert capture.frame_count == fragments + 3
    urls = [
        capture.get_absolute_url(),
        capture.get_absolute_url() + "?page=3&call=0&frag=7",
        reverse("frame", args=[capture.slug, capture.frame_count // 2]),
        reverse("frame", args=[capture.slug, capture.frame_count - 1]),
    ]
    for url in urls:
        with django_assert_max_num_queries(PAGE_QUERIES):
            page = html(client.get(url))
        assert page.count('<tr id="f-') <= 100
        assert page.count('<tr id="frag-') <= 100
        assert len(page) < 400_000


def many_calls_stream(calls: int, rounds: int) -> bytes:
    """`calls` parallel calls, then `rounds` rounds of one fragment per call."""
    items: list[Any] = [chunk(tool(k, f"call_{k}", f"tool_{k}", '{"v": "')) for k in range(calls)]
    for r in range(rounds):
        items += [chunk(tool(k, args=f"{r} ")) for k in range(calls)]
    items += [chunk(*(tool(k, args='"}') for k in range(calls)), finish="tool_calls"), DONE]
    return sse(*items)


@pytest.mark.parametrize("calls", [3, 45])
def test_frame_permalink_queries_do_not_grow_with_the_number_of_calls(
    client, django_assert_max_num_queries, calls
):
    capture = store_stream(many_calls_stream(calls, rounds=30), stream_format="sse")
    middle = calls + 15 * calls + calls - 1  # fragment 16 of the last call
    for url in (
        reverse("frame", args=[capture.slug, middle]),
        reverse("frame", args=[capture.slug, middle]) + f"?calls=2&call={calls - 1}&frag=2",
        reverse("frame", args=[capture.slug, capture.frame_count - 2]),
    ):
        with django_assert_max_num_queries(PAGE_QUERIES):
            page = html(client.get(url))
        assert page.count('<section class="state-call') <= 20
        assert page.count('<tr id="frag-') <= 10 * FRAGMENTS_PER_PAGE


def test_the_calls_on_a_page_share_its_fragment_rows_whatever_their_length(client):
    """The page of a frame in a long capture renders about as many rows as in a
    short one: ten long calls show 10 fragments each, one shows 25."""
    capture = store_stream(many_calls_stream(10, rounds=40), stream_format="sse")
    for url in (
        capture.get_absolute_url(),
        reverse("frame", args=[capture.slug, capture.frame_count // 2]),
    ):
        page = html(client.get(url))
        assert page.count('<tr id="frag-') == 100
        assert page.count("of 42</span>") == 10  # "fragments 20–29 of 42"
    page = html(client.get(capture.get_absolute_url(), {"call": 3, "frag": 5}))
    assert "fragments 40–41 of 42" in page and '<tr id="frag-3-40"' in page
    one = store_stream(many_calls_stream(1, rounds=40), stream_format="sse")
    assert html(client.get(one.get_absolute_url())).count('<tr id="frag-') == FRAGMENTS_PER_PAGE


def test_the_calls_on_a_page_share_its_final_arguments_characters(client):
    def stream(calls: int) -> bytes:
        args = '{"v": "' + "x" * 4500 + '"}'
        items: list[Any] = [chunk(tool(k, f"call_{k}", f"tool_{k}", args)) for k in range(calls)]
        return sse(*items, chunk(finish="tool_calls"), DONE)

    ten = html(client.get(store_stream(stream(10), stream_format="sse").get_absolute_url()))
    assert ten.count("cut at 4000 characters") == 10
    two = html(client.get(store_stream(stream(2), stream_format="sse").get_absolute_url()))
    assert "cut at" not in two and two.count("x" * 4500) == 2


def test_ambiguous_capture_page_stays_within_the_same_bound(client, django_assert_max_num_queries):
    capture = demo("ambiguous_continuation.sse")  # disagreeing policies: one query more
    for url in (capture.get_absolute_url(), reverse("frame", args=[capture.slug, 3])):
        with django_assert_max_num_queries(PAGE_QUERIES):
            html(client.get(url))


def test_list_queries_do_not_grow_with_the_number_of_captures(
    client, django_assert_max_num_queries
):
    for number in range(30):
        store_stream(
            sse(chunk(content="hi", finish="stop"), DONE), stream_format="sse", title=str(number)
        )
    with django_assert_max_num_queries(3):
        html(client.get(reverse("capture-list")))


def test_pages_never_read_raw_bytes_or_result_documents(client):
    capture = demo("ambiguous_continuation.sse")
    with CaptureQueriesContext(connection) as queries:
        html(client.get(capture.get_absolute_url()))
        html(client.get(reverse("frame", args=[capture.slug, 3])))
        html(client.get(reverse("capture-list")))
    sql = " ".join(query["sql"] for query in queries.captured_queries)
    assert '"captures_capture"."raw"' not in sql
    assert "result_json" not in sql
    cut = re.sub(r'(SUBSTR|SUBSTRING|LENGTH)\("captures_frame"\."raw"', "", sql)
    assert '"captures_frame"."raw"' not in cut


@pytest.mark.parametrize(
    ("lenient", "disagree"),
    [
        (("ok", ""), True),  # another outcome
        (("refused", "INCOMPLETE_STREAM"), True),  # refused too, with another code
        (("refused", "IDENTITY_CONFLICT"), False),  # the same verdict
    ],
    ids=["outcome", "code", "same"],
)
def test_the_list_and_the_page_agree_on_whether_the_policies_disagree(client, lenient, disagree):
    """One meaning (`models.verdicts_differ`): the (outcome, refusal code) differ."""
    capture = demo("identity_conflict.sse", "renamed call")
    outcome, code = lenient
    models.Capture.objects.filter(pk=capture.pk).update(lenient_outcome=outcome)
    models.Assembly.objects.filter(capture=capture, policy="lenient").update(
        outcome=outcome, refusal_code=code
    )
    listed = html(client.get(reverse("capture-list")))
    page = html(client.get(capture.get_absolute_url()))
    assert (f"lenient: {outcome}</span>" in listed) is disagree
    assert ("Strict and lenient disagree on this stream." in page) is disagree
