"""What the commands that read one stream file share: the PATH/--format/
--entry options, reading the input, and one-line usage errors with exit 2."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inspector.stream_args import UNREADABLE, Unreadable, add_stream_arguments, read_input


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
        add_stream_arguments(parser)

    def read_input(self, path: str) -> bytes:
        try:
            return read_input(path)
        except Unreadable as error:
            raise CommandError(str(error), returncode=UNREADABLE) from None
