"""`manage.py load_demo`: a few demo captures, refused and accepted, stored
once however often it runs."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from inspector.captures.models import Capture
from inspector.management.commands.load_demo import DEMO_DIR, DEMOS

pytestmark = pytest.mark.django_db


def load() -> str:
    out = StringIO()
    call_command("load_demo", stdout=out)
    return out.getvalue()


def test_it_stores_refused_and_accepted_demos():
    assert "5 stored, 0 already there" in load()
    found = {c.title: (c.outcome, c.refusal_code, c.lenient_outcome) for c in Capture.objects.all()}
    assert found == {
        "Demo: two parallel tool calls (ok)": ("ok", "", "ok"),
        "Demo: two calls on one index (strict refuses, lenient guesses)": (
            "refused",
            "AMBIGUOUS_CONTINUATION",
            "ok",
        ),
        "Demo: arguments that never become JSON (INVALID_ARGUMENTS)": (
            "refused",
            "INVALID_ARGUMENTS",
            "refused",
        ),
        "Demo: a call renamed mid-stream (IDENTITY_CONFLICT)": (
            "refused",
            "IDENTITY_CONFLICT",
            "refused",
        ),
        "Demo: connection cut mid-frame (INCOMPLETE_STREAM)": (
            "refused",
            "INCOMPLETE_STREAM",
            "refused",
        ),
    }


def test_it_is_idempotent():
    load()
    assert "0 stored, 5 already there" in load()
    assert Capture.objects.count() == len(DEMOS)


def test_it_fills_in_a_demo_that_was_deleted():
    load()
    Capture.objects.filter(title__contains="IDENTITY_CONFLICT").delete()
    assert "1 stored, 4 already there" in load()
    assert Capture.objects.count() == len(DEMOS)


def test_every_demo_file_exists_and_every_demo_page_renders(client):
    assert {name for name, _ in DEMOS} == {path.name for path in DEMO_DIR.glob("*.sse")}
    load()
    assert client.get("/").status_code == 200
    for capture in Capture.objects.all():
        assert client.get(capture.get_absolute_url()).status_code == 200
