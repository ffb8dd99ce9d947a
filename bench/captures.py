"""Storage and page benchmarks for captures.

Run from the repository root (uses a throw-away SQLite file unless
DATABASE_URL is set, in which case it runs against that database):

    .venv/bin/python bench/captures.py

It measures, side by side in one run:

    store   store_upload() of a 100k-frame stream (assemble under strict and
            lenient, frames, assemblies, calls, fragments, one transaction)
    bare    a bare bulk_create of the same 100k Frame rows, nothing else
    fastest the rows the upload wrote (its frames and fragments, read back
            from a stored copy) inserted again with the database's fast path
            (`captures/fast_rows.py`: executemany on SQLite, COPY on
            PostgreSQL), with a capture, an assembly and a call, one
            transaction: the fastest plain insert of the same rows
    pages   server time (in-process test client) of the capture page and of a
            frame permalink, for a 100-frame and a 100k-frame capture; and of
            the frames panel filtered (?frames=call-1, text, anomalies)

Targets: store <= 3x bare, store <= 1.5x fastest (issue 13); each page for
100k frames within 2x of 100 frames.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
# The 100k-frame stream is ~34 MB, over the default 20 MB upload limit.
os.environ.setdefault("INSPECTOR_MAX_UPLOAD_BYTES", str(200 * 1024 * 1024))

import django  # noqa: E402
import orjson  # noqa: E402

django.setup()

from assemble import parallel_stream  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402
from django.test import Client  # noqa: E402

from inspector.assembly import StreamAssembler  # noqa: E402
from inspector.captures import models  # noqa: E402
from inspector.captures.fast_rows import insert_rows  # noqa: E402
from inspector.captures.fragment_rows import FRAGMENT_FIELDS  # noqa: E402
from inspector.captures.intake import store_upload  # noqa: E402
from inspector.captures.store import FRAME_FIELDS  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
PAGE_REQUESTS = 15


def bare_bulk_create(data: bytes) -> float:
    """The floor: the same frames, split once, written with one bulk_create."""
    stream = StreamAssembler("sse")
    frames = stream.feed(data) + stream.close()
    start = time.perf_counter()
    with transaction.atomic():
        capture = models.Capture.objects.create(
            input_format="sse", stream_format="sse", outcome="ok", raw=b""
        )
        models.Frame.objects.bulk_create(
            [
                models.Frame(capture=capture, number=f.number, kind=f.kind.value, raw=f.raw)
                for f in frames
            ],
            batch_size=2000,
        )
    elapsed = time.perf_counter() - start
    capture.delete()
    return elapsed


JSON_FIELDS = {"calls", "marks", "did"}


def stored_rows(data: bytes) -> tuple[list[tuple], list[tuple]]:
    """The frame and fragment rows an upload of `data` writes (JSON columns
    as their text), without their capture id."""
    (capture,) = store_upload(data, name="rows.sse")
    names = FRAME_FIELDS[1:]
    frames = [
        tuple(_column(name, value) for name, value in zip(names, row, strict=True))
        for row in capture.frames.order_by("number").values_list(*names)
    ]
    fragments = list(
        models.Fragment.objects.filter(capture=capture)
        .order_by("position", "seq")
        .values_list(*FRAGMENT_FIELDS[1:])
    )
    capture.delete()
    return frames, fragments


def _column(name: str, value: object) -> object:
    return orjson.dumps(value).decode() if name in JSON_FIELDS else value


FRAGMENT_SECONDS: list[float] = []  # of each fastest insert, its fragment rows'


def fastest_insert(frames: list[tuple], fragments: list[tuple]) -> float:
    """The same rows, inserted with `insert_rows` (after a row per call);
    the fragments' part of the time goes to FRAGMENT_SECONDS."""
    start = time.perf_counter()
    with transaction.atomic():
        capture = models.Capture.objects.create(
            input_format="sse", stream_format="sse", outcome="ok", raw=b""
        )
        assembly = models.Assembly.objects.create(capture=capture, policy="strict", outcome="ok")
        positions = sorted({row[0] for row in fragments})
        models.Call.objects.bulk_create(
            [models.Call(assembly=assembly, position=n, choice=0) for n in positions]
        )
        insert_rows(models.Frame, FRAME_FIELDS, ((capture.pk, *row) for row in frames))
        rows = ((capture.pk, *row) for row in fragments)
        fragments_start = time.perf_counter()
        insert_rows(models.Fragment, FRAGMENT_FIELDS, rows)
        FRAGMENT_SECONDS.append(time.perf_counter() - fragments_start)
    elapsed = time.perf_counter() - start
    capture.delete()
    return elapsed


