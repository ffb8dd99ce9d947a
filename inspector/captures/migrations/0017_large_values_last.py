# Capture.raw and Assembly.result_json move to the end of their tables.
# SQLite leaves a zeroblob unwritten only when no column after it holds data
# (`blob_io.py`); in the middle of a row, the UPDATE that sizes the value
# builds the whole row with its zeros in memory (12 MB for an 8 MB upload).
# Each column is added anew (at the end), filled from the old one, and takes
# the old one's name.  (On SQLite a table rebuilt by Django puts the
# self-referential `derived_from_id` last again: it is null but for a
# minimized capture's row, and a null holds no data.)

from django.db import migrations, models

import inspector.captures.models


def _moved_last(model: str, table: str, name: str, field: models.Field) -> list:
    tail = f"{name}_tail"
    return [
        # A default, so that going back can add the old column to full rows.
        migrations.AlterField(model_name=model, name=name, field=field),
        migrations.AddField(model_name=model, name=tail, field=field, preserve_default=False),
        migrations.RunSQL(
            f'UPDATE "{table}" SET "{tail}" = "{name}"',
            reverse_sql=f'UPDATE "{table}" SET "{name}" = "{tail}"',
        ),
        migrations.RemoveField(model_name=model, name=name),
        migrations.RenameField(model_name=model, old_name=tail, new_name=name),
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0016_frame_did"),
    ]

    operations = [
        *_moved_last("capture", "captures_capture", "raw", models.BinaryField(default=b"")),
        *_moved_last(
            "assembly",
            "captures_assembly",
            "result_json",
            inspector.captures.models.JsonText(default=""),
        ),
    ]
