"""Content-Security-Policy and the other security headers on every page, and
no page that needs inline script or inline style: no <script> without src, no
on*= handler attributes, no style= attributes, no <style> blocks, in what the
templates render (hostile stream content included) and in the static JS."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest
from access_helpers import CSP, chunk, refused_stream, store

pytestmark = pytest.mark.django_db(transaction=True)

BASE_DIR = Path(__file__).resolve().parents[2]
HOSTILE = (
    '<script>window.__xss=1</script><img src=x onerror=window.__xss=1 style="color:red">'
    '<div style="x" onclick="y">'
)


class InlineFinder(HTMLParser):
    """Every inline script, handler attribute, style attribute or style block."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.tags = 0

    def handle_starttag(self, tag, attrs):
        self.tags += 1
        names = {name.lower(): value for name, value in attrs}
        if tag == "script" and not names.get("src"):
            self.found.append(f"<script> without src: {attrs}")
        if tag == "style":
            self.found.append("<style> block")
        for name in names:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=>")
            if name == "style":
                self.found.append(f"<{tag} style=>")
        if tag == "a" and (names.get("href") or "").strip().lower().startswith("javascript:"):
            self.found.append("javascript: link")

    handle_startendtag = handle_starttag


def inline_parts(html: str) -> list[str]:
    finder = InlineFinder()
    finder.feed(html)
    finder.close()
    assert finder.tags > 10, "not a page"
    # The same by pattern on the raw text, quoted attribute values emptied first
    # (escaped stream text inside value="..." is text, not an attribute).
    tags = re.sub(r'="[^"]*"', '=""', html)
    assert not re.search(r"<[a-z][^>]*\son\w+\s*=", tags, re.I), "on*= attribute"
    assert not re.search(r"<[a-z][^>]*\sstyle\s*=", tags, re.I), "style= attribute"
    return finder.found


def hostile_captures():
    call = {"index": 0, "id": HOSTILE, "function": {"name": HOSTILE, "arguments": ""}}
    args = orjson.dumps({"html": HOSTILE}).decode()
    data = b"".join(
        [
            chunk({"content": HOSTILE}, model=HOSTILE[:150]),
            chunk({"tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[:25]}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": args[25:]}}]}),
            b"data: " + HOSTILE.encode() + b"\n\n",
            chunk({}, finish="tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )
    first = store(data, title=HOSTILE[:200])
    second = store(refused_stream(), title="plain")
    return first, second


def pages(first, second) -> list[str]:
    return [
        "/",
        "/?outcome=refused",
        "/upload/",
        "/compare/",
        f"/compare/?a={first.slug}&b={second.slug}",
        f"/compare/?a={first.slug}&b=nope",
        first.get_absolute_url(),
        f"/c/{first.slug}/frames/0/",
        f"/c/{first.slug}/frames/4/",
        f"/c/{first.slug}/lenses/",
        f"/c/{first.slug}/lenses/?partial=1",
        second.get_absolute_url(),
        "/accounts/login/",
    ]


def test_every_page_carries_the_policy_and_the_security_headers(client, open_mode):
    first, second = hostile_captures()
    for url in pages(first, second):
        response = client.get(url)
        assert response.status_code in (200, 404), url
        assert response["Content-Security-Policy"] == CSP, url
        assert response["X-Content-Type-Options"] == "nosniff", url
        assert response["Referrer-Policy"] == "same-origin", url
        assert response["X-Frame-Options"] == "DENY", url
    missing = client.get("/c/no-such-capture/")
    assert missing.status_code == 404 and missing["Content-Security-Policy"] == CSP
    # JSON and downloads: nosniff (no policy needed: never rendered as a page).
    api = client.get(f"/api/captures/{first.slug}")
    assert api["X-Content-Type-Options"] == "nosniff"
    raw = client.get(f"/c/{first.slug}/raw")
    assert raw["X-Content-Type-Options"] == "nosniff"


def test_no_rendered_page_needs_inline_script_or_style(client, open_mode):
    first, second = hostile_captures()
    for url in pages(first, second):
        html = client.get(url).content.decode()
        assert inline_parts(html) == [], url
    # The hostile text is on the page, escaped.
    page = client.get(first.get_absolute_url()).content.decode()
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page


def test_no_inline_script_or_style_for_share_link_and_login_pages(client, login_mode, user):
    first, second = hostile_captures()
    for url in (first.get_absolute_url(), f"/c/{first.slug}/frames/4/", "/accounts/login/"):
        html = client.get(url).content.decode()
        assert inline_parts(html) == [], url
    client.force_login(user)
    for url in pages(first, second)[:-1]:
        response = client.get(url)
        assert response["Content-Security-Policy"] == CSP, url
        assert inline_parts(response.content.decode()) == [], url


def test_the_templates_hold_no_inline_script_handler_or_style():
    for path in sorted((BASE_DIR / "templates").rglob("*.html")):
        text = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), path
        assert not re.search(r"\son[a-z]+\s*=", text), path
        assert not re.search(r"\sstyle\s*=", text), path
        assert "<style" not in text, path


def test_the_scripts_never_write_markup_or_inline_styles():
    for path in sorted((BASE_DIR / "static").rglob("*.js")):
        text = re.sub(r"//[^\n]*", "", path.read_text())  # comments may name what is avoided
        for banned in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            'setAttribute("style"',
            "setAttribute('style'",
            "cssText",
            'setAttribute("on',
            "setAttribute('on",
        ):
            assert banned not in text, (path.name, banned)


def test_the_finder_finds_inline_script_handlers_and_styles():
    page = "<html><head><title>t</title></head><body>" + "<p>x</p>" * 10
    bad = page + '<script>1</script><b onclick="x">b</b><i style="c">i</i><style>p{}</style>'
    finder = InlineFinder()
    finder.feed(bad)
    assert finder.found == [
        "<script> without src: []",
        "<b onclick=>",
        "<i style=>",
        "<style> block",
    ]
    with pytest.raises(AssertionError):
        inline_parts(page + "<b onclick=x>b</b>")
