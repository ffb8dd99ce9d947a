# A fragment is keyed by its capture and its call's position in the strict
# result instead of its Call row: a live recording writes a started call's
# fragments as they arrive, before the close writes the Call rows.

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def _by_capture(apps, schema_editor) -> None:
    Fragment = apps.get_model("captures", "Fragment")
    Call = apps.get_model("captures", "Call")
    call = Call.objects.filter(pk=OuterRef("call_id"))
    Fragment.objects.update(
        capture_id=Subquery(call.values("assembly__capture_id")[:1]),
        position=Subquery(call.values("position")[:1]),
    )


def _by_call(apps, schema_editor) -> None:
    Fragment = apps.get_model("captures", "Fragment")
    Call = apps.get_model("captures", "Call")
    call = Call.objects.filter(
        assembly__capture_id=OuterRef("capture_id"),
        assembly__policy="strict",
        position=OuterRef("position"),
    )
    Fragment.objects.update(call_id=Subquery(call.values("pk")[:1]))


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0017_large_values_last"),
    ]

    operations = [
        migrations.AddField(
            model_name="fragment",
            name="capture",
            field=models.ForeignKey(
                null=True,
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="fragments",
                to="captures.capture",
            ),
        ),
        migrations.AddField(
            model_name="fragment", name="position", field=models.IntegerField(null=True)
        ),
        migrations.AlterField(
            model_name="fragment",
            name="call",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="fragments",
                to="captures.call",
            ),
        ),
        migrations.RunPython(_by_capture, _by_call),
        migrations.RemoveConstraint(model_name="fragment", name="fragment_seq_unique"),
        migrations.RemoveIndex(model_name="fragment", name="fragment_call_frame"),
        migrations.RemoveField(model_name="fragment", name="call"),
        migrations.AlterField(
            model_name="fragment",
            name="capture",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="fragments",
                to="captures.capture",
            ),
        ),
        migrations.AlterField(
            model_name="fragment", name="position", field=models.IntegerField()
        ),
        migrations.AlterModelOptions(name="fragment", options={"ordering": ["position", "seq"]}),
        migrations.AddConstraint(
            model_name="fragment",
            constraint=models.UniqueConstraint(
                fields=("capture", "position", "seq"), name="fragment_position_seq_unique"
            ),
        ),
        migrations.AddIndex(
            model_name="fragment",
            index=models.Index(
                fields=["capture", "position", "frame"], name="fragment_position_frame"
            ),
        ),
    ]
