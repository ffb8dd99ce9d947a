"""`manage.py fake_upstream --port 9100 --scenarios DIR`: an OpenAI-compatible
server that replays stream files (see `inspector.live.fake_upstream`)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inspector.live.fake_upstream import DEFAULT_SCENARIOS, FakeUpstream


class Command(BaseCommand):
    help = (
        "Serve chat completions by replaying DIR/<model>.sse or .jsonl files "
        "(optional DIR/<model>.json: pace_ms, cut_after_frames, fail_times, fail_status)."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=9100)
        parser.add_argument(
            "--scenarios",
            default=str(DEFAULT_SCENARIOS),
            help="directory of scenario files (default: the demo scenarios)",
        )
        parser.add_argument(
            "--pace-ms",
            type=float,
            default=None,
            help="pause between frames for every scenario (default: each scenario's pace_ms)",
        )

    def handle(self, *args, **options) -> None:
        scenarios = Path(options["scenarios"])
        if not scenarios.is_dir():
            raise CommandError(f"no scenarios directory {scenarios}")
        try:
            fake = FakeUpstream(
                scenarios, host=options["host"], port=options["port"], pace_ms=options["pace_ms"]
            )
        except OSError as error:
            where = f"{options['host']}:{options['port']}"
            raise CommandError(f"can't listen on {where}: {error}") from None
        names = ", ".join(fake.names()) or "(none)"
        self.stdout.write(f"fake upstream on {fake.url}\nscenarios (model names): {names}")
        self.stdout.flush()
        try:
            fake.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            fake.server.server_close()