def store(data: bytes) -> float:
    start = time.perf_counter()
    (capture,) = store_upload(data, name="bench.sse")
    elapsed = time.perf_counter() - start
    capture.delete()
    return elapsed


def page_time(client: Client, path: str) -> float:
    client.get(path)  # warm
    times = []
    for _ in range(PAGE_REQUESTS):
        start = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (path, response.status_code)
    return statistics.median(times)


def main() -> None:
    call_command("migrate", verbosity=0)
    engine = django.db.connection.vendor
    big, _ = parallel_stream(100_000)
    small, _ = parallel_stream(100)
    print(f"database: {engine}; 100k-frame stream: {len(big) / 1e6:.1f} MB")

    frame_rows, fragment_rows = stored_rows(big)
    # The server freezes what it loaded at startup out of the cyclic GC
    # (inspector/asgi.py); so does the bench, with its own 200k rows held for
    # the floor, so that the full collections during a timed call traverse
    # what that call makes (unfrozen, the rows made the upload's GC 26% of it).
    gc.collect()
    gc.freeze()
    bare_times, fast_times, store_times = [], [], []
    for _ in range(ROUNDS):  # alternate, so all see the same machine noise
        bare_times.append(bare_bulk_create(big))
        fast_times.append(fastest_insert(frame_rows, fragment_rows))
        store_times.append(store(big))
    bare, fastest, stored = min(bare_times), min(fast_times), min(store_times)
    print(f"bare bulk_create of 100k frames   {bare:8.2f} s")
    print(
        f"fastest insert of its rows        {fastest:8.2f} s"
        f"  ({len(frame_rows)} frames, {len(fragment_rows)} fragments;"
        f" the fragments {min(FRAGMENT_SECONDS):.2f} s of it)"
    )
    print(f"store_upload of the same stream   {stored:8.2f} s")
    print(f"store / bare                      {stored / bare:8.2f}x  (target <= 3x)")
    print(f"store / fastest                   {stored / fastest:8.2f}x  (target <= 1.5x)")

    (small_capture,) = store_upload(small, name="small.sse")
    (big_capture,) = store_upload(big, name="big.sse")
    client = Client()
    rows = []
    for label, suffix in (
        ("capture page", ""),
        ("frame permalink", "frames/{n}/"),
        ("?frames=call-1", "?frames=call-1"),
        ("?frames=text", "?frames=text"),
        ("?frames=anomalies", "?frames=anomalies"),
        ("?raw=1", "?raw=1"),
    ):
        small_path = f"/c/{small_capture.slug}/" + suffix.format(n=small_capture.frame_count // 2)
        big_path = f"/c/{big_capture.slug}/" + suffix.format(n=big_capture.frame_count // 2)
        small_s, big_s = page_time(client, small_path), page_time(client, big_path)
        rows.append((label, small_s, big_s))
    for label, small_s, big_s in rows:
        print(
            f"{label:18} 100 frames {small_s * 1000:7.1f} ms   100k frames {big_s * 1000:7.1f} ms"
            f"   ratio {big_s / small_s:5.2f}x  (target <= 2x)"
        )


if __name__ == "__main__":
    main()
