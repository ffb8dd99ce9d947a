"""Upload fuzzing at length: thousands of hostile uploads, counted by answer.

Run from the repository root:

    .venv/bin/python bench/fuzz_uploads.py                      # 5,000 cases, scratch SQLite
    .venv/bin/python bench/fuzz_uploads.py --examples 20000 --seed 7
    .venv/bin/python bench/fuzz_uploads.py --database-url postgres://postgres@127.0.0.1:5432/fuzz

The cases and the property are those of tests/hardening/test_hardening_upload_fuzz.py
(tests/hardening/hardening_fuzz.py): binary garbage, invalid UTF-8, NUL bytes, deep nesting,
huge numbers, truncated and mangled HAR, mixed SSE/JSON Lines lines, posted as a raw body,
a multipart file and through the upload form, in-process with Django's test client.  Every
answer must be a whole stored capture or a clean 4xx with no row changed; the run stops at
the first case that breaks that, and prints it.

`--database-url` must name a scratch database: it is migrated, and the captures stay.
Figures go to stdout and to bench-results/fuzz_uploads.json (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results" / "fuzz_uploads.json"
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "hardening")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=5000, help="cases to run (5000)")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (random)")
    parser.add_argument("--database-url", default="", help="default: a scratch SQLite file")
    parser.add_argument("--pages", action="store_true", help="also GET each stored page")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-fuzz-"))
    database_url = args.database_url or f"sqlite:///{scratch / 'fuzz.sqlite3'}"
    os.environ.update(
        {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "inspector.settings"}
    )
    os.environ.pop("REDIS_URL", None)

    import logging
    import warnings

    import django

    # inspector.assembly.jsontext raises the recursion limit for deep JSON; hypothesis notes it.
    warnings.filterwarnings("ignore", "The recursion limit will not be reset")
    django.setup()
    logging.getLogger("django.request").setLevel(logging.ERROR)  # 4xx are expected
    from django.core.management import call_command
    from django.test import Client
    from django.test.utils import setup_test_environment
    from hardening_fuzz import Upload, check, uploads
    from hypothesis import HealthCheck, Phase, given, seed, settings

    setup_test_environment()  # ALLOWED_HOSTS gets "testserver", as under pytest
    call_command("migrate", verbosity=0, interactive=False)
    client = Client(raise_request_exception=False)
    by_status: Counter = Counter()
    by_kind: Counter = Counter()
    seconds: Counter = Counter()

    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(upload=uploads())
    def run(upload: Upload) -> None:
        started = time.perf_counter()
        status = check(client, upload, pages=args.pages)
        seconds[upload.kind] += time.perf_counter() - started
        by_status[status] += 1
        by_kind[(upload.kind, upload.via, status)] += 1

    if args.seed is not None:
        run = seed(args.seed)(run)
    started = time.monotonic()
    failure = None
    try:
        run()
    except Exception as error:  # noqa: BLE001 - reported below, with the counts so far
        failure = error
    took = time.monotonic() - started
    total = sum(by_status.values())
    report = {
        "examples": total,
        "seconds": round(took, 1),
        "by_status": {str(k): v for k, v in sorted(by_status.items())},
        "by_kind": {
            kind: {
                "cases": sum(v for (k, _, _), v in by_kind.items() if k == kind),
                "seconds": round(seconds[kind], 1),
                "by_status": {
                    str(s): sum(v for (k, _, st), v in by_kind.items() if k == kind and st == s)
                    for s in sorted({st for (k, _, st) in by_kind if k == kind})
                },
            }
            for kind in sorted({k for (k, _, _) in by_kind})
        },
        "by_via": {
            via: sum(v for (_, w, _), v in by_kind.items() if w == via)
            for via in sorted({w for (_, w, _) in by_kind})
        },
        "database": django.db.connection.vendor,
        "failure": repr(failure) if failure else None,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{total} uploads in {took:.1f} s ({django.db.connection.vendor})")
    print("by status:", ", ".join(f"{k}: {v}" for k, v in report["by_status"].items()))
    for kind, figures in report["by_kind"].items():
        counts = ", ".join(f"{k}: {v}" for k, v in figures["by_status"].items())
        print(f"  {kind:14} {figures['cases']:6} cases {figures['seconds']:7.1f} s  ({counts})")
    print("by way in:", ", ".join(f"{k}: {v}" for k, v in report["by_via"].items()))
    if failure is not None:
        print("FAILED:", "".join(traceback.format_exception(failure)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
