"""A recorder's batches on PostgreSQL, on the recorder's own connection
(`writes.own_connection_step`): each statement commits by itself, in a
session whose commits do not wait for the disk, until the close, whose
last commit waits again; the frames are all there, as with a transaction
a batch."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from django.db import connection
from psycopg.pq import TransactionStatus

from inspector.captures import fast_rows, models
from inspector.captures.store import open_capture, store_stream
from inspector.live.session import LiveCapture

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's sessions"),
]

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"


def blocks() -> list[bytes]:
    data = (DEMO / "parallel_calls_ok.sse").read_bytes()
    return [block + b"\n\n" for block in data.split(b"\n\n") if block.strip()]


def synchronous_commit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.fixture
def copies(monkeypatch):
    """The transaction status of the connection as each COPY begins (and, in
    `copies.tables`, the table each COPY wrote)."""
    seen = Copies()
    copy = fast_rows._copy

    def noting(sql, rows):
        seen.append(TransactionStatus(connection.connection.info.transaction_status))
        seen.tables.append(sql.split()[1].strip('"'))
        return copy(sql, rows)

    monkeypatch.setattr(fast_rows, "_copy", noting)
    return seen


class Copies(list):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[str] = []

    def of(self, table: str) -> set[TransactionStatus]:
        return {status for status, name in zip(self, self.tables, strict=True) if name == table}


def stored_elsewhere(capture_pk: int) -> int:
    other = connection.copy()
    try:
        with other.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM captures_frame WHERE capture_id = %s", [capture_pk]
            )
            return cursor.fetchone()[0]
    finally:
        other.close()


def record(live: LiveCapture) -> list[str]:
    """Append the demo stream a block a batch; the session's synchronous_commit after each."""
    after = []
    for block in blocks():
        live.append_reads([(block, time.monotonic())])
        after.append(synchronous_commit())
    return after


def test_a_recorders_batches_commit_alone_and_its_close_waits_again(copies):
    default = synchronous_commit()  # the server's ("on" unless configured otherwise)
    live = LiveCapture(open_capture(stream_format="sse"), own_connection=True)
    settings = record(live)
    assert set(settings) == {"off"}
    assert copies and set(copies) == {TransactionStatus.IDLE}  # no BEGIN: autocommit
    # Every batch is in, as seen from another session (committed).
    assert stored_elsewhere(live.capture.pk) == len(blocks())
    live.close()
    assert synchronous_commit() == default
    capture = models.Capture.objects.get(pk=live.capture.pk)
    assert capture.outcome == "ok" and capture.frame_count == len(blocks())
    assert models.Frame.objects.filter(capture=capture).count() == len(blocks())


def test_other_live_captures_keep_a_transaction_a_batch(copies):
    default = synchronous_commit()
    live = LiveCapture(open_capture(stream_format="sse"))
    assert set(record(live)) == {default}
    assert copies and set(copies) == {TransactionStatus.INTRANS}
    live.close()
    assert models.Frame.objects.filter(capture=live.capture).count() == len(blocks())


def test_a_connection_opened_again_is_set_again(copies):
    """Django may open the thread's connection again (after an error): the
    new session has the server's default, and is set again."""
    default = synchronous_commit()
    live = LiveCapture(open_capture(stream_format="sse"), own_connection=True)
    first, *rest = blocks()
    live.append_reads([(first, time.monotonic())])
    assert synchronous_commit() == "off"
    connection.close()
    assert synchronous_commit() == default  # a new session
    for block in rest:
        live.append_reads([(block, time.monotonic())])
    assert synchronous_commit() == "off"
    live.close()
    assert synchronous_commit() == default
    assert models.Frame.objects.filter(capture=live.capture).count() == len(blocks())


