"""Writing a row's large values (`Capture.raw`, `Assembly.result_json`)
without holding copies of them.

Binding a value copies it on SQLite (Python's driver asks for a private
copy), and the row is then built in memory from that copy: storing a 20 MB
upload took two more 20 MB buffers, and the cached statement kept the first
until it ran again.  On SQLite the column is set to a zeroblob of the right
size and filled through incremental blob I/O, a block at a time, from bytes
or from a file.  SQLite leaves a zeroblob unwritten only when it is the row's
last column (anywhere else the UPDATE builds the whole row, zeros included),
which is why both columns end their tables (migration 0017; a test holds it).

On PostgreSQL, Django's driver binds on the client: a value becomes a quoted
literal inside the query's text (bytes as hex, twice their size), built in
several copies: writing an 8 MB upload's bytes took 60 MB.  Sent as one
parameter instead, it still sat whole in libpq's output buffer, which keeps
its largest size for the connection's life.  So the value is streamed: a
block at a time through COPY into a temporary table of the session, then
moved into the row by one UPDATE, in the caller's transaction.  The COPY is
in its binary format (one row, one field: its length, then its bytes as
they are), not its text format, which sent bytes as hex and needed text
escaped: a 34 MB upload's bytes were written in 0.57-0.63 s that way, in
0.28-0.31 s this way.  The staging table's columns compress with lz4 where
the server has it (PostgreSQL 14 and later, built with it), and the UPDATE
keeps the value as compressed there: the same bytes in 0.11 s, against
0.26 s with the default pglz, and a little smaller.
"""

from __future__ import annotations

import os
import struct
from typing import IO

from django.db import connection, models

from . import models as stored

BLOCK = 1024 * 1024


def write_raw(capture: stored.Capture, data: bytes) -> None:
    """Store `data` as the saved capture's raw bytes (in the caller's
    transaction); `capture.raw` is `data` afterwards."""
    view = memoryview(data)
    blocks = (view[start : start + BLOCK] for start in range(0, len(data), BLOCK))
    if connection.vendor == "postgresql":
        _copy_in(stored.Capture, "raw", capture.pk, len(data), blocks, text=False)
    elif not data:
        stored.Capture.objects.filter(pk=capture.pk).update(raw=data)
    else:
        _fill(stored.Capture, "raw", capture.pk, len(data), blocks)
    capture.raw = data


def write_json_text(assembly: stored.Assembly, source: IO[bytes]) -> None:
    """Store the UTF-8 JSON text in the file `source` (read from its start)
    as the saved assembly's `result_json`, in the caller's transaction.  The
    instance's value is left unloaded (read on access)."""
    size = os.fstat(source.fileno()).st_size
    source.seek(0)
    blocks = iter(lambda: source.read(BLOCK), b"")
    if connection.vendor == "postgresql":
        _copy_in(stored.Assembly, "result_json", assembly.pk, size, blocks, text=True)
    else:
        _fill(stored.Assembly, "result_json", assembly.pk, size, blocks)
    assembly.__dict__.pop("result_json", None)  # deferred: a query when read


# The session's staging table: one row at a time, emptied after each value.
_STAGE = "inspector_large_value"


def _copy_in(
    model: type[models.Model], column: str, pk: int, size: int, blocks, *, text: bool
) -> None:
    """PostgreSQL: the row's `column` set to the value of `size` bytes whose
    blocks are given (UTF-8 when `text`), COPY'd into the staging table first."""
    quote = connection.ops.quote_name
    field = "t" if text else "b"
    with connection.cursor() as cursor:
        _make_stage(cursor)
        with cursor.cursor.copy(f"COPY {_STAGE} ({field}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(_BINARY_HEADER + _ONE_FIELD.pack(1, size))
            for block in blocks:
                copy.write(block)
            copy.write(_BINARY_TRAILER)
        table, target = quote(model._meta.db_table), quote(column)
        cursor.execute(
            f"UPDATE {table} SET {target} = (SELECT {field} FROM {_STAGE}) WHERE id = %s", [pk]
        )
        cursor.execute(f"DELETE FROM {_STAGE}")


def _make_stage(cursor) -> None:
    """The session's staging table, made where it is missing (its first use in
    this session, or a transaction that made it rolled back): one query a
    value, and the server asked about lz4 only then."""
    cursor.execute("SELECT to_regclass(%s) IS NULL", [f"pg_temp.{_STAGE}"])
    if not cursor.fetchone()[0]:
        return
    cursor.execute(_LZ4_OFFERED)
    (lz4,) = cursor.fetchone() or (False,)
    compression = " COMPRESSION lz4" if lz4 else ""
    cursor.execute(f"CREATE TEMPORARY TABLE {_STAGE} (b bytea{compression}, t text{compression})")


# Whether the server can compress with lz4 (no row before PostgreSQL 14).
_LZ4_OFFERED = (
    "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
)

# COPY's binary format: its signature, flags and header extension length (no
# extension); a row's field count and its one field's length; the end mark.
_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
_ONE_FIELD = struct.Struct("!hi")
_BINARY_TRAILER = struct.pack("!h", -1)


def _fill(model: type[models.Model], column: str, pk: int, size: int, blocks) -> None:
    """SQLite: the row's `column` (its table's last) sized with a zeroblob,
    then written block by block."""
    connection.ensure_connection()
    table = model._meta.db_table
    sql = f'UPDATE "{table}" SET "{column}" = zeroblob(%s) WHERE "id" = %s'
    with connection.cursor() as cursor:
        cursor.execute(sql, [size, pk])
    offset = 0
    with connection.connection.blobopen(table, column, pk) as blob:
        for block in blocks:
            blob.write(block)
            offset += len(block)
    if offset != size:
        raise ValueError(f"{column}: wrote {offset} bytes of {size}")


__all__ = ["write_json_text", "write_raw"]
