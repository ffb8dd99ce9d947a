"""An upload's steps written by a child process on SQLite
(`captures/writer_process.py`, `captures/step_writers.py`): the same rows as
written in-process, the turn to write held around each step, its errors
failing the upload with nothing left behind."""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from contextlib import contextmanager

import pytest
from capture_streams import DONE, chunk, role_chunk, sse, tool
from django.db import IntegrityError, connection, transaction

from inspector.captures import fast_rows, intake, models, step_writers, writes
from inspector.captures.commits_behind import CommitsBehind
from inspector.captures.intake import plan_upload, store_upload, upload_steps
from inspector.captures.step_writers import ByProcess, step_writer
from inspector.captures.writer_process import IN_FLIGHT, WriteFailed, WriterProcess


def parallel_calls_stream() -> bytes:
    """Two calls whose argument fragments interleave, over several steps."""
    items = [
        role_chunk(),
        chunk(tool(0, "call_a", "get_weather", "")),
        chunk(tool(1, "call_b", "get_time", "")),
    ]
    for n in range(12):
        items.append(chunk(tool(n % 2, args='{"city": "' if n < 2 else f"p{n}")))
    items += [chunk(tool(0, args='"}'), tool(1, args='"}')), chunk(finish="tool_calls"), DONE]
    return sse(*items)


STREAM = parallel_calls_stream()


@contextmanager
def no_turn():
    yield


# The child process, on its own (a database file of its own: any database leg).


@pytest.fixture
def database_file(tmp_path):
    path = str(tmp_path / "steps.sqlite3")
    with sqlite3.connect(path) as database:
        database.execute("CREATE TABLE item (n INTEGER PRIMARY KEY, word TEXT NOT NULL)")
    return path


def items(path):
    with sqlite3.connect(path) as database:
        return database.execute("SELECT n, word FROM item ORDER BY n").fetchall()


INSERT = "INSERT INTO item (n, word) VALUES (?, ?)"


def test_the_child_writes_each_step_and_settle_waits_for_them(database_file):
    process = WriterProcess(database_file, no_turn)
    process.send([(INSERT, [(1, "one"), (2, "two")])])
    process.send([(INSERT, [(3, "three")]), ("UPDATE item SET word = ? WHERE n = ?", [("uno", 1)])])
    process.settle()
    assert items(database_file) == [(1, "uno"), (2, "two"), (3, "three")]
    process.close()
    assert process._child.returncode == 0


def test_a_failed_step_is_rolled_back_raised_and_the_steps_after_it_dropped(database_file):
    process = WriterProcess(database_file, no_turn)
    process.send([(INSERT, [(1, "one")])])
    process.send([(INSERT, [(2, "two")]), (INSERT, [(1, "again")])])  # fails on its second
    process.send([(INSERT, [(3, "three")])])
    with pytest.raises(WriteFailed) as failed:
        process.settle()
    assert failed.value.kind == "IntegrityError"
    assert "UNIQUE" in failed.value.message
    with pytest.raises(WriteFailed):
        process.send([(INSERT, [(4, "four")])])
    process.close(settle=False)
    assert items(database_file) == [(1, "one")]


def test_the_turn_to_write_is_held_from_a_steps_sending_to_its_answer(database_file):
    seen = []

    @contextmanager
    def turn():
        seen.append(("taken", len(items(database_file))))
        yield
        seen.append(("given back", len(items(database_file))))

    process = WriterProcess(database_file, turn)
    process.send([(INSERT, [(1, "one")])])
    process.send([(INSERT, [(2, "two"), (3, "three")])])
    process.close()
    assert seen == [("taken", 0), ("given back", 1), ("taken", 1), ("given back", 3)]


@pytest.fixture
def held_turn():
    """A turn to write held until the test releases it: (the lock, the turn)."""
    held = threading.Lock()
    held.acquire()

    @contextmanager
    def turn():
        with held:
            yield

    return held, turn


def test_no_more_than_in_flight_steps_wait_for_the_child(database_file, held_turn, monkeypatch):
    monkeypatch.setattr("inspector.captures.writer_process.IN_FLIGHT", 1)
    held, turn = held_turn  # the courier waits for its turn until released
    process = WriterProcess(database_file, turn)
    process.send([(INSERT, [(1, "one")])])  # the courier's, waiting for its turn
    process.send([(INSERT, [(2, "two")])])  # waits in the queue
    third = threading.Thread(target=process.send, args=([(INSERT, [(3, "three")])],))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # the third waits for room
    held.release()
    third.join(5)
    assert not third.is_alive()
    process.close()
    assert items(database_file) == [(1, "one"), (2, "two"), (3, "three")]


