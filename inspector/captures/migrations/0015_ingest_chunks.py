# HTTP ingest keeps each append's bytes while its capture is live, so any process can continue it.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0014_assembly_timeline"),
    ]

    operations = [
        migrations.AddField(
            model_name="capture",
            name="http_ingest",
            field=models.BooleanField(default=False),
        ),
        migrations.CreateModel(
            name="IngestChunk",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("offset", models.BigIntegerField()),
                ("data", models.BinaryField()),
                (
                    "capture",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ingest_chunks",
                        to="captures.capture",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("capture", "offset"), name="ingest_chunk_offset_unique"
                    )
                ],
            },
        ),
    ]
