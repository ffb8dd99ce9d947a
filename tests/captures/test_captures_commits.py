"""Which commits wait for the disk.  On PostgreSQL the intermediate steps of a
long write (an upload's batches, a live recording's batches) commit without
waiting for the log to be flushed (`writes.commit_without_waiting_for_disk`);
the write's last transaction, which makes every step before it durable,
waits as any other does.  SQLite is left as settings.py sets it.  On both,
every batch of frames is written in a transaction, the last one too."""

import pytest
from capture_streams import WORD_PIECES, WORD_STREAM
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from psycopg import pq

from inspector.captures import fast_rows, intake, models, store
from inspector.captures.intake import store_upload
from inspector.captures.writes import commit_without_waiting_for_disk
from inspector.live.recovery import recover_interrupted
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="PostgreSQL's synchronous_commit"
)


def in_transaction() -> bool:
    """Whether a transaction is open: Django's, or on PostgreSQL one of an
    upload's steps, which are outside Django's (`commits_behind.py`)."""
    if connection.in_atomic_block:
        return True
    if connection.vendor != "postgresql":
        return False
    return connection.connection.info.transaction_status == pq.TransactionStatus.INTRANS


def synchronous_commit() -> str:
    """PostgreSQL's setting now ("-" on SQLite)."""
    if connection.vendor != "postgresql":
        return "-"
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.fixture
def seen(monkeypatch):
    """`synchronous_commit` where each batch of frames is inserted ("frames"),
    and in the close's last transaction, where the raw bytes are written
    ("close")."""
    seen = []
    insert_rows, write_raw = fast_rows.insert_rows, store.write_raw

    def frames_inserted(model, *args, **kwargs):
        if model is models.Frame:
            seen.append(("frames", in_transaction(), synchronous_commit()))
        return insert_rows(model, *args, **kwargs)

    def raw_written(*args, **kwargs):
        seen.append(("close", in_transaction(), synchronous_commit()))
        return write_raw(*args, **kwargs)

    monkeypatch.setattr(fast_rows, "insert_rows", frames_inserted)  # through `IN_PROCESS`
    monkeypatch.setattr(store, "write_raw", raw_written)
    return seen


def steps_and_last(count: int) -> list[tuple[str, bool, str]]:
    """`count` batches of frames, each in a transaction that does not wait for the
    disk, then the close's last transaction, which does (on PostgreSQL)."""
    if connection.vendor != "postgresql":
        return [*[("frames", True, "-")] * count, ("close", True, "-")]
    return [*[("frames", True, "off")] * count, ("close", True, "on")]


def test_an_uploads_steps_do_not_wait_for_the_disk_and_its_last_commit_does(
    seen, settings, monkeypatch
):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 4
    monkeypatch.setattr(intake, "FEED_SLICE", len(WORD_PIECES[1]))  # about a frame at a time
    (capture,) = store_upload(WORD_STREAM, name="s.sse")
    assert capture.frame_count == 13
    # three steps of four frames, each its own transaction; the last frame, stored by
    # the finish in a transaction of its own too; the close's last transaction
    assert seen == steps_and_last(4)


def test_a_live_recordings_batches_do_not_wait_for_the_disk_and_its_close_does(seen):
    live = LiveCapture.open(stream_format="sse")
    for piece in WORD_PIECES[:4]:
        live.append_reads([(piece, 1.0)])
    live.append_reads([(b"data: [DONE]", 2.0)])  # unterminated: the close stores it
    live.close()
    assert seen == steps_and_last(5)


@postgresql_only
def test_it_holds_for_its_transaction_only():
    with transaction.atomic():
        commit_without_waiting_for_disk()
        assert synchronous_commit() == "off"
    assert synchronous_commit() == "on"


@postgresql_only
def test_nested_in_another_transaction_it_leaves_that_ones_commit_waiting():
    with transaction.atomic():
        with transaction.atomic():
            commit_without_waiting_for_disk()
        assert synchronous_commit() == "on"


@postgresql_only
def test_a_recovered_capture_is_closed_by_a_commit_that_waits(seen):
    live = LiveCapture.open(stream_format="sse")
    for piece in WORD_PIECES[:4]:
        live.append_reads([(piece, 1.0)])
    seen.clear()
    (recovered,) = recover_interrupted(force=True)
    assert recovered.pk == live.capture.pk
    assert ("close", True, "on") in seen
    assert all(setting == "on" for _, _, setting in seen)


def test_on_sqlite_it_does_nothing():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's own settings")
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        commit_without_waiting_for_disk()
    assert queries.captured_queries == []
