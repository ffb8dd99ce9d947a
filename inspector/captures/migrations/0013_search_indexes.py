"""Trigram indexes for the capture search (`captures/search.py`), on PostgreSQL
only: pg_trgm, and a GIN index (gin_trgm_ops) on `UPPER(column)` of each
searched column, the expression Django's `icontains` compares there.  SQLite
skips all of it (its search is a plain LIKE).  The model state is unchanged:
the indexes are the database's business, so no model declares them."""

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations
from django.db.models.functions import Upper

SEARCHED = {
    "capture": ("title", "model"),
    "call": ("name", "call_id", "arguments_text"),
    "assembly": ("refusal_message",),
}


def _index(model: str, column: str) -> GinIndex:
    return GinIndex(OpClass(Upper(column), name="gin_trgm_ops"), name=f"search_{model}_{column}")


class TrigramOnPostgres(TrigramExtension):
    """pg_trgm; Django's own skips other databases going forwards only."""

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class PostgresIndexes(migrations.operations.base.Operation):
    """Add (or drop) the search indexes, on PostgreSQL only; no state change."""

    reduces_to_sql = True
    reversible = True

    def state_forwards(self, app_label, state):
        pass

    def _each(self, app_label, schema_editor, state, add: bool) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        for model_name, columns in SEARCHED.items():
            model = state.apps.get_model(app_label, model_name)
            for column in columns:
                index = _index(model_name, column)
                if add:
                    schema_editor.add_index(model, index)
                else:
                    schema_editor.remove_index(model, index)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._each(app_label, schema_editor, to_state, add=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._each(app_label, schema_editor, from_state, add=False)

    def describe(self):
        return "Trigram GIN indexes for the capture search (PostgreSQL only)"


class Migration(migrations.Migration):
    # After the merge this follows the newest captures migration (0011/0012 of
    # the branches merged alongside); it only adds indexes, so any order works.
    dependencies = [
        ("captures", "0012_lens_run_abandoned"),
    ]

    operations = [
        TrigramOnPostgres(),
        PostgresIndexes(),
    ]
