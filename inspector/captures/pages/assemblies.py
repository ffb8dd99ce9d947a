"""A capture's assemblies as the pages read them: without their result
documents, the assembled text cut in the database, and how many calls each
holds counted in the same query (the one call-count subquery)."""

from __future__ import annotations

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce, Length, Substr

from ..models import Assembly, Call, Capture

TEXT_SHOWN = 4000  # characters of the assembled text shown


def call_count() -> Coalesce:
    """An annotation for assembly rows: how many calls each holds (0 for
    none), counted in the same query."""
    counted = (
        Call.objects.filter(assembly=OuterRef("pk"))
        .order_by()
        .values("assembly")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted), 0)


def assemblies(capture: Capture) -> dict[str, Assembly]:
    """Both policies' assemblies, without their result documents, one query."""
    rows = (
        Assembly.objects.filter(capture=capture)
        .defer("result_json", "text")
        .annotate(
            text_head=Substr("text", 1, TEXT_SHOWN),
            text_length=Length("text"),
            call_count=call_count(),
        )
    )
    return {row.policy: row for row in rows}
