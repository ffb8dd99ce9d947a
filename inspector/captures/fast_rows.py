"""Rows written with the database's own fast path.

`bulk_create` builds a model instance per row and an SQL expression per
value: for a 100k-fragment upload that was 60% of the time, more than the
database's own work (cProfile of `store_upload`).  Rows that are plain
values (numbers, text, booleans, null, JSON as its text) go to the driver
as tuples instead: on PostgreSQL `COPY ... FROM STDIN` through psycopg; on
SQLite `executemany` of one prepared INSERT, the fastest for a bulk write
(100k frames and 100k fragments: 1.1-1.3 s against 2.3-2.7 s as INSERTs of
1,000 rows each), or, with `one_statement`, INSERTs of many rows each:
`executemany` runs a step per row and hands the interpreter's lock over at
each, a wait the other threads of a live recording (its viewers' sockets)
pay for.  No ids come back; nothing is validated that the database does not
check itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

from django.db import connection, models

# Rows in one `executemany`, or in one INSERT (then fewer than SQLite's
# 32,766 parameters).
ROWS_PER_INSERT = 1000
SQLITE_PARAMETERS = 32_000


def insert_rows(
    model: type[models.Model],
    fields: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    one_statement: bool = False,
) -> None:
    """Insert `rows` (tuples of the values of `fields`, in that order) into
    `model`'s table, in the caller's transaction (`one_statement`: see the
    module's docstring)."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in fields)
    if connection.vendor == "postgresql":
        _copy(f"COPY {table} ({columns}) FROM STDIN", rows)
        return
    one = f"({', '.join(['?'] * len(fields))})"
    rows = iter(rows)
    database = _sqlite_connection()
    with connection.wrap_database_errors:
        if not one_statement:
            while batch := list(islice(rows, ROWS_PER_INSERT)):
                database.executemany(f"INSERT INTO {table} ({columns}) VALUES {one}", batch)
            return
        per_insert = min(ROWS_PER_INSERT, SQLITE_PARAMETERS // len(fields))
        while batch := list(islice(rows, per_insert)):
            values = [value for row in batch for value in row]
            sql = f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(batch))}"
            database.execute(sql, values)


def _sqlite_connection() -> Any:
    """The sqlite3 connection under Django's, in the caller's transaction.
    Its statements are written with SQLite's own `?` placeholders: Django's
    cursor rewrites every `%s` of a statement with a regular expression, about
    4% of a live recording's CPU for its many-row INSERTs (py-spy, 5,000
    frames/s); errors still come out as Django's (`wrap_database_errors`)."""
    connection.ensure_connection()
    return connection.connection


def _copy(sql: str, rows: Iterable[Sequence[Any]]) -> None:
    """COPY through psycopg's own cursor; its errors come out as Django's
    (a refused row is an `IntegrityError` like any other)."""
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)


__all__ = ["insert_rows"]
