"""`manage.py assemble PATH`: assemble one stream and print the result JSON.

Exit 0 when the outcome is ok, 1 when refused, 2 when the input can't be read
at all (then nothing on stdout and a one-line reason on stderr).

`--lens NAME` prints instead what one client library would have assembled
from the same frames (`inspector.lenses`) and where it parts from the
assembler's result under `--policy`; it exits 0 whatever the outcome, 2 when
the input can't be read.

This runs without Django: `manage.py` hands `assemble` straight here, so the
command starts in the time it takes to import the assembler (the Django
management command of the same name calls the same functions).  The result
is written as it is serialised, its event list element by element, so a
100k-frame stream's 8 MB of events never sit in memory as one string;
`--no-events` leaves the event list out.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO

from inspector.assembly import (
    AUTO,
    AUTO_DIALECT,
    DIALECTS,
    POLICIES,
    STRICT,
    Result,
    UnreadableInput,
    assemble,
    settle_format,
    stream_source,
)
from inspector.assembly.jsontext import dumps
from inspector.stream_args import (
    UNREADABLE,
    Unreadable,
    add_stream_arguments,
    read_input,
    whole_number,
)

EVENTS_PER_WRITE = 1000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_stream_arguments(parser)
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
        "--no-events",
        dest="events",
        action="store_false",
        help="leave the event list out of the result",
    )
    parser.add_argument(
        "--lens",
        default=None,
        help="print what this client library would assemble from the same frames "
        "(openai, vercel, litellm or langchain)",
    )


def run(options: dict[str, Any], out: BinaryIO) -> int:
    """Assemble (or run a lens) as `options` say, write to `out`; the exit
    status.  Raises Unreadable for input that can't be read at all."""
    path = options["path"]
    data = read_input(path)
    name = None if path == "-" else path
    try:
        if options.get("lens"):
            write_json(lens_document(data, name, options), out, options.get("indent", False))
            return 0
        result = assemble(
            data,
            fmt=options.get("format") or AUTO,
            name=name,
            policy=options.get("policy") or STRICT,
            entry=options.get("entry") or 0,
            chunk_bytes=options.get("chunk_bytes"),
            dialect=options.get("dialect") or AUTO_DIALECT,
        )
    except UnreadableInput as error:
        raise Unreadable(str(error)) from None
    indent, events = options.get("indent", False), options.get("events", True)
    write_result(result, out, indent=indent, events=events)
    return 1 if result.refusal is not None else 0


def write_result(result: Result, out: BinaryIO, *, indent: bool, events: bool) -> None:
    """The result document; the event list streamed element by element."""
    document = result.to_dict(events=False)
    if indent:
        if events:
            document["events"] = result.events.to_dicts()
        write_json(document, out, True)
        return
    head = dumps(document)
    if not events:
        out.write(head + b"\n")
        return
    out.write(head[:-1] + b',"events":[')
    batch: list[bytes] = []
    for number, event in enumerate(result.events.iter_dicts()):
        batch.append(dumps(event) if number == 0 else b"," + dumps(event))
        if len(batch) >= EVENTS_PER_WRITE:
            out.write(b"".join(batch))
            batch.clear()
    out.write(b"".join(batch) + b"]}\n")


def write_json(document: Any, out: BinaryIO, indent: bool) -> None:
    out.write(dumps(document, indent=indent) + b"\n")


def lens_document(data: bytes, name: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """What one client library makes of the frames, and where it parts from
    the assembler (the lenses are imported only when asked for)."""
    from inspector.lenses import LENSES, read_frames_and_result, run_lens
    from inspector.lenses.compare import divergences

    lens_name = options["lens"]
    if lens_name not in LENSES:
        raise Unreadable(f"--lens: unknown lens {lens_name!r}: use {', '.join(LENSES)}")
    fmt = options.get("format") or AUTO
    if fmt == AUTO:
        fmt = settle_format(name, data)
    fmt, body, _ = stream_source(data, fmt, options.get("entry") or 0)
    frames, result = read_frames_and_result(
        body, fmt, policy=options.get("policy") or STRICT, chunk_bytes=options.get("chunk_bytes")
    )
    lens = run_lens(lens_name, frames, dialect=result.dialect)
    document = lens.to_dict()
    document["divergences"] = divergences(lens, result)
    return document


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr and exit 2, like unreadable input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"assemble: {message}\n")
        sys.exit(UNREADABLE)


def main(argv: Sequence[str]) -> int:
    parser = _OneLineParser(prog="manage.py assemble", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    options = vars(parser.parse_args(argv))
    try:
        status = run(options, sys.stdout.buffer)
    except Unreadable as error:
        sys.stderr.write(f"assemble: {error}\n")
        return UNREADABLE
    sys.stdout.flush()
    return status
