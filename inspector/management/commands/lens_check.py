"""`manage.py lens_check DIR`: every stream of a corpus folder through the
lens of its project's library, compared with what that project's own test
expects (`peer_expects`); agreement per lens.  Exit 0 when every stream with
a lens agrees, 1 when one disagrees, 2 when the folder can't be read."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inspector.assembly import UnreadableInput
from inspector.lenses import LENSES
from inspector.lenses.corpus import AGREED, DISAGREED, NO_LENS, StreamCheck, check_folder, tally

UNREADABLE = 2


class Command(BaseCommand):
    help = "Check each lens against its library's own tests (NAME.sse + NAME.expect.json)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "folder", help="the corpus folder (NAME.sse/.jsonl/.json + NAME.expect.json)"
        )
        parser.add_argument(
            "--verbose-streams", action="store_true", help="a line for every stream"
        )

    def handle(self, *args, folder: str, verbose_streams: bool = False, **options) -> None:
        checks = self._checks(Path(folder))
        for check in checks:
            if verbose_streams or check.verdict == DISAGREED:
                self._stream_lines(check)
        self._summary(checks)
        if any(check.verdict == DISAGREED for check in checks):
            sys.exit(1)

    def _checks(self, folder: Path) -> list[StreamCheck]:
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder", returncode=UNREADABLE)
        try:
            checks = check_folder(folder)
        except (OSError, ValueError, UnreadableInput) as error:
            raise CommandError(f"can't read the corpus: {error}", returncode=UNREADABLE) from None
        if not checks:
            raise CommandError(
                f"no NAME.expect.json with a NAME.sse, .jsonl or .json in {folder}",
                returncode=UNREADABLE,
            )
        return checks

    def _stream_lines(self, check: StreamCheck) -> None:
        self.stdout.write(f"{check.verdict:<9}  {check.lens or '-':<9}  {check.name}")
        for difference in check.differences:
            self.stdout.write(f"           {difference}")
        if check.differences and check.note:
            self.stdout.write(f"           corpus note: {check.note}")

    def _summary(self, checks: list[StreamCheck]) -> None:
        self.stdout.write("")
        self.stdout.write(f"{'lens':<10} {AGREED:>7} {DISAGREED:>10} {NO_LENS:>8}")
        entries = []
        for lens, counts in tally(checks).items():
            self.stdout.write(
                f"{lens:<10} {counts[AGREED]:>7} {counts[DISAGREED]:>10} {counts[NO_LENS]:>8}"
            )
            if lens in LENSES and LENSES[lens].tested_entry:
                entry = LENSES[lens].tested_entry
                entries.append(f"{lens}: entered as its own tests enter it: {entry}")
        agreed = sum(check.verdict == AGREED for check in checks)
        with_lens = sum(check.verdict != NO_LENS for check in checks)
        self.stdout.write(
            f"{agreed} of {with_lens} streams with a lens agree; {len(checks)} streams"
        )
        for entry in entries:
            self.stdout.write(entry)
