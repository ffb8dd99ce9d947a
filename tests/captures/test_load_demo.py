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
    assert "11 stored, 0 already there" in load()
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
        **DIALECT_DEMOS,
    }


# Per dialect: one accepted with parallel calls, one refused for a quirk of its wire.
DIALECT_DEMOS = {
    "Demo Responses: web search and two parallel calls (ok)": ("ok", "", "ok"),
    "Demo Responses: deltas and final copy disagree (INCONSISTENT_CALL)": (
        "refused",
        "INCONSISTENT_CALL",
        "refused",
    ),
    "Demo Anthropic: web search and two tool_use blocks (ok)": ("ok", "", "ok"),
    "Demo Anthropic: a fragment after content_block_stop (INCONSISTENT_CALL)": (
        "refused",
        "INCONSISTENT_CALL",
        "refused",
    ),
    "Demo Gemini: a whole call and a streamed one (ok)": ("ok", "", "ok"),
    "Demo Gemini: the model's own failed call (MALFORMED_FUNCTION_CALL)": (
        "refused",
        "MALFORMED_TOOL_CALL",
        "refused",
    ),
}


def test_each_dialect_has_its_demos_with_parallel_calls():
    load()
    dialects = {}
    for capture in Capture.objects.filter(title__in=DIALECT_DEMOS):
        dialects.setdefault(capture.dialect, []).append(capture)
        assert capture.dialect_basis == "frames"
    assert sorted(dialects) == ["gemini", "messages", "responses"]
    for captures in dialects.values():
        (accepted,) = [c for c in captures if c.outcome == "ok"]
        strict = accepted.assemblies.get(policy="strict")
        function_calls = [c for c in strict.calls.all() if c.name.startswith("search_")]
        assert len(function_calls) == 2


def test_it_is_idempotent():
    load()
    assert "0 stored, 11 already there" in load()
    assert Capture.objects.count() == len(DEMOS)


def test_it_fills_in_a_demo_that_was_deleted():
    load()
    Capture.objects.filter(title__contains="IDENTITY_CONFLICT").delete()
    assert "1 stored, 10 already there" in load()
    assert Capture.objects.count() == len(DEMOS)


def test_every_demo_file_exists_and_every_demo_page_renders(client):
    assert {name for name, _ in DEMOS} == {path.name for path in DEMO_DIR.glob("*.sse")}
    load()
    assert client.get("/").status_code == 200
    for capture in Capture.objects.all():
        assert client.get(capture.get_absolute_url()).status_code == 200
