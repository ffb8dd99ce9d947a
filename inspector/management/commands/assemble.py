"""`manage.py assemble PATH`: assemble one stream and print the result JSON.

Exit 0 when the outcome is ok, 1 when refused, 2 when the input can't be read
at all (then nothing on stdout and a one-line reason on stderr).

`--lens NAME` prints instead what one client library would have assembled
from the same frames (`inspector.lenses`) and where it parts from the
assembler's result under `--policy`; it exits 0 whatever the outcome, 2 when
the input can't be read.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from inspector.assembly import (
    AUTO,
    FORMATS,
    POLICIES,
    STRICT,
    UnreadableInput,
    assemble,
    detect_format,
    stream_bytes,
)
from inspector.assembly.jsontext import dumps
from inspector.lenses import LENSES, read_stream, run_lens
from inspector.lenses.compare import divergences

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
        parser.add_argument(
            "--lens",
            choices=tuple(LENSES),
            default=None,
            help="print what this client library would assemble from the same frames",
        )

    def handle(self, *args, **options) -> None:
        path = options["path"]
        data = self._read(path)
        if options["lens"]:
            self._lens(data, None if path == "-" else path, options)
            return
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

    def _lens(self, data: bytes, name: str | None, options: dict) -> None:
        if options["lens"] not in LENSES:  # call_command() skips argparse's choices
            raise CommandError(
                f"unknown lens {options['lens']!r}: use {', '.join(LENSES)}",
                returncode=UNREADABLE,
            )
        try:
            fmt = options["format"]
            if fmt == AUTO:
                fmt = detect_format(name, data)
            fmt, body = stream_bytes(data, fmt, options["entry"])
            frames, result = read_stream(
                body, fmt, policy=options["policy"], chunk_bytes=options["chunk_bytes"]
            )
        except UnreadableInput as error:
            raise CommandError(str(error), returncode=UNREADABLE) from None
        lens = run_lens(options["lens"], frames)
        document = lens.to_dict()
        document["divergences"] = divergences(lens, result)
        sys.stdout.buffer.write(dumps(document, indent=options["indent"]) + b"\n")
        sys.stdout.flush()

    def _read(self, path: str) -> bytes:
        if path == "-":
            return sys.stdin.buffer.read()
        try:
            return Path(path).read_bytes()
        except OSError as error:
            raise CommandError(
                f"can't read {path}: {error.strerror or error}", returncode=UNREADABLE
            ) from None
