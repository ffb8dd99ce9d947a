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

from django.core.management.base import CommandError, CommandParser

from inspector.assembly import (
    AUTO,
    AUTO_DIALECT,
    DIALECTS,
    POLICIES,
    STRICT,
    UnreadableInput,
    assemble,
    detect_format,
    stream_source,
)
from inspector.assembly.jsontext import dumps
from inspector.lenses import LENSES, read_frames_and_result, run_lens
from inspector.lenses.compare import divergences
from inspector.management.streamcommand import UNREADABLE, StreamCommand, whole_number


class Command(StreamCommand):
    help = (
        "Assemble the tool calls of one stream (SSE, JSON Lines, JSON array or HAR; chat, "
        "Responses, Anthropic Messages or Gemini) and print the result."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        self.add_stream_arguments(parser)
        parser.add_argument("--policy", default=STRICT, choices=POLICIES)
        parser.add_argument(
            "--dialect",
            default=AUTO_DIALECT,
            choices=(*DIALECTS, AUTO_DIALECT),
            help="wire format of the stream (default: auto, from the first frames or a HAR's URL)",
        )
        parser.add_argument(
            "--chunk-bytes",
            type=whole_number(1),
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
        data = self.read_input(path)
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
                dialect=options.get("dialect") or AUTO_DIALECT,
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
            # The lenses are chat client libraries: they read chat frames.
            fmt, body, _ = stream_source(data, fmt, options["entry"])
            frames, result = read_frames_and_result(
                body, fmt, policy=options["policy"], chunk_bytes=options["chunk_bytes"]
            )
        except UnreadableInput as error:
            raise CommandError(str(error), returncode=UNREADABLE) from None
        lens = run_lens(options["lens"], frames)
        document = lens.to_dict()
        document["divergences"] = divergences(lens, result)
        sys.stdout.buffer.write(dumps(document, indent=options["indent"]) + b"\n")
        sys.stdout.flush()
