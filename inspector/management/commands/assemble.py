"""`manage.py assemble PATH` as a Django management command (for
`call_command("assemble", ...)` and `django-admin`); `manage.py` itself runs
`inspector/assemble_cli.py` directly, without setting Django up.  Both take
the same options and print the same bytes."""

from __future__ import annotations

import sys

from django.core.management.base import CommandError, CommandParser

from inspector.assemble_cli import add_arguments, run
from inspector.management.streamcommand import StreamCommand
from inspector.stream_args import UNREADABLE, Unreadable


class Command(StreamCommand):
    help = (
        "Assemble the tool calls of one stream (SSE, JSON Lines, JSON array or HAR; chat, "
        "Responses, Anthropic Messages or Gemini) and print the result."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_arguments(parser)

    def handle(self, *args, **options) -> None:
        try:
            status = run(options, sys.stdout.buffer)
        except Unreadable as error:
            raise CommandError(str(error), returncode=UNREADABLE) from None
        sys.stdout.flush()
        if status:
            sys.exit(status)
