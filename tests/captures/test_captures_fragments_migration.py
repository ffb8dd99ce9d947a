"""Migration 0018: a fragment is kept by its capture and its strict call's
position instead of its Call row, keeping every stored fragment, and back."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from migrations_helper import migrate_to, migrate_to_latest

BEFORE = ("captures", "0017_large_values_last")
AFTER = ("captures", "0018_fragments_by_capture")


def fragment(Fragment, seq: int, **fields):
    values = {"frame": seq, "offset": seq, "text": "x", "depth": 1}
    return Fragment.objects.create(seq=seq, in_string=False, complete=False, **values, **fields)


@pytest.mark.django_db(transaction=True)
def test_fragments_keep_their_call_by_capture_and_position_both_ways():
    try:
        apps = migrate_to(BEFORE)
        Capture, Assembly, Call, Fragment = (
            apps.get_model("captures", name) for name in ("Capture", "Assembly", "Call", "Fragment")
        )
        captures = [
            Capture.objects.create(
                slug=slug, input_format="sse", stream_format="sse", outcome="ok", raw=b""
            )
            for slug in ("one", "two")
        ]
        for capture in captures:
            strict = Assembly.objects.create(capture=capture, policy="strict", outcome="ok")
            Assembly.objects.create(capture=capture, policy="lenient", outcome="ok")
            for position in (0, 1):
                call = Call.objects.create(assembly=strict, position=position)
                for seq in range(position + 2):
                    fragment(Fragment, seq, call=call)

        apps = migrate_to(AFTER)
        Fragment = apps.get_model("captures", "Fragment")
        rows = Fragment.objects.order_by("capture__slug", "position", "seq")
        assert list(rows.values_list("capture__slug", "position", "seq")) == [
            (slug, position, seq)
            for slug in ("one", "two")
            for position in (0, 1)
            for seq in range(position + 2)
        ]
        capture = apps.get_model("captures", "Capture").objects.get(slug="one")
        with pytest.raises(IntegrityError), transaction.atomic():
            fragment(Fragment, 0, capture=capture, position=1)  # (capture, position, seq) once

        apps = migrate_to(BEFORE)
        Fragment = apps.get_model("captures", "Fragment")
        rows = Fragment.objects.order_by("call__assembly__capture__slug", "call__position", "seq")
        assert list(
            rows.values_list("call__assembly__capture__slug", "call__assembly__policy", "seq")
        ) == [
            (slug, "strict", seq)
            for slug in ("one", "two")
            for position in (0, 1)
            for seq in range(position + 2)
        ]
    finally:
        migrate_to_latest()
