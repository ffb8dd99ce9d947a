"""`python -m django record_relays FD`: the recording process a daphne process with
INSPECTOR_RECORDING_PROCESS starts (inspector/live/recording_process.py);
FD is its end of their socket pair.  Not a command for people."""

from __future__ import annotations

import asyncio
import gc
import signal
import socket

from django.core.management.base import BaseCommand

from inspector.live.recording_worker import serve
from inspector.server_gc import make_full_collections_rare


class Command(BaseCommand):
    help = "Record the streams a daphne process relays or is pushed (started by that process)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("fd", type=int, help="this process's end of the socket pair")

    def handle(self, *args, fd: int, **options) -> None:
        # Ctrl-C reaches the whole process group, and a service manager's stop
        # signal often the whole control group: daphne stops, its socket closes,
        # and this process closes its captures then, not in the middle of a batch.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        gc.freeze()  # (as daphne's process does: inspector/asgi.py)
        make_full_collections_rare()
        asyncio.run(serve(socket.socket(fileno=fd)))
