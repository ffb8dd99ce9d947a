"""Storage and page benchmarks for captures.

Run from the repository root (uses a throw-away SQLite file unless
DATABASE_URL is set, in which case it runs against that database):

    .venv/bin/python bench/captures.py

It measures, side by side in one run:

    store   store_upload() of a 100k-frame stream (assemble under strict and
            lenient, frames, assemblies, calls, fragments, one transaction)
    bare    a bare bulk_create of the same 100k Frame rows, nothing else
    fastest every row the upload wrote (its capture and raw bytes, its
            assemblies and their result document, their calls, its frames
            and fragments), read back from a stored copy and inserted again
            in one transaction, each the fastest way the project has (large
            values through `captures/blob_io.py`; calls, frames and fragments
            through `captures/fast_rows.py`: executemany on SQLite, COPY on
            PostgreSQL): the fastest plain insert of the same rows.  The
            floor before 2026-12-06's eighth stop, the frames and fragments
            alone with an empty capture, is measured and reported too
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
import tempfile
import time
from dataclasses import dataclass

from in_process import setup_django

# The 100k-frame stream is ~34 MB, over the default 20 MB upload limit.
setup_django(INSPECTOR_MAX_UPLOAD_BYTES=str(200 * 1024 * 1024))

import django  # noqa: E402
import orjson  # noqa: E402
from assemble import parallel_stream  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402
from django.test import Client  # noqa: E402

from inspector.assembly import StreamAssembler  # noqa: E402
from inspector.captures import models  # noqa: E402
from inspector.captures.blob_io import write_json_text, write_raw  # noqa: E402
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


@dataclass
class StoredRows:
    """Every row an upload of a stream writes, read back from a stored copy:
    the capture's columns and raw bytes, each assembly's columns and result
    document, each assembly's calls, the frames and the fragments (JSON
    columns as their text, no ids)."""

    capture: dict[str, object]
    raw: bytes
    assemblies: list[tuple[dict[str, object], str | None, list[tuple]]]
    frames: list[tuple]
    fragments: list[tuple]


CALL_FIELDS = [
    f.name for f in models.Call._meta.concrete_fields if f.name not in ("id", "assembly")
]


def stored_rows(data: bytes) -> StoredRows:
    """The rows an upload of `data` writes."""
    (capture,) = store_upload(data, name="rows.sse")
    names = FRAME_FIELDS[1:]
    frames = [
        tuple(_column(models.Frame, name, value) for name, value in zip(names, row, strict=True))
        for row in capture.frames.order_by("number").values_list(*names)
    ]
    fragments = list(
        models.Fragment.objects.filter(capture=capture)
        .order_by("position", "seq")
        .values_list(*FRAGMENT_FIELDS[1:])
    )
    own = {"id", "slug", "raw"}
    columns = {
        f.attname: getattr(capture, f.attname)
        for f in models.Capture._meta.concrete_fields
        if f.attname not in own
    }
    assemblies = []
    for assembly in capture.assemblies.order_by("id"):
        values = {
            f.attname: getattr(assembly, f.attname)
            for f in models.Assembly._meta.concrete_fields
            if f.attname not in ("id", "capture_id", "result_json")
        }
        calls = [
            tuple(_column(models.Call, n, value) for n, value in zip(CALL_FIELDS, row, strict=True))
            for row in assembly.calls.order_by("position").values_list(*CALL_FIELDS)
        ]
        assemblies.append((values, assembly.result_json, calls))
    rows = StoredRows(columns, bytes(capture.raw), assemblies, frames, fragments)
    capture.delete()
    return rows


def _column(model: type[django.db.models.Model], name: str, value: object) -> object:
    """A column's value as `insert_rows` takes it: a JSON column's as its text."""
    field = model._meta.get_field(name)
    return orjson.dumps(value).decode() if field.get_internal_type() == "JSONField" else value


SECONDS: dict[str, list[float]] = {"frames and fragments": [], "fragments": []}


def frames_and_fragments_insert(rows: StoredRows) -> float:
    """The floor before 2026-12-06's eighth stop: the frames and fragments
    only (with an empty capture, an assembly and a row per call), one
    transaction, its commit included."""
    start = time.perf_counter()
    with transaction.atomic():
        capture = models.Capture.objects.create(
            input_format="sse", stream_format="sse", outcome="ok", raw=b""
        )
        assembly = models.Assembly.objects.create(capture=capture, policy="strict", outcome="ok")
        positions = sorted({row[0] for row in rows.fragments})
        models.Call.objects.bulk_create(
            [models.Call(assembly=assembly, position=n, choice=0) for n in positions]
        )
        insert_frames_and_fragments(capture.pk, rows)
    elapsed = time.perf_counter() - start
    capture.delete()
    return elapsed


def insert_frames_and_fragments(capture_pk: int, rows: StoredRows) -> float:
    """The frames' and fragments' rows under the capture `capture_pk`; the
    fragments' part of the time."""
    insert_rows(models.Frame, FRAME_FIELDS, ((capture_pk, *row) for row in rows.frames))
    start = time.perf_counter()
    insert_rows(models.Fragment, FRAGMENT_FIELDS, ((capture_pk, *r) for r in rows.fragments))
    return time.perf_counter() - start


