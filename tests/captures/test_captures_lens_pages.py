"""The lens matrix on the pages: calls by lenses, each cell short and escaped,
diverging cells highlighted and every divergence spelled out below; the
capture page only links to it (never reads the stream for it)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from capture_streams import DONE, chunk, sse, tool
from django.urls import reverse
from page_helpers import demo, html

from inspector.captures.models import Capture
from inspector.captures.pages import lenses as lens_page
from inspector.captures.store import store_stream
from inspector.lenses import openai_sdk
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=1">'
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)


# Two calls on index 0 (Ollama): LiteLLM glues their arguments together.
REUSED_INDEX = sse(
    chunk(tool(0, "call_a", "read", '{"path":"/a"}')),
    chunk(tool(0, "call_b", "read", '{"path":"/b"}')),
    chunk(finish="tool_calls"),
    DONE,
)
# The only call at index 1: the OpenAI SDK raises IndexError.
SPARSE_INDEX = sse(
    chunk(content="Reading"),
    chunk(tool(1, "toolu_1", "read_file", "")),
    chunk(tool(1, args='{"path": "a.txt"}')),
    chunk(finish="tool_calls"),
    DONE,
)


def store(data: bytes, title: str = "lenses") -> Capture:
    return store_stream(data, stream_format="sse", title=title)


def lens_url(capture: Capture, **params: Any) -> str:
    url = reverse("capture-lenses", args=[capture.slug])
    if params:
        url += "?" + "&".join(f"{key}={value}" for key, value in params.items())
    return url


def cell(page: str, row: str, lens: str) -> str:
    """The opening tag and content of one cell of the matrix."""
    match = re.search(rf'<tr id="lens-row-{row}">(.*?)</tr>', page, re.S)
    assert match, f"no row {row}"
    found = re.search(rf'<td class="[^"]*"[^>]*data-lens="{lens}">.*?</td>', match.group(1), re.S)
    assert found, f"no cell {lens} in row {row}"
    return found.group(0)


def sentences(page: str) -> list[str]:
    items = re.findall(r'<span class="divergence-message">(.*?)</span>', page, re.S)
    return [item.replace("&quot;", '"').replace("&#x27;", "'") for item in items]


# --- the capture page links to the matrix ------------------------------------------------


def test_capture_page_has_the_lens_section_and_never_computes_it(client, monkeypatch):
    capture = store(REUSED_INDEX)

    def boom(*args, **kwargs):
        raise AssertionError("the capture page computed the lenses")

    monkeypatch.setattr(lens_page, "lens_matrix", boom)
    page = html(client.get(capture.get_absolute_url()))
    assert "What client libraries would have done" in page
    section = re.search(r'<section class="card lenses" id="lenses"[^>]*>', page).group(0)
    assert f'data-url="{lens_url(capture)}?partial=1"' in section
    assert "data-autoload" in section
    assert f'<a class="button" href="{lens_url(capture)}" data-lenses-load>' in page
    assert '<script src="/static/inspector/reproducers.js" defer></script>' in page
    assert not INLINE_SCRIPT.search(page)


def test_a_large_capture_is_not_loaded_by_itself(client, monkeypatch):
    monkeypatch.setattr(lens_page, "LENS_AUTOLOAD_BYTES", 10)
    capture = store(REUSED_INDEX)
    page = html(client.get(capture.get_absolute_url()))
    section = re.search(r'<section class="card lenses" id="lenses"[^>]*>', page).group(0)
    assert "data-autoload" not in section
    assert "this may take a while" in page


def test_a_capture_still_recorded_has_no_lens_section(client):
    live = LiveCapture.open(stream_format="sse", title="in progress")
    live.append(sse(chunk(content="hi")))
    page = html(client.get(reverse("capture", args=[live.slug])))
    assert 'id="lenses"' not in page
    capture = Capture.objects.get(slug=live.slug)
    assert "still being recorded" in html(client.get(lens_url(capture)), 409)


# --- the matrix --------------------------------------------------------------------------


def test_matrix_has_calls_by_lenses_with_divergences_highlighted_and_spelled_out(client):
    capture = store(REUSED_INDEX)
    page = html(client.get(lens_url(capture)))
    titles = re.findall(r'<span class="lens-title">([^<]*)</span>', page)
    assert titles == ["strict", "the OpenAI SDK", "Vercel", "LiteLLM", "LangChain"]
    assert "#0 call_a" in page and "#1 call_b" in page

    # LiteLLM hands call_b both calls' arguments: highlighted, with its sentence.
    litellm = cell(page, "strict-1", "litellm")
    assert 'class="lens-cell diverges"' in litellm
    assert "{&quot;path&quot;:&quot;/a&quot;}{&quot;path&quot;:&quot;/b&quot;}" in litellm
    assert "does not parse" in litellm
    said = sentences(page)
    assert any(s.startswith('LiteLLM would run read with {"path":"/a"}{"path":"/b"}') for s in said)
    assert "LiteLLM would drop call_a" in said
    assert "no such call" in cell(page, "strict-0", "litellm")
    # Its ≠ reference names that sentence's number.
    number = 1 + next(i for i, s in enumerate(said) if s.startswith("LiteLLM would run read with"))
    assert f'href="#lens-divergence-{number}"' in litellm
    assert f'<li id="lens-divergence-{number}" value="{number}"' in page

    # Where a library agrees with strict, nothing is marked.
    vercel = cell(page, "strict-1", "vercel")
    assert 'class="lens-cell"' in vercel and "parsed" in vercel
    assert "6 divergences" in page
    assert not INLINE_SCRIPT.search(page)


def test_a_refused_capture_every_call_that_would_run_diverges(client):
    capture = demo("ambiguous_continuation.sse")
    page = html(client.get(lens_url(capture)))
    assert 'Strict refuses <code class="code-refusal">AMBIGUOUS_CONTINUATION</code>' in page
    assert "held back: refused" in cell(page, "strict-0", "strict")
    assert 'class="lens-cell diverges"' in cell(page, "strict-1", "litellm")
    assert "strict refuses AMBIGUOUS_CONTINUATION; LiteLLM would run stat_file with " in " ".join(
        sentences(page)
    )


def test_a_lens_that_raises_shows_its_error(client):
    pytest.importorskip("openai")
    capture = store(SPARSE_INDEX)
    page = html(client.get(lens_url(capture)))
    header = re.search(r'<th scope="col" class="lens-col lens-col-openai[^"]*".*?</th>', page, re.S)
    assert "diverges" in header.group(0).split(">")[0]
    assert "raises IndexError: list index out of range" in header.group(0)
    assert "the OpenAI SDK would raise IndexError: list index out of range" in sentences(page)
    assert "never handed over" in cell(page, "strict-0", "openai")
    assert "Every lens agrees" not in page


def test_the_sdk_lens_unavailable_says_so(client, monkeypatch):
    def missing():
        raise ImportError("No module named 'openai'")

    monkeypatch.setattr(openai_sdk, "_load", missing)
    capture = store(REUSED_INDEX)
    page = html(client.get(lens_url(capture)))
    header = re.search(r'<th scope="col" class="lens-col lens-col-openai[^"]*".*?</th>', page, re.S)
    assert "unavailable" in header.group(0)
    assert "pip install" in header.group(0)
    assert ">unavailable<" in cell(page, "strict-0", "openai")
    assert not any(s.startswith("the OpenAI SDK") for s in sentences(page))


def test_an_ok_stream_every_lens_agrees(client):
    capture = demo("parallel_calls_ok.sse")
    page = html(client.get(lens_url(capture)))
    assert "Every lens agrees with strict." in page
    assert "lens-cell diverges" not in page and "lens-ref" not in page
    assert 'class="divergences"' not in page


def test_cells_are_cut_short_and_escaped(client):
    long_arguments = orjson.dumps({"html": XSS, "pad": "x" * 2000}).decode()
    capture = store(
        sse(
            chunk(tool(0, XSS + "id", XSS, long_arguments[:40])),
            chunk(tool(0, args=long_arguments[40:])),
            chunk(tool(0, XSS + "id", XSS, "")),  # repeated: some lenses glue them
            chunk(finish="tool_calls"),
            DONE,
        ),
        title=XSS,
    )
    for url in (lens_url(capture), lens_url(capture, partial=1)):
        page = html(client.get(url))
        assert "<script>window" not in page and "<img src=x" not in page
        assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page
        assert "x" * 2000 not in page  # arguments cut ...
        args = re.findall(r'<pre class="lens-args">(.*?)</pre>', page, re.S)
        assert args and all(a.endswith("\u2026") for a in args)  # ... with an ellipsis
        assert not INLINE_SCRIPT.search(page)


def test_partial_is_only_the_matrix(client):
    capture = store(REUSED_INDEX)
    page = html(client.get(lens_url(capture, partial=1)))
    assert page.lstrip().startswith('<div id="lens-matrix" class="lens-matrix">')
    assert "<html" not in page and "<header" not in page
    assert 'class="lens-cell diverges"' in page


def test_rows_are_paged_and_sentences_link_to_their_page(client, monkeypatch):
    monkeypatch.setattr(lens_page, "LENS_ROWS", 2)
    items: list[Any] = []
    for number in range(5):  # five calls on index 0: LiteLLM glues them
        items.append(chunk(tool(0, f"call_{number}", "read", f'{{"n":{number}}}')))
    capture = store(sse(*items, chunk(finish="tool_calls"), DONE))
    first = html(client.get(lens_url(capture)))
    assert first.count('<tr id="lens-row-') == 2
    assert "calls 0–1 of 5" in first
    assert f'href="{lens_url(capture)}?page=2#lens-matrix"' in first
    # A sentence about call 4 links to the page holding its row.
    assert f'href="{lens_url(capture)}?page=3#lens-row-strict-4"' in first
    last = html(client.get(lens_url(capture, page=3)))
    assert last.count('<tr id="lens-row-') == 1 and 'id="lens-row-strict-4"' in last


def test_unknown_capture_is_404(client):
    assert client.get(reverse("capture-lenses", args=["nope"])).status_code == 404


def test_lens_page_reads_one_row(client, django_assert_max_num_queries):
    capture = store(REUSED_INDEX)
    # The first visit computes and stores each lens's result (lens_cache.py);
    # every visit after it reads them, with the capture, in one query.
    html(client.get(lens_url(capture)))
    with django_assert_max_num_queries(1):
        html(client.get(lens_url(capture)))
    with django_assert_max_num_queries(1):
        html(client.get(lens_url(capture, partial=1)))
