"""An upload's steps on PostgreSQL commit behind (`captures/commits_behind.py`):
a step's COMMIT is answered while the next step is read, its errors fail
the upload all the same, and an upload given up between two steps leaves
nothing behind and the connection usable."""

import os
import resource

import pytest
from capture_streams import WORD_PIECES, WORD_STREAM
from django.db import IntegrityError, connection, transaction
from psycopg import pq

from inspector.captures import commits_behind, intake, models, writer
from inspector.captures.commits_behind import CommitsBehind
from inspector.captures.intake import plan_upload, store_upload, upload_steps

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        "connection.vendor != 'postgresql'", reason="PostgreSQL's COMMIT, sent behind"
    ),
]


@pytest.fixture
def small_steps(settings, monkeypatch):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 4
    monkeypatch.setattr(intake, "FEED_SLICE", len(WORD_PIECES[1]))  # about a frame at a time


def test_a_steps_commit_is_answered_after_the_next_step_is_read(small_steps, monkeypatch):
    order = []
    take, send, read = (
        writer.CaptureWriter.take,
        commits_behind._send_commit,
        commits_behind._read_answer,
    )

    def taken(self, *args, **kwargs):
        frames = take(self, *args, **kwargs)
        if frames:
            order.append("read")
        return frames

    def sent(*args):
        order.append("sent")
        return send(*args)

    def answered(*args):
        order.append("answered")
        return read(*args)

    monkeypatch.setattr(writer.CaptureWriter, "take", taken)
    monkeypatch.setattr(commits_behind, "_send_commit", sent)
    monkeypatch.setattr(commits_behind, "_read_answer", answered)
    (capture,) = store_upload(WORD_STREAM, name="s.sse")
    assert capture.frame_count == 13
    assert list(capture.frames.values_list("number", flat=True)) == list(range(13))
    # three steps of four frames: each COMMIT's answer read once the next step was
    # read (the third's, when the steps end); then the finish's frame, committed by Django
    assert order == ["read", "sent", "read", "answered", "sent", "read", "answered", "sent"] + [
        "answered",
        "read",
    ]


def test_a_commit_that_fails_fails_the_upload_and_nothing_is_kept(small_steps, monkeypatch):
    stored, steps = [], 0
    append_frames = writer.append_frames

    def second_step_names_no_capture(capture, *args, **kwargs):
        nonlocal steps
        steps += 1
        if steps == 2:  # a foreign key PostgreSQL checks only at the COMMIT (deferred)
            capture = models.Capture(pk=capture.pk + 10_000)
        return append_frames(capture, *args, **kwargs)

    monkeypatch.setattr(writer, "append_frames", second_step_names_no_capture)
    monkeypatch.setattr(intake, "discard", lambda captures: stored.extend(captures))
    with pytest.raises(IntegrityError, match="captures_frame"):
        store_upload(WORD_STREAM, name="s.sse")
    assert steps == 2  # the second step's COMMIT failed: no third step was written
    assert not connection.in_atomic_block
    (capture,) = stored
    # The steps before the failed one are kept (each committed), the failed one is not:
    # `discard` deletes what is left (not called here, to look).
    assert list(capture.frames.values_list("number", flat=True)) == [0, 1, 2, 3]
    monkeypatch.undo()
    intake.discard(stored)
    assert not models.Capture.objects.exists()
    assert not models.Frame.objects.exists()


def test_between_two_steps_no_commit_is_pending_and_a_caller_may_query(small_steps):
    stored: list[models.Capture] = []
    statuses = []
    for _ in upload_steps(plan_upload(WORD_STREAM, name="s.sse"), stored):
        statuses.append(connection.connection.info.transaction_status)
        with connection.cursor() as cursor:  # libpq would refuse it with an answer pending
            cursor.execute("SELECT count(*) FROM captures_frame")
    assert set(statuses) == {pq.TransactionStatus.IDLE}
    assert len(statuses) > 3  # the capture opened, three steps, the finish
    (capture,) = stored
    assert capture.frames.count() == 13


def test_an_error_reading_the_next_step_with_a_commit_pending_keeps_nothing(
    small_steps, monkeypatch
):
    take, seen = writer.CaptureWriter.take, []

    def fails_the_second_time(self, *args, **kwargs):
        if len(seen) == 1:  # the first step's COMMIT is sent, its answer not read yet
            seen.append(connection.connection.info.transaction_status)
            raise RuntimeError("the assembler broke")
        seen.append(None)
        return take(self, *args, **kwargs)

    monkeypatch.setattr(writer.CaptureWriter, "take", fails_the_second_time)
    with pytest.raises(RuntimeError, match="the assembler broke"):
        store_upload(WORD_STREAM, name="s.sse")
    assert seen[1] == pq.TransactionStatus.ACTIVE
    assert not models.Capture.objects.exists()
    assert not models.Frame.objects.exists()


def test_an_upload_given_up_between_steps_leaves_nothing_and_the_connection_usable(
    small_steps,
):
    stored: list[models.Capture] = []
    steps = upload_steps(plan_upload(WORD_STREAM, name="s.sse"), stored)
    next(steps)  # the capture opened
    next(steps)  # the first step written and committed
    next(steps)
    intake._abandon(steps, stored)  # what an async view cancelled does
    assert not models.Capture.objects.exists()
    assert not models.Frame.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


@pytest.fixture
def many_files_open():
    """More than 1,024 descriptors open, so that the database's next socket gets a
    number past what `select()` takes (a server holding many viewers)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 1200
    if hard != resource.RLIM_INFINITY and hard < wanted + 64:
        pytest.skip(f"the hard limit of open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted + 64), hard))
    files = [os.open(os.devnull, os.O_RDONLY) for _ in range(wanted)]
    connection.close()  # the next query connects anew, past them
    try:
        yield
    finally:
        connection.close()
        for fd in files:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_answer_is_waited_for_on_a_socket_numbered_past_1024(small_steps, many_files_open):
    (capture,) = store_upload(WORD_STREAM, name="s.sse")
    assert connection.connection.pgconn.socket > 1024
    assert capture.frames.count() == 13


def test_inside_an_atomic_block_a_step_is_django_s_own_and_commits_with_it():
    behind = CommitsBehind()
    with transaction.atomic():
        with behind.step():
            models.Capture.objects.create(input_format="sse", stream_format="sse", raw=b"")
        assert not behind.pending
        assert connection.in_atomic_block
    assert models.Capture.objects.count() == 1


def test_a_step_that_fails_is_rolled_back_and_nothing_is_left_pending():
    behind = CommitsBehind()
    with pytest.raises(IntegrityError), behind.step():
        models.Frame.objects.create(capture_id=123_456, number=0, kind="chunk", raw="x")
        models.Frame.objects.create(capture_id=123_456, number=0, kind="chunk", raw="x")
    assert not behind.pending
    with behind.step():
        capture = models.Capture.objects.create(input_format="sse", stream_format="sse", raw=b"")
    assert behind.pending
    behind.settle()
    assert not behind.pending
    assert list(models.Capture.objects.values_list("pk", flat=True)) == [capture.pk]
    assert not models.Frame.objects.exists()
