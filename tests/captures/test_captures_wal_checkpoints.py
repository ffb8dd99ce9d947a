"""SQLite's write-ahead log is checkpointed by a thread of its own
(`writes.WalCheckpointer`), never inside a writer's commit."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest
from django.db import connection

from inspector.captures import writes


def wait_for(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_a_log_past_its_size_is_checkpointed_by_the_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(writes, "CHECKPOINT_SECONDS", 0.01)
    path = str(tmp_path / "db.sqlite3")
    writer = sqlite3.connect(path)
    for pragma in ("journal_mode=WAL", "wal_autocheckpoint=0", "journal_size_limit=0"):
        writer.execute(f"PRAGMA {pragma}")  # as settings.py's init_command
    writer.execute("CREATE TABLE t (x BLOB)")

    def write(rows: int) -> None:
        with writer:
            writer.executemany("INSERT INTO t VALUES (?)", [(os.urandom(4096),)] * rows)

    write(400)
    small = os.path.getsize(path)
    checkpointer = writes.WalCheckpointer(path)
    time.sleep(0.1)
    assert checkpointer.checkpoints == 0  # under CHECKPOINT_BYTES: left alone
    write(1200)
    assert os.path.getsize(f"{path}-wal") > writes.CHECKPOINT_BYTES

    # Copied into the database file (what the log held past its commit, at a later look).
    assert wait_for(lambda: os.path.getsize(path) > small + writes.CHECKPOINT_BYTES)
    assert checkpointer.checkpoints >= 1
    # Once all of it was copied, the next write starts the log again, cut short.
    assert wait_for(lambda: write(1) or os.path.getsize(f"{path}-wal") < writes.CHECKPOINT_BYTES)
    done = checkpointer.checkpoints
    time.sleep(0.1)
    assert checkpointer.checkpoints == done  # a short log is left alone again
    writer.close()


@pytest.mark.django_db
def test_the_servers_connections_leave_checkpoints_to_the_thread():
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL has no write-ahead log of ours to checkpoint")
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint")
        assert cursor.fetchone() == (0,)
        cursor.execute("PRAGMA journal_size_limit")
        assert cursor.fetchone() == (0,)
    path = str(connection.settings_dict["NAME"])
    started = writes.checkpointer(path)
    assert started is not None and started is writes.checkpointer(path)  # one a process
    assert (os.getpid(), path) in writes._checkpointers
    assert writes.checkpointer(":memory:") is None


def test_while_an_upload_is_written_the_log_waits_for_its_larger_size(tmp_path, monkeypatch):
    monkeypatch.setattr(writes, "CHECKPOINT_SECONDS", 0.01)
    monkeypatch.setattr(writes, "UPLOADING_CHECKPOINT_BYTES", 4 * writes.CHECKPOINT_BYTES)
    path = str(tmp_path / "db.sqlite3")
    writer = sqlite3.connect(path)
    for pragma in ("journal_mode=WAL", "wal_autocheckpoint=0", "journal_size_limit=0"):
        writer.execute(f"PRAGMA {pragma}")
    writer.execute("CREATE TABLE t (x BLOB)")

    def write(rows: int) -> None:
        with writer:
            writer.executemany("INSERT INTO t VALUES (?)", [(os.urandom(4096),)] * rows)

    checkpointer = writes.WalCheckpointer(path)
    with writes.uploading():
        write(1200)  # past CHECKPOINT_BYTES, under the upload's size
        time.sleep(0.1)
        assert checkpointer.checkpoints == 0
        write(3600)  # past the upload's size too
        assert wait_for(lambda: checkpointer.checkpoints >= 1)
    assert writes._uploads == 0
    # The log copied and started again, short; then the usual size holds once more.
    assert wait_for(lambda: write(1) or os.path.getsize(f"{path}-wal") < writes.CHECKPOINT_BYTES)
    done = checkpointer.checkpoints
    write(1200)  # past CHECKPOINT_BYTES, under the upload's size
    assert wait_for(lambda: checkpointer.checkpoints > done)
    writer.close()
