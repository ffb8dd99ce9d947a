"""Django set up inside a bench's own process (benches that call the code
directly, not through a server): the repository and `bench/` importable, a
scratch SQLite database unless DATABASE_URL is set, and `defaults` for
settings the environment does not give.  Call it before importing anything
of Django's or the project's."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def setup_django(**defaults: str) -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    for name, value in defaults.items():
        os.environ.setdefault(name, value)

    import django

    django.setup()
