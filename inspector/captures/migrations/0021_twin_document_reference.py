"""`Assembly.result_json` may be NULL: a lenient twin's, whose document is
strict's under its own policy's name (`twin_rows.copy_twin`, read with
`Assembly.document()`).  Writing the renamed copy took 8-13 ms of a
25,000-frame live capture's close and doubled the documents' storage.
Twins stored before keep their copies.  Back: every NULL document is
written out as the renamed copy again, then the column is NOT NULL.

On SQLite the table is rebuilt with its columns in the model's order, so
`result_json` stays the last one (`blob_io.py`)."""

import json

from django.db import migrations

import inspector.captures.models


def _head(policy: str) -> str:
    return json.dumps({"policy": policy}, separators=(",", ":"))[:-1]


def write_twin_documents(apps, schema_editor) -> None:
    Assembly = apps.get_model("captures", "Assembly")
    strict_head = _head("strict")
    for twin in Assembly.objects.filter(result_json__isnull=True).only("capture_id", "policy"):
        strict = Assembly.objects.filter(capture_id=twin.capture_id, policy="strict")
        text = strict.values_list("result_json", flat=True).get()
        if isinstance(text, (bytes, memoryview)):  # SQLite's BLOB (blob_io.py)
            text = bytes(text).decode("utf-8")
        Assembly.objects.filter(pk=twin.pk).update(
            result_json=_head(twin.policy) + text[len(strict_head) :]
        )


class Migration(migrations.Migration):
    dependencies = [("captures", "0020_call_twin_copy")]

    # Back, the documents are written before the column is NOT NULL again.
    operations = [
        migrations.AlterField(
            model_name="assembly",
            name="result_json",
            field=inspector.captures.models.JsonText(null=True),
        ),
        migrations.RunPython(migrations.RunPython.noop, write_twin_documents),
    ]
