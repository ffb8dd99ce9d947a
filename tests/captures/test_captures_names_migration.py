"""Migration 0011: `group` becomes `har_upload` and `attempt_group` becomes
`retry_chain`, keeping what they hold, and back."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from migrations_helper import migrate_to as migrate_apps_to
from migrations_helper import migrate_to_latest

BEFORE = ("captures", "0010_lens_results")
AFTER = ("captures", "0011_capture_har_upload_retry_chain")


def migrate_to(target: tuple[str, str]):
    """The captures app at `target`; its Capture model as of then."""
    return migrate_apps_to(target).get_model("captures", "Capture")


def old_capture(Capture, slug: str, **fields):
    return Capture.objects.create(
        slug=slug, input_format="sse", stream_format="sse", outcome="ok", raw=b"", **fields
    )


@pytest.mark.django_db(transaction=True)
def test_the_renamed_fields_keep_their_values_both_ways():
    try:
        Capture = migrate_to(BEFORE)
        old_capture(Capture, "har-1", group="upload-1", har_entry=0)
        old_capture(Capture, "try-1", attempt_group="chain-1", attempt=1)
        old_capture(Capture, "try-2", attempt_group="chain-1", attempt=2)

        Capture = migrate_to(AFTER)
        rows = Capture.objects.order_by("slug").values_list("slug", "har_upload", "retry_chain")
        assert list(rows) == [
            ("har-1", "upload-1", ""),
            ("try-1", "", "chain-1"),
            ("try-2", "", "chain-1"),
        ]
        # the attempt numbers are still unique in a chain, under the new name
        with pytest.raises(IntegrityError), transaction.atomic():
            old_capture(Capture, "try-2-again", retry_chain="chain-1", attempt=2)
        with connection.cursor() as cursor:
            names = connection.introspection.get_constraints(cursor, "captures_capture")
        assert "retry_chain_attempt_unique" in names
        assert "attempt_number_unique" not in names

        Capture = migrate_to(BEFORE)
        rows = Capture.objects.order_by("slug").values_list("slug", "group", "attempt_group")
        assert list(rows) == [
            ("har-1", "upload-1", ""),
            ("try-1", "", "chain-1"),
            ("try-2", "", "chain-1"),
        ]
    finally:
        migrate_to_latest()
