"""Writing a capture's raw bytes (`Capture.raw`) without copies of them.

Binding a value copies it on SQLite (Python's driver asks for a private
copy), and the row is then built in memory from that copy: storing a 20 MB
upload took two more 20 MB buffers, and the cached statement kept the first
until it ran again.  On SQLite the column is set to a zeroblob of the right
size and filled through incremental blob I/O, a block at a time; other
databases get an UPDATE.
"""

from __future__ import annotations

from django.db import connection

from . import models

BLOCK = 1024 * 1024


def write_raw(capture: models.Capture, data: bytes) -> None:
    """Store `data` as the saved capture's raw bytes (in the caller's
    transaction); `capture.raw` is `data` afterwards."""
    rows = models.Capture.objects.filter(pk=capture.pk)
    if connection.vendor != "sqlite" or not data:
        rows.update(raw=data)
    else:
        connection.ensure_connection()
        table = models.Capture._meta.db_table
        sql = f'UPDATE "{table}" SET "raw" = zeroblob(%s) WHERE "id" = %s'
        with connection.cursor() as cursor:
            cursor.execute(sql, [len(data), capture.pk])
        view = memoryview(data)
        with connection.connection.blobopen(table, "raw", capture.pk) as blob:
            for start in range(0, len(data), BLOCK):
                blob.write(view[start : start + BLOCK])
    capture.raw = data


__all__ = ["write_raw"]
