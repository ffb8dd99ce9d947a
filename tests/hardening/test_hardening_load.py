"""Load on loopback, bounded: 50 concurrent uploads (distinct streams of 50-500 frames) and
10 proxied streams (300 frames, 2 ms apart) at once against one daphne process lose no
frame, leave no capture live or half-stored, and the server's memory stays bounded.

Bigger numbers: bench/load.py (same workload and checks)."""

from __future__ import annotations

import time

import httpx
import pytest
from hardening_load import rss_kb, run, upload_set, verify, write_scenario

from inspector.live.fake_upstream import FakeUpstream

UPLOADS = 50
STREAMS = 10
FRAMES = 300
PACE_MS = 2
# The server's resident memory may grow by this much over the run (it grew by 25-60 MB).
RSS_GROWTH_LIMIT_MB = 300


def test_concurrent_uploads_and_proxied_streams_lose_nothing(
    daphne_process, transactional_db, tmp_path
):
    started = time.monotonic()
    scenario = write_scenario(tmp_path / "scenarios", FRAMES, PACE_MS)
    uploads = upload_set(UPLOADS)
    with FakeUpstream(tmp_path / "scenarios") as fake:
        server = daphne_process(
            {"INSPECTOR_UPSTREAMS": f"fake={fake.url}", "INSPECTOR_UPSTREAM_READ_TIMEOUT": "30"}
        )
        # Warm up (imports, first connections), then measure.
        run(server.url, upload_set(2, seed=99), 1, timeout=30)
        before = rss_kb(server.proc.pid)
        load = run(server.url, uploads, STREAMS, timeout=45)
        figures = verify(load, uploads, scenario)
        after = rss_kb(server.proc.pid)
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200
    figures |= {
        "rss_before_mb": round(before["VmRSS"] / 1024, 1),
        "rss_after_mb": round(after["VmRSS"] / 1024, 1),
        "rss_peak_mb": round(after["VmHWM"] / 1024, 1),
        "test_seconds": round(time.monotonic() - started, 1),
    }
    print("\nload:", figures)
    assert figures["problems"] == []
    assert figures["frames_lost"] == 0
    assert (after["VmRSS"] - before["VmRSS"]) / 1024 < RSS_GROWTH_LIMIT_MB, figures
    assert figures["test_seconds"] < 60, figures


@pytest.fixture(autouse=True)
def _no_stray_captures(transactional_db):
    """Each run starts from an empty database (verify counts every capture)."""
    from inspector.captures.models import Capture

    Capture.objects.all().delete()
