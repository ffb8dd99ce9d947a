"""A lenient assembly that is strict's twin (`inspector.assembly.lenient_twin`:
strict's very result under lenient's name, which is most captures) written
by the database from strict's stored rows: its assembly row and its calls
copied with INSERT ... SELECT.

The twin keeps no result document of its own (`result_json` NULL): its
document is strict's under its name, which `Assembly.document()` reads.
Writing a renamed copy took 8-13 ms of a 25,000-frame live capture's close
(2.3 MB, compressed again on PostgreSQL) and doubled the documents' storage.

The copied calls are marked `twin_copy`: the search's trigram indexes leave
them out (strict's rows put the capture in the results already), which
spared 23 of the 24 ms of copying a 25,000-frame capture's calls.

Nothing of it passes through Python again: no second document in memory,
no second set of Call objects, and on PostgreSQL no second parse of the
calls' arguments into jsonb (the close of a 25,000-frame live capture spent
about 45 ms on PostgreSQL writing the twin's rows the first way).
"""

from __future__ import annotations

from django.db import connection

from . import models

# Columns the copy sets itself, not taken from strict's row.
_ASSEMBLY_OWN = {"id", "policy", "timeline", "result_json"}
_CALL_OWN = {"id", "assembly", "twin_copy"}


def copy_twin(strict: models.Assembly, policy: str) -> models.Assembly:
    """Store `policy`'s assembly as a copy of the stored `strict` one: the same
    columns but its name, no timeline (only strict's is drawn) and no result
    document (strict's is read under its name: `Assembly.document()`).
    Returns the new row (its id only)."""
    quote = connection.ops.quote_name
    copied = _columns(models.Assembly, _ASSEMBLY_OWN)
    table = quote(models.Assembly._meta.db_table)
    sql = (
        f"INSERT INTO {table} ({copied}, {quote('policy')}, {quote('timeline')}, "
        f"{quote('result_json')}) SELECT {copied}, %s, NULL, NULL FROM {table} "
        f"WHERE {quote('id')} = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [policy, strict.pk])
    twin = models.Assembly.objects.only("id").get(capture_id=strict.capture_id, policy=policy)
    _copy_calls(strict, twin)
    return twin


def _copy_calls(strict: models.Assembly, twin: models.Assembly) -> None:
    quote = connection.ops.quote_name
    copied = _columns(models.Call, _CALL_OWN)
    table, assembly = quote(models.Call._meta.db_table), quote("assembly_id")
    sql = (
        f"INSERT INTO {table} ({assembly}, {quote('twin_copy')}, {copied}) "
        f"SELECT %s, %s, {copied} FROM {table} "
        f"WHERE {assembly} = %s ORDER BY {quote('position')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [twin.pk, True, strict.pk])


def _columns(model: type, own: set[str]) -> str:
    """The quoted columns of `model` but those named in `own`."""
    quote = connection.ops.quote_name
    fields = model._meta.concrete_fields
    return ", ".join(quote(field.column) for field in fields if field.name not in own)