def test_a_recorders_fragments_are_written_after_its_batch(monkeypatch):
    """The batch writes its frames only; the fragments due come with
    `store_fragments`, which the recorder calls once the batch's message went out."""
    from inspector.captures import writer as writer_module

    monkeypatch.setattr(writer_module, "FRAGMENT_SECONDS", 0.0)  # always due
    live = LiveCapture(open_capture(stream_format="sse"), own_connection=True)
    written = []
    for block in blocks():
        live.append_reads([(block, time.monotonic())])
        before = models.Fragment.objects.filter(capture=live.capture).count()
        assert live.fragments_due
        live.store_fragments()
        written.append((before, models.Fragment.objects.filter(capture=live.capture).count()))
    assert any(after > before for before, after in written)
    assert all(before == (written[i - 1][1] if i else 0) for i, (before, _) in enumerate(written))
    live.close()
    assert not live.fragments_due
    upload = store_stream(b"".join(blocks()), stream_format="sse", title="the same, uploaded")
    assert fragments_of(live.capture) == fragments_of(upload)


def test_fragments_that_fail_are_written_by_the_close(monkeypatch):
    """A failed `store_fragments` (the frames are stored): the close writes
    every call's fragments, as after any failed batch."""
    from inspector.captures import writer as writer_module

    monkeypatch.setattr(writer_module, "FRAGMENT_SECONDS", 0.0)
    copy = fast_rows._copy

    def failing_fragments(sql, rows):
        if "captures_fragment" in sql:
            raise RuntimeError("the fragments' COPY failed")
        return copy(sql, rows)

    live = LiveCapture(open_capture(stream_format="sse"), own_connection=True)
    first, *rest = blocks()
    live.append_reads([(first, time.monotonic())])
    live.store_fragments()
    monkeypatch.setattr(fast_rows, "_copy", failing_fragments)
    failed = 0
    for block in rest:
        live.append_reads([(block, time.monotonic())])
        try:
            live.store_fragments()
        except RuntimeError:
            failed += 1
    assert failed  # some call had new fragments, and their COPY failed
    monkeypatch.setattr(fast_rows, "_copy", copy)
    assert stored_elsewhere(live.capture.pk) == len(blocks())  # frames in, nonetheless
    live.close()
    capture = models.Capture.objects.get(pk=live.capture.pk)
    assert capture.outcome == "ok"
    upload = store_stream(b"".join(blocks()), stream_format="sse", title="the same, uploaded")
    assert fragments_of(capture) and fragments_of(capture) == fragments_of(upload)


def fragments_of(capture: models.Capture) -> list[tuple]:
    rows = models.Fragment.objects.filter(capture=capture).order_by("position", "seq")
    return list(rows.values_list("position", "seq", "frame", "offset", "text", "complete"))


async def test_the_ingest_sockets_recorder_writes_on_its_own_connection(copies, monkeypatch):
    """A real recorder (the ingest websocket's) gives its LiveCapture its own
    connection, and writes the fragments after each batch: its batches' and
    its fragments' COPYs run outside a transaction (the close's inside one)."""
    from inspector.captures import writer as writer_module
    from inspector.live.recorder import SocketRecording

    monkeypatch.setattr(writer_module, "FRAGMENT_SECONDS", 0.0)  # due after every batch
    recording = SocketRecording.open(stream_format="sse", title="own connection")
    assert await recording.ready()
    for block in blocks():  # a batch each: the next read once the last is stored
        stored = len(copies.tables)
        recording.feed(block, time.monotonic())
        for _ in range(1000):
            if len(copies.tables) > stored:
                break
            await asyncio.sleep(0.005)
    assert (await recording.finish())["outcome"] == "ok"
    assert TransactionStatus.IDLE in copies.of("captures_frame")
    assert TransactionStatus.IDLE in copies.of("captures_fragment")


def test_under_djangos_pool_a_batch_keeps_its_transaction(copies, monkeypatch):
    """A pooled connection goes to other requests: no session setting there."""
    from inspector.captures import writes

    default = synchronous_commit()
    # (Django's own pool needs psycopg_pool, not installed here: only its option is asked.)
    monkeypatch.setattr(writes, "pooled", lambda: True)
    live = LiveCapture(open_capture(stream_format="sse"), own_connection=True)
    assert set(record(live)) == {default}
    assert copies and set(copies) == {TransactionStatus.INTRANS}
    live.close()
    assert models.Frame.objects.filter(capture=live.capture).count() == len(blocks())
