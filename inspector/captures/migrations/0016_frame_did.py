# The frames table's parsed rows: what each frame did (`frame_did.py`).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0015_ingest_chunks"),
    ]

    operations = [
        migrations.AddField(
            model_name="frame",
            name="did",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="frame",
            name="has_text",
            field=models.BooleanField(default=False),
        ),
        migrations.AddIndex(
            model_name="frame",
            index=models.Index(
                condition=models.Q(("has_text", True)),
                fields=["capture", "number"],
                name="frame_text",
            ),
        ),
    ]
