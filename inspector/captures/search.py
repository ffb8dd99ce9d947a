"""Search across captures (`?q=` of the capture list and `GET /api/captures`):
a capture matches when the text is in its title or model, in one of its
calls' tool name, call id or argument text, or in a refusal message; a
substring, case-insensitive.

One condition for the list's queries (no query of its own): the calls and
refusals that match are subqueries, so a page of results stays two queries
(the count and the page) whatever matches.  On PostgreSQL each searched
column has a trigram GIN index on `UPPER(column)` (migration
0013_search_indexes), which is exactly what Django's `icontains` compares
there, so the `LIKE '%text%'` is answered from the index; SQLite scans
(a plain LIKE, ASCII case folding).  The calls' indexes leave out a lenient
twin's copies of strict's calls (`Call.twin_copy`, migration 0020): the
same text, in the same capture.
"""

from __future__ import annotations

from django.db.models import Q

from .models import Assembly, Call

# Searched columns, per table (the migration indexes exactly these).
CAPTURE_COLUMNS = ("title", "model")
CALL_COLUMNS = ("name", "call_id", "arguments_text")
ASSEMBLY_COLUMNS = ("refusal_message",)


def _any_contains(columns: tuple[str, ...], text: str) -> Q:
    condition = Q()
    for column in columns:
        condition |= Q(**{f"{column}__icontains": text})
    return condition


def matching(text: str) -> Q:
    """The captures `text` is found in (a condition on Capture)."""
    # A twin's copied calls are strict's (and not in the indexes: migration 0020).
    calls = Call.objects.filter(_any_contains(CALL_COLUMNS, text), twin_copy=False)
    calls = calls.values("assembly__capture_id")
    refusals = Assembly.objects.filter(_any_contains(ASSEMBLY_COLUMNS, text)).values("capture_id")
    return _any_contains(CAPTURE_COLUMNS, text) | Q(pk__in=calls) | Q(pk__in=refusals)