def until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_giving_up_writes_the_step_in_hand_and_drops_those_waiting(database_file, held_turn):
    held, turn = held_turn
    process = WriterProcess(database_file, turn)
    process.send([(INSERT, [(1, "one")])])  # the courier's, waiting for its turn
    process.send([(INSERT, [(2, "two")])])  # waits in the queue
    until(lambda: len(process._steps.queue) == 1)  # the courier took the first
    closing = threading.Thread(target=process.close, kwargs={"settle": False}, daemon=True)
    closing.start()
    try:
        until(lambda: list(process._steps.queue) == [None])  # the second dropped, the courier told
    finally:
        held.release()
    closing.join(5)
    assert not closing.is_alive()
    assert items(database_file) == [(1, "one")]
    assert process._child.returncode == 0


def test_a_lost_child_fails_the_next_step(database_file):
    process = WriterProcess(database_file, no_turn)
    process._child.kill()
    process._child.wait()
    process.send([(INSERT, [(1, "one")])])
    with pytest.raises(WriteFailed) as failed:
        process.settle()
    assert failed.value.kind == "ProcessLost"
    process.close(settle=False)


# Uploads through it: SQLite only, outside any transaction (another connection writes).

sqlite_only = pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite's writer process")


@pytest.fixture
def small_steps(settings, monkeypatch):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 3
    monkeypatch.setattr(intake, "FEED_SLICE", 64)


@pytest.fixture
def processes(monkeypatch):
    """The step writers chosen, by kind."""
    chosen = []
    real = step_writers.step_writer

    def watched(size):
        steps = real(size)
        chosen.append(type(steps).__name__)
        return steps

    monkeypatch.setattr(intake, "step_writer", watched)
    return chosen


def stored(capture):
    """Every row an upload writes for `capture`, but its key and time."""
    capture.refresh_from_db()
    frames = capture.frames.order_by("number").values_list(
        "number", "kind", "raw", "arrived_ms", "calls", "marks", "did", "has_text"
    )
    fragments = models.Fragment.objects.filter(capture=capture).order_by("position", "seq")
    calls = models.Call.objects.filter(assembly__capture=capture).order_by("assembly", "position")
    return {
        "capture": (capture.frame_count, capture.outcome, capture.dialect, capture.dialect_basis),
        "frames": list(frames),
        "fragments": list(fragments.values_list("position", "seq", "frame", "text", "depth")),
        "calls": list(calls.values_list("name", "call_id", "arguments", "fragment_count")),
    }


@pytest.mark.django_db(transaction=True)
@sqlite_only
@pytest.mark.usefixtures("small_steps")
def test_an_upload_by_the_writer_process_stores_what_one_in_process_does(settings, processes):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = -1
    (in_process,) = store_upload(STREAM, name="s.sse")
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0
    (by_process,) = store_upload(STREAM, name="s.sse")
    assert processes == ["CommitsBehind", "ByProcess"]
    expected = stored(in_process)
    assert expected["capture"] == (18, "ok", "chat", "frames")
    assert len(expected["fragments"]) == 14
    assert stored(by_process) == expected


@pytest.mark.django_db(transaction=True)
@sqlite_only
@pytest.mark.usefixtures("small_steps")
def test_the_steps_rows_go_to_the_process_not_this_connection(settings, monkeypatch):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0
    sent = []
    real = WriterProcess.send

    def watched(self, statements):
        sent.append(statements)
        return real(self, statements)

    monkeypatch.setattr(WriterProcess, "send", watched)
    here = []  # the frames this process's connection inserted
    insert_rows = fast_rows.insert_rows

    def inserted_here(model, fields, rows, **kwargs):
        rows = list(rows)
        if model is models.Frame:
            here.extend(row[1] for row in rows)
        return insert_rows(model, fields, rows, **kwargs)

    monkeypatch.setattr(fast_rows, "insert_rows", inserted_here)
    (capture,) = store_upload(STREAM, name="s.sse")
    steps = [[(sql.split(" (")[0], rows) for sql, rows in step] for step in sent if step]
    assert all(step[0][0] == 'INSERT INTO "captures_frame"' for step in steps)
    numbers = [row[1] for step in steps for row in step[0][1]]
    assert numbers == list(range(len(numbers)))  # every step's frames, in order
    assert len(numbers) >= 15  # all but those the end completed, written by the finish here:
    assert here == list(range(len(numbers), 18))
    assert capture.frames.count() == 18
    fragments = [
        row for step in steps for sql, rows in step[1:] for row in rows if "fragment" in sql
    ]
    assert len(fragments) >= 10  # the started calls', step by step
    assert steps[0][-1][0].startswith('UPDATE "captures_capture" SET "dialect"')


