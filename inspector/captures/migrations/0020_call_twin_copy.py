"""`Call.twin_copy`: the calls a lenient twin copies from strict's
(`twin_rows.copy_twin`).  On PostgreSQL the search's trigram indexes on the
calls' columns (0013) leave them out: strict's row holds the same text in
the same capture.  Closing a 25,000-frame live capture, the copy of its
4 calls (60 KB of arguments each) took 24 ms, 23 of them in the index of
`arguments_text`.  Calls stored before are left as they are (indexed)."""

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import migrations, models
from django.db.models import Q
from django.db.models.functions import Upper

CALL_COLUMNS = ("name", "call_id", "arguments_text")


def _index(column: str, *, partial: bool) -> GinIndex:
    return GinIndex(
        OpClass(Upper(column), name="gin_trgm_ops"),
        name=f"search_call_{column}",
        condition=Q(twin_copy=False) if partial else None,
    )


class PartialCallIndexes(migrations.operations.base.Operation):
    """The calls' search indexes made partial (or whole again), on
    PostgreSQL only; no state change."""

    reduces_to_sql = True
    reversible = True

    def state_forwards(self, app_label, state):
        pass

    def _swap(self, app_label, schema_editor, state, *, partial: bool) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        model = state.apps.get_model(app_label, "call")
        for column in CALL_COLUMNS:
            schema_editor.remove_index(model, _index(column, partial=not partial))
            schema_editor.add_index(model, _index(column, partial=partial))

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._swap(app_label, schema_editor, to_state, partial=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._swap(app_label, schema_editor, from_state, partial=False)

    def describe(self):
        return "The calls' search indexes leave out a twin's copies (PostgreSQL only)"


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0019_lz4_large_values"),
    ]

    operations = [
        migrations.AddField(
            model_name="call",
            name="twin_copy",
            field=models.BooleanField(default=False),
        ),
        PartialCallIndexes(),
    ]
