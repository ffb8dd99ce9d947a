"""Everyday polish met as a new user: the upload form's wording and progress
bar, the favicon, dark mode's variables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse
from page_helpers import html

pytestmark = pytest.mark.django_db

CSS = Path(finders.find("inspector/inspector.css")).read_text()


def test_an_unreadable_upload_speaks_of_the_form_fields(client):
    page = html(client.post(reverse("upload"), {"text": "hello world", "format": "auto"}), 400)
    assert "choose it in the Format field (SSE, JSON Lines or HAR)" in page
    assert "json-array" not in page and "--format" not in page


def test_the_upload_form_posts_without_javascript_and_has_a_hidden_progress_bar(client):
    page = html(client.get(reverse("upload")))
    assert re.search(r'<form class="upload card" method="post" enctype="multipart/form-data"', page)
    assert re.search(r'<span class="upload-progress" data-upload-progress [^>]*hidden>', page)
    assert '<script src="/static/inspector/upload.js" defer></script>' in page


def test_every_page_names_the_favicon_and_both_colour_schemes(client):
    page = html(client.get(reverse("capture-list")))
    assert '<link rel="icon" href="/static/inspector/favicon.svg" type="image/svg+xml">' in page
    assert '<meta name="color-scheme" content="light dark">' in page
    assert finders.find("inspector/favicon.svg").endswith("favicon.svg")


def test_dark_mode_sets_every_colour_variable_the_light_one_sets():
    light_block = CSS[CSS.index(":root {") : CSS.index("}", CSS.index(":root {"))]
    dark_at = CSS.index("@media (prefers-color-scheme: dark)")
    dark_block = CSS[dark_at : CSS.index("}", dark_at)]
    colours = {
        name
        for name, value in re.findall(r"(--[\w-]+):\s*([^;]+);", light_block)
        if value.startswith(("#", "rgba"))
    }
    assert colours and colours <= set(re.findall(r"(--[\w-]+):", dark_block))
