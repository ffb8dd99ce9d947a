"""Large values are written without copies (`captures/blob_io.py`): on SQLite
through incremental blob I/O into the last column of their table, a spilled
result straight from its file; read back, they are what was written."""

from __future__ import annotations

import tempfile

import orjson
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from migrations_helper import migrate_to, migrate_to_latest

from inspector.assembly import POLICIES, read_stream
from inspector.assembly.jsontext import dumps
from inspector.captures import models
from inspector.captures.intake import store_upload

BEFORE = ("captures", "0016_frame_did")
AFTER = ("captures", "0017_large_values_last")


def _chat(delta: dict, finish: str | None = None) -> bytes:
    chunk = {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


STREAM = b"".join(_chat({"content": f"w{n} é "}) for n in range(400)) + _chat({}, "stop")


def _columns(table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(f'PRAGMA table_info("{table}")')
        return [row[1] for row in cursor.fetchall()]


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "sqlite", reason="column order matters on SQLite only")
def test_the_large_values_end_their_tables():
    """SQLite leaves a zeroblob unwritten only when no column after it holds
    data: a column added after these puts the whole value back in memory once
    per write.  Move the column last again as migration 0017 does.  (A table
    Django rebuilds on SQLite ends with the self-referential foreign key,
    null but in a minimized capture's row.)"""
    capture = _columns("captures_capture")
    assert capture[capture.index("raw") + 1 :] in ([], ["derived_from_id"])
    assert _columns("captures_assembly")[-1] == "result_json"


@pytest.mark.django_db
def test_a_spilled_result_reads_back_as_the_assemblers_document(settings):
    settings.INSPECTOR_UPLOAD_BATCH_FRAMES = 50
    (capture,) = store_upload(STREAM, name="stream.sse")
    _, results = read_stream(STREAM, "sse", POLICIES)
    for policy, result in results.items():
        assembly = models.Assembly.objects.get(capture=capture, policy=policy)
        assert type(assembly.document()) is str
        assert assembly.document() == dumps(result.to_dict()).decode()
    assert bytes(models.Capture.objects.get(pk=capture.pk).raw) == STREAM
    if connection.vendor == "sqlite":  # the blob path was the one taken
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT typeof(result_json) FROM captures_assembly"
                " WHERE capture_id = %s AND result_json IS NOT NULL",
                [capture.pk],
            )
            assert {row[0] for row in cursor.fetchall()} == {"blob"}


def _migrate_to(target: tuple[str, str]):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    apps = executor.loader.project_state([target]).apps
    return apps.get_model("captures", "Capture"), apps.get_model("captures", "Assembly")


@pytest.mark.django_db(transaction=True)
def test_moving_the_columns_keeps_what_they_hold_both_ways():
    raw, document = b"data: {\x00}\n\n", '{"outcome":"ok","text":"\\u0000 \\\\ é"}'
    try:
        Capture, Assembly = _migrate_to(BEFORE)
        capture = Capture.objects.create(
            slug="kept", input_format="sse", stream_format="sse", outcome="ok", raw=raw
        )
        Assembly.objects.create(
            capture=capture, policy="strict", outcome="ok", result_json=document
        )
        for target in (AFTER, BEFORE, AFTER):
            Capture, Assembly = _migrate_to(target)
            assert bytes(Capture.objects.get(slug="kept").raw) == raw
            assert Assembly.objects.get(capture__slug="kept").result_json == document
    finally:  # the later migrations back, for the tests that follow
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db
def test_no_update_of_an_uploads_row_follows_its_raw_bytes():
    """On SQLite an UPDATE of any column builds the whole row in memory,
    raw bytes included: an upload given no title is named before them."""
    with CaptureQueriesContext(connection) as queries:
        (capture,) = store_upload(STREAM)  # no name, no title: one is made
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "captures_capture"')]
    last_raw = max(number for number, sql in enumerate(updates) if '"raw" =' in sql)
    assert last_raw == len(updates) - 1, updates[last_raw:]
    stored = models.Capture.objects.get(pk=capture.pk)
    assert stored.title.startswith("sse · m · ") and bytes(stored.raw) == STREAM


