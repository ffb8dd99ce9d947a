"""Search across captures (`?q=` on the list page and `GET /api/captures`):
tool names, call ids, argument text, refusal messages, titles and models, a
substring in any case; the model filter is a substring too; filters by
dialect and source; a fixed number of queries whatever matches."""

from __future__ import annotations

import re

import pytest
from capture_streams import DONE, chunk, sse, tool
from django.db import connection
from django.urls import reverse
from migrations_helper import migrate_to, migrate_to_latest
from page_helpers import html

from inspector.captures.intake import store_upload
from inspector.captures.models import Call, Capture
from inspector.captures.search import matching
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

API = "/api/captures"


def weather(model: str = "gpt-4o-mini-2024-07-18") -> bytes:
    """One call get_weather(call_WX9) whose city arrives over three frames."""
    return sse(
        chunk(tool(0, "call_WX9", "get_weather", '{"city": "Reyk'), model=model),
        chunk(tool(0, args="javík"), model=model),
        chunk(tool(0, args='"}'), finish="tool_calls", model=model),
        DONE,
    )


def cut() -> bytes:
    """Refused: the stream ends inside a call (INCOMPLETE_STREAM)."""
    return sse(chunk(tool(0, "call_cut", "read_file", '{"path": "/et'), model="claude-ish"))


@pytest.fixture
def stored() -> dict[str, Capture]:
    return {
        "weather": store_stream(weather(), stream_format="sse", title="forecast run"),
        "cut": store_stream(cut(), stream_format="sse", title="cut short", source="proxy"),
        "chat": store_stream(
            sse(chunk(content="hi", finish="stop", model="gpt-4o"), DONE),
            stream_format="sse",
            title="Plain Chat",
            source="ingest",
        ),
    }


def listed(client, **params) -> set[str]:
    page = html(client.get(reverse("capture-list"), params))
    return set(re.findall(r'<td class="title"><a [^>]*>([^<]*)</a>', page))


def api_titles(client, **params) -> set[str]:
    response = client.get(API, params)
    assert response.status_code == 200, response.content
    return {row["title"] for row in response.json()["results"]}


@pytest.mark.parametrize(
    ("text", "titles"),
    [
        ("GET_WEATHER", {"forecast run"}),  # a tool name, any case
        ("wx9", {"forecast run"}),  # a call id
        ("reykjav", {"forecast run"}),  # argument text spread over fragments
        ("/et", {"cut short"}),  # argument text of a refused call
        ("call", {"forecast run", "cut short"}),  # call ids of both
        ("claude", {"cut short"}),  # a model
        ("plain c", {"Plain Chat"}),  # a title
        ("nothing like this", set()),
    ],
)
def test_the_search_finds_the_text_wherever_it_is(client, stored, text, titles):
    assert listed(client, q=text) == titles
    assert api_titles(client, q=text) == titles


def test_the_search_finds_refusal_messages(client, stored):
    message = stored["cut"].assemblies.get(policy="strict").refusal_message
    words = message.split()[1:4]  # a part of it, in another case
    assert listed(client, q=" ".join(words).upper()) >= {"cut short"}


def test_the_model_filter_is_a_part_of_the_name(client, stored):
    """`gpt-4o` finds `gpt-4o-mini-…` too (it used to be an exact match)."""
    assert listed(client, model="gpt-4o") == {"forecast run", "Plain Chat"}
    assert listed(client, model="MINI") == {"forecast run"}
    assert api_titles(client, model="gpt-4o") == {"forecast run", "Plain Chat"}


def test_the_search_goes_with_the_filters(client, stored):
    assert listed(client, q="call", source="proxy") == {"cut short"}
    assert listed(client, q="call", outcome="ok") == {"forecast run"}
    assert listed(client, source="ingest") == {"Plain Chat"}
    assert listed(client, dialect="chat", q="gpt") == {"forecast run", "Plain Chat"}
    assert listed(client, dialect="messages", q="gpt") == set()
    assert api_titles(client, source="proxy") == {"cut short"}
    assert client.get(API, {"source": "carrier-pigeon"}).status_code == 400


def test_the_list_page_says_what_was_searched_escaped(client, stored):
    page = html(client.get(reverse("capture-list"), {"q": "call"}))
    assert '<input type="search" name="q" value="call"' in page
    assert "2 captures holding" in page
    hostile = html(client.get(reverse("capture-list"), {"q": "<b>x</b>"}))
    assert "<b>x</b>" not in hostile and "&lt;b&gt;x&lt;/b&gt;" in hostile


def test_a_search_is_paged_with_the_search_kept(client, stored, monkeypatch):
    from inspector.captures.pages import capture_list

    monkeypatch.setattr(capture_list, "CAPTURES_PER_PAGE", 1)
    first = html(client.get(reverse("capture-list"), {"q": "call"}))
    assert "page 1 of 2" in first and "q=call&amp;page=2" in first
    second = html(client.get(reverse("capture-list"), {"q": "call", "page": 2}))
    assert re.findall(r'<td class="title"><a [^>]*>([^<]*)</a>', second) == ["forecast run"]


