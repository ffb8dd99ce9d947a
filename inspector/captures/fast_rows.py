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
    table, columns = _table_and_columns(model, fields)
    if connection.vendor == "postgresql":
        _copy(f"COPY {table} ({columns}) FROM STDIN", rows)
        return
    one = f"({', '.join(['?'] * len(fields))})"
    rows = iter(rows)
    database = _sqlite_connection()
    with connection.wrap_database_errors:
        if not one_statement:
            sql = f"INSERT INTO {table} ({columns}) VALUES {one}"
            while batch := list(islice(rows, ROWS_PER_INSERT)):
                database.executemany(sql, batch)
            return
        per_insert = min(ROWS_PER_INSERT, SQLITE_PARAMETERS // len(fields))
        while batch := list(islice(rows, per_insert)):
            values = [value for row in batch for value in row]
            sql = f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(batch))}"
            database.execute(sql, values)


def sqlite_insert(model: type[models.Model], fields: Sequence[str]) -> str:
    """SQLite's INSERT of one row of `fields` into `model`'s table, with `?`
    placeholders (for `executemany`)."""
    table, columns = _table_and_columns(model, fields)
    return f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['?'] * len(fields))})"


def sqlite_update(model: type[models.Model], fields: Sequence[str]) -> str:
    """SQLite's UPDATE of `fields` of the row of `model` whose key is the last `?`."""
    quote = connection.ops.quote_name
    meta = model._meta
    assignments = ", ".join(f"{quote(meta.get_field(name).column)} = ?" for name in fields)
    return f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = ?"


def _table_and_columns(model: type[models.Model], fields: Sequence[str]) -> tuple[str, str]:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in fields)
    return quote(model._meta.db_table), columns


class RowSink:
    """Where a step of a write sends its rows: written at once by this
    thread's connection, in its transaction (`IN_PROCESS`); a subclass
    collects them as statements a writer process runs instead
    (`step_writers.Statements`), and says so with `behind` (its rows are
    written while this process goes on)."""

    behind = False

    def insert(
        self,
        model: type[models.Model],
        fields: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        one_statement: bool = False,
    ) -> None:
        insert_rows(model, fields, rows, one_statement=one_statement)

    def update(self, model: type[models.Model], pk: Any, **values: Any) -> None:
        model._default_manager.filter(pk=pk).update(**values)


IN_PROCESS = RowSink()


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


__all__ = ["IN_PROCESS", "RowSink", "insert_rows", "sqlite_insert", "sqlite_update"]
