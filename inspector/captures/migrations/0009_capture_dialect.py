"""A capture records its dialect (dialects.md); every capture stored before
this was read as chat completions, the only dialect there was."""

from django.db import migrations, models


def existing_are_chat(apps, schema_editor):
    Capture = apps.get_model("captures", "Capture")
    Capture.objects.all().update(dialect="chat")


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0008_wider_formats"),
    ]

    operations = [
        migrations.AddField(
            model_name="capture",
            name="dialect",
            field=models.CharField(db_index=True, default="chat", max_length=16),
        ),
        migrations.AddField(
            model_name="capture",
            name="dialect_basis",
            field=models.CharField(blank=True, max_length=16),
        ),
        migrations.RunPython(existing_are_chat, migrations.RunPython.noop),
    ]
