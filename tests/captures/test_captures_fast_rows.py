"""`fast_rows.insert_rows`: rows go in as given, in each of its ways of writing
(COPY on PostgreSQL; on SQLite `executemany` or many-row INSERTs, through the
driver's own connection), and the database's refusals come out as Django's."""

import pytest
from django.db import IntegrityError, transaction

from inspector.captures import models
from inspector.captures.fast_rows import insert_rows
from inspector.captures.store import FRAME_FIELDS

pytestmark = pytest.mark.django_db


def frame_row(capture, number, raw):
    return (capture.pk, number, "chunk", raw, 1.5 * number, "[0]", "[]", "[]", False)


def stored(capture):
    return list(
        models.Frame.objects.filter(capture=capture)
        .order_by("number")
        .values_list("number", "raw", "arrived_ms", "calls")
    )


@pytest.mark.parametrize("one_statement", [False, True])
def test_rows_go_in_as_given(one_statement):
    capture = models.Capture.objects.create(raw=b"")
    texts = ["data: {}", "it's %s and ? and 100%", "\u00e9\u2603 \\u0000"]
    rows = [frame_row(capture, n, text) for n, text in enumerate(texts)]
    insert_rows(models.Frame, FRAME_FIELDS, iter(rows), one_statement=one_statement)
    assert stored(capture) == [(n, text, 1.5 * n, [0]) for n, text in enumerate(texts)]


@pytest.mark.parametrize("one_statement", [False, True])
def test_a_refused_row_is_djangos_integrity_error_and_nothing_of_it_stays(one_statement):
    capture = models.Capture.objects.create(raw=b"")
    insert_rows(models.Frame, FRAME_FIELDS, [frame_row(capture, 0, "first")])
    again = [frame_row(capture, 1, "second"), frame_row(capture, 0, "the same number")]
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(models.Frame, FRAME_FIELDS, again, one_statement=one_statement)
    assert stored(capture) == [(0, "first", 0.0, [0])]
