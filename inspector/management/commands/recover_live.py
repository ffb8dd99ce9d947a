"""`manage.py recover_live [--force]`: close the live captures a dead server
process left open (see inspector.live.recovery).

Without `--force` only captures that stored nothing for
INSPECTOR_LIVE_STALE_SECONDS (default 120) are closed, so it is safe while
other server processes are recording.  `make run` starts a single local
server and runs it with `--force` first: no capture can be live then.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from inspector.live.recovery import recover_interrupted


class Command(BaseCommand):
    help = "Close live captures left open by a server process that died (keeps their frames)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="close every live capture, however recent (only when no server is running)",
        )
        parser.add_argument(
            "--stale-seconds",
            type=float,
            default=None,
            help="idle time that marks a capture as left behind "
            "(default: INSPECTOR_LIVE_STALE_SECONDS, else 120)",
        )

    def handle(self, *args, force: bool = False, stale_seconds=None, **options) -> None:
        recovered = recover_interrupted(force=force, stale=stale_seconds)
        for capture in recovered:
            code = f" {capture.refusal_code}" if capture.refusal_code else ""
            self.stdout.write(
                f"recovered {capture.slug}: {capture.frame_count} frames, {capture.outcome}{code}"
            )
        if not recovered:
            self.stdout.write("no interrupted live capture")