def test_a_search_is_a_fixed_number_of_queries(client, stored, django_assert_num_queries):
    """The count, the page and the models offered: three, however many
    captures, calls and fragments match; the API: the count and the page."""
    for number in range(12):
        store_stream(weather(), stream_format="sse", title=f"more {number}")
    with django_assert_num_queries(3):
        assert len(listed(client, q="reykjav", model="gpt")) == 13
    with django_assert_num_queries(2):
        assert client.get(API, {"q": "wx9", "per_page": 5}).json()["count"] == 13


# --- find in arguments, on one capture's page ---------------------------------------------


def test_the_capture_page_has_a_find_in_arguments_form(client, stored):
    capture = stored["weather"]
    page = html(client.get(capture.get_absolute_url()))
    action = reverse("capture-find", args=[capture.slug])
    assert f'<form class="find-args" method="get" action="{action}"' in page
    assert 'name="text"' in page


@pytest.mark.parametrize(
    ("text", "frame", "anchor"),
    [
        ("city", 0, "frag-0-0"),
        ("REYKJAV", 1, "frag-0-1"),  # begins in fragment 0, completed by fragment 1
        ('"}', 2, "frag-0-2"),
    ],
)
def test_find_jumps_to_the_fragment_where_the_text_first_appears(
    client, stored, text, frame, anchor, django_assert_num_queries
):
    capture = stored["weather"]
    with django_assert_num_queries(3):
        response = client.get(reverse("capture-find", args=[capture.slug]), {"text": text})
    assert response.status_code == 303
    assert response["Location"] == f"/c/{capture.slug}/frames/{frame}/#{anchor}"
    page = html(client.get(response["Location"]))
    assert f'<tr id="{anchor}" class="is-focus"' in page


def test_find_says_not_found_on_the_capture_page(client, stored):
    capture = stored["weather"]
    url = reverse("capture-find", args=[capture.slug])
    response = client.get(url, {"text": "<i>oslo</i>"}, follow=True)
    assert response.redirect_chain == [
        (f"/c/{capture.slug}/?find=%3Ci%3Eoslo%3C%2Fi%3E#calls", 303)
    ]
    page = html(response)
    assert "Not found: no call's arguments hold “&lt;i&gt;oslo&lt;/i&gt;”." in page
    assert 'value="&lt;i&gt;oslo&lt;/i&gt;"' in page  # the form keeps the text
    assert client.get(reverse("capture-find", args=["no-such"]), {"text": "x"}).status_code == 404


def test_find_with_nothing_to_find_goes_back_to_the_calls(client, stored):
    capture = stored["weather"]
    response = client.get(reverse("capture-find", args=[capture.slug]), {"text": "  "})
    assert response.status_code == 303 and response["Location"] == f"/c/{capture.slug}/#calls"


def test_an_upload_is_found_by_its_arguments_once(client):
    """An upload's lenient assembly is strict's twin, its calls copies marked as such
    (`Call.twin_copy`): the search finds the capture by their text, once."""
    (capture,) = store_upload(weather(), name="twin.sse")
    lenient = capture.assemblies.get(policy="lenient")
    assert set(lenient.calls.values_list("twin_copy", flat=True)) == {True}
    assert api_titles(client, q="javík") == {capture.title}
    assert Capture.objects.filter(matching("REYKJAV")).count() == 1


def _index_definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes"
            " WHERE tablename = 'captures_call' AND indexname LIKE 'search_call_%%'"
        )
        return dict(cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigram indexes")
def test_the_calls_indexes_leave_out_twin_copies_and_the_search_uses_them():
    """Migration 0020: each of the calls' search indexes is partial, and the search's
    subquery of calls (`twin_copy = false`) is answered from them."""
    definitions = _index_definitions()
    assert sorted(definitions) == [
        f"search_call_{c}" for c in ("arguments_text", "call_id", "name")
    ]
    assert all(d.endswith("WHERE (NOT twin_copy)") for d in definitions.values()), definitions
    # A table of calls of a size where the indexes pay.  Nearly empty, the plan rested on
    # the statistics the tests before left: after the live tests, scanning the whole of
    # another partial index once was the cheaper plan (with 3,000 calls too, analyzed).
    (capture,) = store_upload(weather(), name="calls.sse")
    strict = capture.assemblies.get(policy="strict")
    Call.objects.bulk_create(
        Call(
            assembly=strict,
            position=n,
            call_id=f"call_{n:08x}",
            name=f"tool_{n}",
            arguments_text=f'{{"n":{n},"city":"Oslo {n}"}}',
        )
        for n in range(100, 30100)
    )
    with connection.cursor() as cursor:
        # Only bitmap scans: a sequential scan of 30,000 short rows is cheaper still.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
    plan = Capture.objects.filter(matching("javík")).explain()
    assert "search_call_arguments_text" in plan, plan


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigram indexes")
def test_the_calls_indexes_are_whole_again_before_0020():
    try:
        migrate_to(("captures", "0019_lz4_large_values"))
        definitions = _index_definitions()
        assert len(definitions) == 3
        assert not any("WHERE" in d for d in definitions.values()), definitions
    finally:
        migrate_to_latest()
    assert all(d.endswith("WHERE (NOT twin_copy)") for d in _index_definitions().values())