def fastest_insert(rows: StoredRows) -> float:
    """The same rows, one transaction, each the fastest way this project
    has: the large values (the raw bytes, the result document) through
    `blob_io`, the rest of the capture and assemblies as one INSERT each,
    the calls, frames and fragments through `insert_rows`.  The time of the
    frames' and fragments' INSERTs (or COPYs), and the fragments' alone, go
    to SECONDS."""
    start = time.perf_counter()
    with transaction.atomic():
        capture = models.Capture.objects.create(**rows.capture, raw=b"")
        write_raw(capture, rows.raw)
        for values, document, calls in rows.assemblies:
            assembly = models.Assembly.objects.create(capture=capture, **values)
            if document is not None:
                with tempfile.TemporaryFile() as text:
                    text.write(document.encode())
                    write_json_text(assembly, text)
            insert_rows(models.Call, ["assembly", *CALL_FIELDS], ((assembly.pk, *c) for c in calls))
        frames_start = time.perf_counter()
        SECONDS["fragments"].append(insert_frames_and_fragments(capture.pk, rows))
        SECONDS["frames and fragments"].append(time.perf_counter() - frames_start)
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

    rows = stored_rows(big)
    # The server freezes what it loaded at startup out of the cyclic GC
    # (inspector/asgi.py); so does the bench, with its own 200k rows held for
    # the floor, so that the full collections during a timed call traverse
    # what that call makes (unfrozen, the rows made the upload's GC 26% of it).
    gc.collect()
    gc.freeze()
    bare_times, fast_times, store_times, narrow_times = [], [], [], []
    for _ in range(ROUNDS):  # alternate, so all see the same machine noise
        bare_times.append(bare_bulk_create(big))
        fast_times.append(fastest_insert(rows))
        narrow_times.append(frames_and_fragments_insert(rows))
        store_times.append(store(big))
    bare, fastest, stored = min(bare_times), min(fast_times), min(store_times)
    narrow = min(narrow_times)
    print(f"bare bulk_create of 100k frames   {bare:8.2f} s")
    inserts = min(SECONDS["frames and fragments"])
    print(
        f"fastest insert of its rows        {fastest:8.2f} s"
        f"  (every row: {len(rows.frames)} frames, {len(rows.fragments)} fragments,"
        f" {sum(len(calls) for _, _, calls in rows.assemblies)} calls,"
        f" {len(rows.assemblies)} assemblies, a capture of {len(rows.raw) / 1e6:.1f} MB)"
    )
    print(
        f"  of which their INSERTs / COPYs  {inserts:8.2f} s"
        f"  (the fragments {min(SECONDS['fragments']):.2f} s)"
    )
    print(f"frames and fragments alone        {narrow:8.2f} s  (their commit included)")
    print(f"store_upload of the same stream   {stored:8.2f} s")
    print(f"store / bare                      {stored / bare:8.2f}x  (target <= 3x)")
    print(f"store / fastest                   {stored / fastest:8.2f}x  (target <= 1.5x)")
    print(
        f"store / frames and fragments      {stored / narrow:8.2f}x"
        "  (the floor before 2026-12-06's eighth stop)"
    )

    if os.environ.get("BENCH_PAGES", "1") == "0":
        return
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