@pytest.mark.django_db(transaction=True)
@sqlite_only
@pytest.mark.usefixtures("small_steps")
def test_a_step_the_process_fails_fails_the_upload_and_leaves_nothing(settings):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TRIGGER disk_on_fire BEFORE INSERT ON captures_frame WHEN NEW.number = 7 "
            "BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        )
    try:
        with pytest.raises(IntegrityError, match="disk on fire"):
            store_upload(STREAM, name="s.sse")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER disk_on_fire")
    assert not models.Capture.objects.exists()
    assert not models.Frame.objects.exists()
    assert not models.Fragment.objects.exists()


@pytest.mark.django_db(transaction=True)
@sqlite_only
@pytest.mark.usefixtures("small_steps")
def test_an_upload_given_up_between_steps_stops_its_process(settings, monkeypatch):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0
    started = []
    real = WriterProcess.__init__

    def watched(self, *args, **kwargs):
        real(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(WriterProcess, "__init__", watched)
    kept = []
    steps = upload_steps(plan_upload(STREAM, name="s.sse"), kept)
    for _ in range(4):  # the capture opened, then three steps handed over
        next(steps)
    steps.close()
    intake.discard(kept)
    (process,) = started
    assert process._child.returncode == 0  # stopped, after the step in hand
    assert not models.Capture.objects.exists()
    assert not models.Frame.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_small_uploads_and_other_databases_are_written_in_process(settings):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = len(STREAM) + 1
    assert type(step_writer(len(STREAM))) is CommitsBehind
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0
    expected = ByProcess if connection.vendor == "sqlite" else CommitsBehind
    steps = step_writer(len(STREAM))
    assert type(steps) is expected
    steps.finish()
    with transaction.atomic():  # another connection would not see this transaction's rows
        assert type(step_writer(len(STREAM))) is CommitsBehind


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_child_is_given_no_secret_of_the_servers_environment(database_file, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://inspector:hunter2@db/inspector")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hunter2")
    process = WriterProcess(database_file, no_turn)
    try:
        with open(f"/proc/{process._child.pid}/environ", "rb") as environ:
            names = {entry.split(b"=")[0] for entry in environ.read().split(b"\0") if entry}
    finally:
        process.close()
    assert names <= {b"PATH", b"LD_LIBRARY_PATH", b"TMPDIR", b"SQLITE_TMPDIR"}


@pytest.mark.django_db(transaction=True)
@sqlite_only
def test_a_process_that_cannot_start_leaves_the_upload_to_this_one(settings, monkeypatch):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0

    def no_process(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(step_writers, "WriterProcess", no_process)
    assert type(step_writer(len(STREAM))) is CommitsBehind
    (capture,) = store_upload(STREAM, name="s.sse")
    assert capture.frames.count() == 18


def test_a_child_that_cannot_open_its_database_does_not_start(tmp_path):
    with pytest.raises(OSError, match="unable to open database file"):
        WriterProcess(str(tmp_path / "no such folder" / "db.sqlite3"), no_turn)


def test_a_step_that_cannot_be_sent_fails_and_the_courier_goes_on(database_file):
    process = WriterProcess(database_file, no_turn)
    process.send([(INSERT, [(1, object())])])  # not a plain value
    with pytest.raises(WriteFailed) as failed:
        process.settle()
    assert failed.value.kind == "Unsendable"
    process.close(settle=False)  # the courier took the stop as it took the step
    assert process._child.returncode == 0
    assert items(database_file) == []


@pytest.mark.django_db(transaction=True)
@sqlite_only
def test_a_thread_holding_the_turn_to_write_writes_its_upload_itself(settings):
    settings.INSPECTOR_UPLOAD_WRITER_PROCESS_BYTES = 0
    with writes.writing():  # the child's steps would wait for this thread, which waits for them
        assert type(step_writer(len(STREAM))) is CommitsBehind
    steps = step_writer(len(STREAM))
    assert type(steps) is ByProcess
    steps.finish()


def test_an_error_in_the_courier_fails_the_step_and_it_goes_on_taking_steps(database_file):
    @contextmanager
    def broken_turn():
        raise RuntimeError("the lock is broken")
        yield

    process = WriterProcess(database_file, broken_turn)

    def send_more_than_fit():  # a dead courier would leave the later ones waiting
        for n in range(IN_FLIGHT + 4):
            try:
                process.send([(INSERT, [(n, "n")])])
            except WriteFailed:  # told of the failure, when it came before the send
                continue

    sending = threading.Thread(target=send_more_than_fit, daemon=True)
    sending.start()
    sending.join(5)
    assert not sending.is_alive()  # no send waited for a courier gone
    with pytest.raises(WriteFailed) as failed:
        process.settle()
    assert failed.value.kind == "ProcessLost"
    assert "the lock is broken" in failed.value.message
    process.close(settle=False)
    assert items(database_file) == []
