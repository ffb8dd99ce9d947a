"""What the commands that read one stream file share: the PATH/--format/
--entry options, reading the input, and one-line usage errors with exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inspector.assembly import AUTO, FORMATS

UNREADABLE = 2  # the exit status of input that can't be read at all


def whole_number(minimum: int):
    """An argparse type: an int no smaller than `minimum`."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(text)
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse


class StreamCommand(BaseCommand):
    """A command reading one stream: no system checks (no database, no
    URLs), usage errors as one line on stderr and exit 2."""

    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)

        def one_line_error(message: str) -> None:
            if not parser.called_from_command_line:
                raise CommandError(f"Error: {message}", returncode=UNREADABLE)
            sys.stderr.write(f"{subcommand}: {message}\n")
            sys.exit(UNREADABLE)

        parser.error = one_line_error
        return parser

    def add_stream_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the stream file, or - for standard input")
        parser.add_argument(
            "--format",
            default=AUTO,
            choices=(AUTO, *FORMATS),
            help="input format (default: by extension, else by the first bytes)",
        )
        parser.add_argument(
            "--entry",
            type=whole_number(0),
            default=0,
            help="which event stream of a HAR, counted from 0",
        )

    def read_input(self, path: str) -> bytes:
        if path == "-":
            return sys.stdin.buffer.read()
        try:
            return Path(path).read_bytes()
        except OSError as error:
            raise CommandError(
                f"can't read {path}: {error.strerror or error}", returncode=UNREADABLE
            ) from None
