"""Two captures side by side: frames aligned by number (paged by number
range, those whose raw text differs marked), calls aligned by id then by
position, differences marked; stream content stays text; a fixed number of
queries whatever the size."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from django.urls import reverse

from inspector.captures.models import Capture
from inspector.captures.pages import compare as compare_page
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db

DONE = "data: [DONE]\n\n"
XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'


def tool(index: Any = 0, id: Any = None, name: Any = None, args: Any = None) -> dict:
    entry: dict[str, Any] = {"index": index, "function": {}}
    if id is not None:
        entry["id"] = id
    if name is not None:
        entry["function"]["name"] = name
    if args is not None:
        entry["function"]["arguments"] = args
    return entry


def chunk(*tools: dict, content: str | None = None, finish: str | None = None) -> dict:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tools:
        delta["tool_calls"] = list(tools)
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def sse(*items: Any) -> bytes:
    return "".join(
        item if isinstance(item, str) else "data: " + orjson.dumps(item).decode() + "\n\n"
        for item in items
    ).encode()


def store(*items: Any, title: str = "") -> Capture:
    return store_stream(sse(*items), stream_format="sse", title=title)


def compare(client, a: str, b: str, status: int = 200, **params: Any) -> str:
    response = client.get(reverse("compare"), {"a": a, "b": b, **params})
    assert response.status_code == status, response.status_code
    return response.content.decode()


def frame_row(page: str, number: int) -> str:
    match = re.search(rf'<tr id="f-{number}"[^>]*>.*?</tr>', page, re.S)
    assert match, f"no frame row {number}"
    return match.group(0)


def call_rows(page: str) -> list[str]:
    section = re.search(r'<section id="calls".*?</section>', page, re.S).group(0)
    return re.findall(r'<tr class="cmp-row[^"]*">.*?</tr>', section, re.S)


def test_the_empty_form(client):
    page = compare(client, "", "")
    assert "Compare two captures" in page and 'name="a"' in page and 'name="b"' in page
    assert "cmp-summary" not in page


def test_frames_are_aligned_by_number_and_differences_marked(client):
    a = store(
        chunk(tool(0, "call_1", "read", '{"p":1}')),
        chunk(finish="tool_calls"),
        DONE,
        title="A side",
    )
    b = store(
        chunk(tool(0, "call_1", "read", '{"p":2}')),
        chunk(finish="tool_calls"),
        title="B side",
    )
    page = compare(client, a.slug, b.slug)
    assert f'<a href="{a.get_absolute_url()}" data-side="a">A side</a>' in page
    assert f'<a href="{b.get_absolute_url()}" data-side="b">B side</a>' in page
    assert 'class="differs"' in frame_row(page, 0)  # other arguments
    assert "cmp-same" in frame_row(page, 1) and "differs" not in frame_row(page, 1)
    assert "no such frame" in frame_row(page, 2)  # only A has [DONE]
    assert 'class="differs"' in frame_row(page, 2)
    assert "2 of 3 on this page differ" in page
    (row,) = call_rows(page)
    assert "cmp-row differs" in row and "by id" in row
    assert re.search(r'class="cmp-args differs-field"', row)
    assert 'differs-field" data-field="name"' not in row  # same name


def test_calls_align_by_id_then_by_position(client):
    a = store(
        chunk(tool(0, "call_x", "read", "{}")),
        chunk(tool(1, "call_y", "stat", "{}")),
        chunk(tool(2, None, "list", "{}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    b = store(
        chunk(tool(0, "call_y", "stat", "{}")),
        chunk(tool(1, "call_x", "read", "{}")),
        chunk(tool(2, None, "list", "{}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    rows = call_rows(compare(client, a.slug, b.slug))
    assert len(rows) == 3
    assert "by id" in rows[0] and rows[0].count("call_x") == 2
    assert "by id" in rows[1] and rows[1].count("call_y") == 2
    assert "by position" in rows[2] and rows[2].count("list") == 2
    assert 'differs-field" data-field="index"' in rows[0]  # index 0 against 1
    assert "(no id)" in rows[2]


def test_calls_only_one_side_has(client):
    a = store(chunk(tool(0, "call_1", "read", "{}")), chunk(finish="tool_calls"), DONE)
    b = store(
        chunk(tool(0, "call_1", "read", "{}")),
        chunk(tool(1, "call_2", "stat", "{}")),
        chunk(finish="tool_calls"),
        DONE,
    )
    rows = call_rows(compare(client, a.slug, b.slug))
    assert len(rows) == 2
    assert "cmp-same" in rows[0]
    assert "cmp-row differs" in rows[1] and "no such call" in rows[1]


def test_long_arguments_are_compared_whole(client):
    def long_call(middle: str) -> Capture:
        text = orjson.dumps({"a": "x" * 600, "m": middle, "z": "y" * 600}).decode()
        return store(chunk(tool(0, "call_1", "write", text)), chunk(finish="tool_calls"), DONE)

    a, same, other = long_call("one"), long_call("one"), long_call("two")
    (row,) = call_rows(compare(client, a.slug, same.slug))
    assert "cmp-same" in row
    (row,) = call_rows(compare(client, a.slug, other.slug))
    assert "cmp-row differs" in row and "cmp-args differs-field" in row


def test_the_outcome_and_refusal_of_each_side(client):
    ok = store(chunk(tool(0, "c", "read", '{"p":1}')), chunk(finish="tool_calls"), DONE)
    refused = store(chunk(tool(0, "c", "read", '{"p":1}}')), chunk(finish="tool_calls"), DONE)
    page = compare(client, ok.slug, refused.slug)
    summary = re.search(r'<table class="cmp-summary.*?</table>', page, re.S).group(0)
    outcome = re.search(r'<tr class="differs"><th scope="row">outcome</th>.*?</tr>', summary, re.S)
    assert outcome and "refused" in outcome.group(0)
    assert '<code class="code-refusal">INVALID_ARGUMENTS</code>' in summary
    (row,) = call_rows(page)
    assert 'class="chip ok differs-field" data-field="outcome">ok<' in row
    assert 'class="chip bad differs-field" data-field="outcome">INVALID_ARGUMENTS<' in row


def test_strict_against_lenient_of_one_capture(client):
    stream = sse(
        chunk(tool(0, "call_read", "read", '{"p":')),
        chunk(tool(0, "call_stat", "stat", '{"p":')),
        chunk(tool(0, args='"/a"}')),
        chunk(tool(0, args='"/b"}')),
        chunk(finish="tool_calls"),
        DONE,
    )
    capture = store_stream(stream, stream_format="sse")
    assert capture.policies_disagree
    page = compare(client, capture.slug, capture.slug, pb="lenient")
    assert "A · strict" in page and "B · lenient" in page
    assert "0 of 6 on this page differ" in page  # the same frames
    # The capture page links this pair.
    capture_page = client.get(capture.get_absolute_url()).content.decode()
    assert f"a={capture.slug}&amp;b={capture.slug}&amp;pb=lenient" in capture_page


def test_a_capture_link_works_as_well_as_a_slug(client):
    a = store(chunk(content="hi", finish="stop"), DONE, title="one")
    b = store(chunk(content="ho", finish="stop"), DONE, title="two")
    page = compare(client, f"http://example.test/c/{a.slug}/frames/1/#f-1", b.slug)
    assert 'data-side="a">one</a>' in page and 'data-side="b">two</a>' in page


def test_unknown_or_missing_captures_are_errors_on_the_form(client):
    a = store(chunk(content="hi", finish="stop"), DONE)
    assert "B: no capture &#x27;nope&#x27;" in compare(client, a.slug, "nope", status=404)
    assert "Name two captures" in compare(client, a.slug, "", status=400)
    assert "no policy" in compare(client, a.slug, a.slug, status=400, pa="loose")


def test_stream_content_stays_text(client):
    hostile = orjson.dumps({"html": XSS}).decode()
    a = store(chunk(tool(0, XSS, XSS, hostile)), chunk(finish="tool_calls"), DONE, title=XSS)
    b = store(chunk(tool(0, XSS, XSS + "2", hostile)), chunk(finish="tool_calls"), title=XSS)
    page = compare(client, a.slug, b.slug)
    assert "<script>window" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page)


def test_frames_are_paged_by_number_range(client):
    a = store(*[chunk(content=f"w{i}") for i in range(250)], chunk(finish="stop"), DONE)
    b = store(*[chunk(content=f"w{i}") for i in range(240)], chunk(finish="stop"), DONE)
    page = compare(client, a.slug, b.slug, page=3)
    assert page.count('<tr id="f-') == 52  # frames 200..251
    assert 'id="f-200"' in page and 'id="f-199"' not in page
    assert "cmp-same" in frame_row(page, 200)
    assert 'class="differs"' in frame_row(page, 240)  # B's finish against A's w240
    assert "no such frame" in frame_row(page, 251)
    assert f"a={a.slug}&amp;b={b.slug}&amp;page=2#frames" in page


def long_stream(fragments: int) -> bytes:
    items: list[Any] = [chunk(tool(0, "call_long", "write_file", '{"content": "'))]
    items += [chunk(tool(0, args=f"line {i}\\n")) for i in range(fragments)]
    items += [chunk(tool(0, args='"}'), finish="tool_calls"), DONE]
    return sse(*items)


COMPARE_QUERIES = 5  # captures, assemblies, frames, calls, long arguments


@pytest.mark.parametrize("fragments", [3, 3000])
def test_queries_do_not_grow_with_the_captures(client, django_assert_max_num_queries, fragments):
    a = store_stream(long_stream(fragments), stream_format="sse")
    b = store_stream(long_stream(fragments), stream_format="sse")
    for params in ({}, {"page": 7}, {"pb": "lenient"}):
        with django_assert_max_num_queries(COMPARE_QUERIES):
            page = compare(client, a.slug, b.slug, **params)
        assert page.count('<tr id="f-') <= compare_page.FRAMES_PER_PAGE
        assert len(page) < 400_000


def test_calls_are_capped(client, monkeypatch):
    monkeypatch.setattr(compare_page, "CALLS_SHOWN", 2)
    items = [chunk(tool(i, f"call_{i}", "read", "{}")) for i in range(4)]
    a = store(*items, chunk(finish="tool_calls"), DONE)
    page = compare(client, a.slug, a.slug)
    assert len(call_rows(page)) == 2
    assert "The first 2 calls of each side are compared." in page