@pytest.mark.django_db
def test_every_byte_and_every_escape_round_trips():
    """The large-value writes of both databases (blob I/O, COPY through the
    staging table) keep what they are given, in blocks or not."""
    from inspector.captures import blob_io

    raw = bytes(range(256)) * 5000 + b"\\x00\\\\\n\r\t"  # 1.3 MB: blocks of 1 MB and a part
    document = {"t": "\\ \\\\ \n \r \t \x00 é 😀 \\u0000 " * 40000, "n": 1}
    text = dumps(document)
    capture = models.Capture.objects.create(input_format="sse", stream_format="sse", raw=b"")
    assembly = models.Assembly.objects.create(capture=capture, policy="strict", outcome="ok")
    with tempfile.TemporaryFile() as source:
        source.write(text)
        blob_io.write_raw(capture, raw)
        blob_io.write_json_text(assembly, source)
        blob_io.write_raw(capture, raw[:10])  # the staging table is emptied between values
        blob_io.write_raw(capture, b"")
        assert bytes(models.Capture.objects.get(pk=capture.pk).raw) == b""
        blob_io.write_raw(capture, raw)
    assert bytes(models.Capture.objects.get(pk=capture.pk).raw) == raw
    assert models.Assembly.objects.get(pk=assembly.pk).result_json == text.decode()
    assert orjson.loads(assembly.result_json) == document  # read on access


def _lz4_offered() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
    return bool(row and "lz4" in row[0])


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's value compression")
def test_large_values_are_kept_compressed_with_lz4_where_the_server_has_it():
    """Compressed in the staging table with lz4 (an upload of 34 MB: 0.11 s, pglz 0.26), the
    value keeps it in its row."""
    if not _lz4_offered():
        pytest.skip("this server has no lz4")
    (capture,) = store_upload(STREAM * 4, name="big.sse")
    strict = capture.assemblies.get(policy="strict")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_compression(c.raw), pg_column_compression(a.result_json)"
            " FROM captures_capture c JOIN captures_assembly a ON a.capture_id = c.id"
            " WHERE a.id = %s",
            [strict.pk],
        )
        assert cursor.fetchone() == ("lz4", "lz4")
    assert bytes(models.Capture.objects.get(pk=capture.pk).raw) == STREAM * 4


def _compression(table: str, column: str) -> str:
    """pg_attribute's attcompression: 'l' lz4, 'p' pglz, '' the server's default."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attname = %s",
            [table, column],
        )
        return cursor.fetchone()[0]


LARGE_COLUMNS = [
    ("captures_capture", "raw"),
    ("captures_assembly", "result_json"),
    ("captures_assembly", "text"),
    ("captures_call", "arguments"),
    ("captures_call", "arguments_text"),
]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's value compression")
def test_the_large_columns_compress_with_lz4_and_back():
    """Migration 0019 sets lz4 on the columns of large values; back, the server's default."""
    if not _lz4_offered():
        pytest.skip("this server has no lz4")
    assert [_compression(*column) for column in LARGE_COLUMNS] == ["l"] * len(LARGE_COLUMNS)
    try:
        migrate_to(("captures", "0018_fragments_by_capture"))
        assert [_compression(*column) for column in LARGE_COLUMNS] == [""] * len(LARGE_COLUMNS)
    finally:
        migrate_to_latest()
    assert [_compression(*column) for column in LARGE_COLUMNS] == ["l"] * len(LARGE_COLUMNS)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's staging table")
def test_a_staging_table_made_in_a_transaction_that_rolled_back_is_made_again():
    from django.db import transaction

    from inspector.captures import blob_io

    capture = models.Capture.objects.create(input_format="sse", stream_format="sse", raw=b"")
    connection.close()  # a new session: no staging table yet
    with pytest.raises(RuntimeError), transaction.atomic():
        blob_io.write_raw(capture, b"first")  # the table is made here, then rolled back
        raise RuntimeError("the transaction fails")
    blob_io.write_raw(capture, b"second")
    assert bytes(models.Capture.objects.get(pk=capture.pk).raw) == b"second"
