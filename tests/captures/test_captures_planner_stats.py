"""A big upload refreshes the frames table's statistics on PostgreSQL
(`captures/planner_stats.py`), and gives up rather than wait long behind
another ANALYZE or VACUUM of the table."""

from __future__ import annotations

import time

import psycopg
import pytest
from capture_streams import DONE, chunk, sse, tool
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inspector.captures.intake import store_upload
from inspector.captures.models import Frame
from inspector.captures.planner_stats import refresh_frame_statistics

pytestmark = pytest.mark.django_db

STREAM = sse(
    chunk(tool(0, "call_A", "f", '{"a":')),
    *(chunk(tool(0, args=f"{n},")) for n in range(8)),
    chunk(tool(0, args="1}"), finish="tool_calls"),
    DONE,
)  # 11 frames


def analyzed(queries: CaptureQueriesContext) -> bool:
    return any(query["sql"].startswith("ANALYZE") for query in queries.captured_queries)


@pytest.mark.parametrize("threshold, expected", [(11, True), (12, False)])
def test_an_upload_of_enough_frames_analyzes_the_frames_table(settings, threshold, expected):
    settings.INSPECTOR_ANALYZE_AFTER_FRAMES = threshold
    with CaptureQueriesContext(connection) as queries:
        (capture,) = store_upload(STREAM, name="s.sse")
    assert capture.frame_count == 11
    assert analyzed(queries) == (expected and connection.vendor == "postgresql")


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_it_gives_up_behind_another_analyze_of_the_table(settings):
    settings.INSPECTOR_ANALYZE_AFTER_FRAMES = 1
    other = psycopg.connect(**_params())
    try:
        # What ANALYZE and VACUUM take: the test's own ANALYZE must wait for it.
        other.execute(f"LOCK TABLE {Frame._meta.db_table} IN SHARE UPDATE EXCLUSIVE MODE")
        started = time.monotonic()
        assert refresh_frame_statistics(100) is False
        assert time.monotonic() - started < 10
    finally:
        other.rollback()
        other.close()
    assert refresh_frame_statistics(100) is True


def test_nothing_is_analyzed_below_the_threshold_or_off_postgresql(settings):
    settings.INSPECTOR_ANALYZE_AFTER_FRAMES = 100
    assert refresh_frame_statistics(99) is False
    assert refresh_frame_statistics(100) == (connection.vendor == "postgresql")


def _params() -> dict:
    settings_dict = connection.settings_dict
    return {
        "dbname": settings_dict["NAME"],
        "user": settings_dict["USER"],
        "host": settings_dict["HOST"] or None,
        "port": settings_dict["PORT"] or None,
        "password": settings_dict["PASSWORD"] or None,
        "autocommit": False,
    }
