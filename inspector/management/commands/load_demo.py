"""`manage.py load_demo`: store a few demo captures, so a new install shows
the product at once.  Idempotent: a demo whose title is already stored is
skipped.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from inspector.captures.intake import store_upload
from inspector.captures.models import Capture

DEMO_DIR = Path(__file__).resolve().parents[2] / "captures" / "demo"

# (file under DEMO_DIR, title), oldest first so the list shows the first one on top.
DEMOS = [
    ("cut_connection.sse", "Demo: connection cut mid-frame (INCOMPLETE_STREAM)"),
    ("identity_conflict.sse", "Demo: a call renamed mid-stream (IDENTITY_CONFLICT)"),
    ("invalid_arguments.sse", "Demo: arguments that never become JSON (INVALID_ARGUMENTS)"),
    (
        "ambiguous_continuation.sse",
        "Demo: two calls on one index (strict refuses, lenient guesses)",
    ),
    ("parallel_calls_ok.sse", "Demo: two parallel tool calls (ok)"),
    # One refused for a quirk of its wire, and one accepted with parallel calls, per dialect.
    (
        "gemini_malformed_function_call.sse",
        "Demo Gemini: the model's own failed call (MALFORMED_FUNCTION_CALL)",
    ),
    (
        "messages_delta_after_block_stop.sse",
        "Demo Anthropic: a fragment after content_block_stop (INCONSISTENT_CALL)",
    ),
    (
        "responses_final_copy_disagrees.sse",
        "Demo Responses: deltas and final copy disagree (INCONSISTENT_CALL)",
    ),
    ("gemini_parallel_calls_ok.sse", "Demo Gemini: a whole call and a streamed one (ok)"),
    ("messages_parallel_calls_ok.sse", "Demo Anthropic: web search and two tool_use blocks (ok)"),
    ("responses_parallel_calls_ok.sse", "Demo Responses: web search and two parallel calls (ok)"),
]


class Command(BaseCommand):
    help = "Store the demo captures (skips those already stored, by title)."

    def handle(self, *args, **options) -> None:
        stored = set(
            Capture.objects.filter(title__in=[title for _, title in DEMOS]).values_list(
                "title", flat=True
            )
        )
        created = 0
        for name, title in DEMOS:
            if title in stored:
                continue
            data = (DEMO_DIR / name).read_bytes()
            (capture,) = store_upload(data, name=name, title=title)
            created += 1
            self.stdout.write(f"{capture.outcome:8} {capture.refusal_code or '-':24} {title}")
        skipped = len(DEMOS) - created
        self.stdout.write(f"demo captures: {created} stored, {skipped} already there")
