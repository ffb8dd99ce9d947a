"""The frames table's statistics refreshed after a big upload, on PostgreSQL.

A capture's filtered frames panel (`?frames=call-N`) walks the capture's
`(capture, number)` index until a page of frames matched, a fraction of a
millisecond, when the planner knows how many frames the capture has.  Right
after a big upload it does not: it estimated 2,962 rows for a new capture of
100,000, then read all of them and sorted them (196 ms against 0.46 ms; see
bench/README.md).  Autovacuum analyzes a table only after a tenth of it
changed, which one capture in a large table may never reach, so a big
upload asks for it, of the columns the panels' plans turn on: the capture
(how many frames it has) and `has_text` (`?frames=text` counts through a
partial index only when the planner knows few frames carry text; with
the capture alone analyzed it read the whole capture, 131 ms).  About 150
ms against 360-480 ms for the whole table, at 100k frames.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from .models import Frame

logger = logging.getLogger(__name__)

# How long ANALYZE waits for another ANALYZE or VACUUM of the table to let go.
LOCK_TIMEOUT = "1s"
# The frame fields whose statistics are refreshed (see above).
ANALYZED = ("capture", "has_text")


def refresh_frame_statistics(frames: int) -> bool:
    """ANALYZE the frames table after `frames` new rows, when they are at
    least INSPECTOR_ANALYZE_AFTER_FRAMES, on PostgreSQL; whether it ran.
    It gives up when another ANALYZE or VACUUM holds the table past
    LOCK_TIMEOUT: the panels stay slower until autovacuum analyzes, no worse."""
    if connection.vendor != "postgresql" or frames < settings.INSPECTOR_ANALYZE_AFTER_FRAMES:
        return False
    quote = connection.ops.quote_name
    fields = (Frame._meta.get_field(name) for name in ANALYZED)
    columns = ", ".join(quote(field.column) for field in fields)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute(f"ANALYZE {quote(Frame._meta.db_table)} ({columns})")
    except DatabaseError as error:
        logger.warning("the frames table's statistics were not refreshed: %s", error)
        return False
    return True
