"""The options of a command that reads one stream file (`assemble`,
`minimize`), without Django: `manage.py assemble` runs before Django is set
up (see `inspector/assemble_cli.py`) and the management commands add the same
options to their parsers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from inspector.assembly import AUTO, FORMATS

UNREADABLE = 2  # the exit status of input that can't be read at all


class Unreadable(Exception):
    """The input can't be read at all: exit 2 with this one line."""


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: an int no smaller than `minimum`."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(text)
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="the stream file, or - for standard input")
    parser.add_argument(
        "--format",
        default=AUTO,
        choices=(AUTO, *FORMATS),
        help="input format (default: by the first bytes, else by extension)",
    )
    parser.add_argument(
        "--entry",
        type=whole_number(0),
        default=0,
        help="which event stream of a HAR, counted from 0",
    )


def read_input(path: str) -> bytes:
    """The bytes of `path` (`-`: standard input); Unreadable when missing."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise Unreadable(f"can't read {path}: {error.strerror or error}") from None
