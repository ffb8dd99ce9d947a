"""`manage.py assemble PATH`: assemble one stream and print the result JSON.

Exit 0 when the outcome is ok, 1 when refused, 2 when the input can't be read
at all (then nothing on stdout and a one-line reason on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inspector.assembly import AUTO, FORMATS, POLICIES, STRICT, UnreadableInput, assemble
from inspector.assembly.jsontext import dumps

UNREADABLE = 2


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _entry(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


class Command(BaseCommand):
    help = "Assemble the tool calls of one stream (SSE, JSON Lines or HAR) and print the result."
    # The command touches neither the database nor the URLs: skip the checks.
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs) -> CommandParser:
        """A parser whose usage errors are one line on stderr and exit 2,
        like every other input that can't be read."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)

        def one_line_error(message: str) -> None:
            if not parser.called_from_command_line:
                raise CommandError(f"Error: {message}", returncode=UNREADABLE)
            sys.stderr.write(f"assemble: {message}\n")
            sys.exit(UNREADABLE)

        parser.error = one_line_error
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the stream file, or - for standard input")
        parser.add_argument(
            "--format",
            default=AUTO,
            choices=(AUTO, *FORMATS),
            help="input format (default: by extension, else by the first bytes)",
        )
        parser.add_argument("--policy", default=STRICT, choices=POLICIES)
        parser.add_argument(
            "--entry", type=_entry, default=0, help="which event stream of a HAR, counted from 0"
        )
        parser.add_argument(
            "--chunk-bytes",
            type=_positive,
            default=None,
            help="feed the input N bytes at a time (the result must not change)",
        )
        parser.add_argument("--indent", action="store_true", help="pretty-print the JSON")

    def handle(self, *args, **options) -> None:
        path = options["path"]
        data = self._read(path)
        try:
            result = assemble(
                data,
                fmt=options["format"],
                name=None if path == "-" else path,
                policy=options["policy"],
                entry=options["entry"],
                chunk_bytes=options["chunk_bytes"],
            )
        except UnreadableInput as error:
            raise CommandError(str(error), returncode=UNREADABLE) from None
        sys.stdout.buffer.write(dumps(result.to_dict(), indent=options["indent"]) + b"\n")
        sys.stdout.flush()
        if result.refusal is not None:
            sys.exit(1)

    def _read(self, path: str) -> bytes:
        if path == "-":
            return sys.stdin.buffer.read()
        try:
            return Path(path).read_bytes()
        except OSError as error:
            raise CommandError(
                f"can't read {path}: {error.strerror or error}", returncode=UNREADABLE
            ) from None
