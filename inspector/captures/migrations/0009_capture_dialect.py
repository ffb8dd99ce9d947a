"""A capture records its dialect, its calls their kind and
dialect identity; every capture stored before this was read as chat
completions, the only dialect there was, and its calls are functions."""

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
        migrations.AddField(
            model_name="call",
            name="kind",
            field=models.CharField(default="function", max_length=10),
        ),
        migrations.AddField(
            model_name="call",
            name="item_id",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="call",
            name="block",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="call",
            name="argument_form",
            field=models.CharField(default="json", max_length=8),
        ),
        migrations.AddField(
            model_name="fragment",
            name="state",
            field=models.TextField(blank=True),
        ),
        migrations.RunPython(existing_are_chat, migrations.RunPython.noop),
    ]
