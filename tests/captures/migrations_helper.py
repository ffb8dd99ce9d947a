"""Moving the test database's schema to a migration and back, for the tests
of a migration's data."""

from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate_to(target: tuple[str, str]) -> Apps:
    """The schema at `target`; the models as of then."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor.loader.project_state([target]).apps


def migrate_to_latest() -> None:
    """Every migration applied again, for the tests that follow."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
