# A lens run nobody waits for any more is stopped and stored "abandoned" (lens_cache.py).
# Only the choices change: no column does.  Numbered 0012 to leave 0011 to the branch that
# renames the capture's group fields; the merge puts this one after it.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0011_capture_har_upload_retry_chain"),
    ]

    operations = [
        migrations.AlterField(
            model_name="lensrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("done", "Done"),
                    ("too_large", "Too Large"),
                    ("failed", "Failed"),
                    ("timeout", "Timeout"),
                    ("abandoned", "Abandoned"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
    ]
