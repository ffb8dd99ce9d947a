"""`manage.py minimize PATH`: the smallest stream that is still refused the same way.

`--lens NAME` keeps a lens's divergence from strict instead (see
`inspector/minimize/lens.py`): the smallest stream on which that library still
parts from the assembler the same way, whether or not strict refuses it.

Progress goes to stderr (`Progress.line()`: pass, candidates tried, current
size in frames and bytes against the original's, time spent), the minimized stream
to stdout (or `--out FILE`).  `--export DIR --name NAME` also writes it as a
regression case, `DIR/NAME.sse` and `DIR/NAME.expect.json`, in the shape of
the conformance cases.

Exit 0 when minimized (also when the time ran out: the stream found is still
refused the same way, only maybe not minimal; stderr says so), 2 when the
input can't be read or there is nothing to minimize (a stream that is not
refused; with `--lens`, a lens that is unknown, unavailable or agrees with
strict), with a one-line reason on stderr and nothing on stdout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from inspector.assembly import AUTO, AUTO_DIALECT, DIALECTS, UnreadableInput, settle_format
from inspector.management.streamcommand import UNREADABLE, StreamCommand
from inspector.minimize.export import NAME, case_files
from inspector.minimize.lens import lens_names, lens_target
from inspector.minimize.progress import Progress
from inspector.minimize.stream import Minimized, NothingToMinimize, minimize


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


class Command(StreamCommand):
    help = (
        "Minimize a refused stream (delta debugging over frames, tool-call entries and "
        "argument fragments), keeping its strict refusal code, or with --lens a lens's "
        "divergence from strict."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        self.add_stream_arguments(parser)
        parser.add_argument(
            "--seconds",
            type=_seconds,
            default=None,
            help="time budget (default: the INSPECTOR_MINIMIZE_SECONDS setting)",
        )
        parser.add_argument("--out", default=None, help="write the stream here, not to stdout")
        parser.add_argument(
            "--export", default=None, metavar="DIR", help="also write NAME.sse + NAME.expect.json"
        )
        parser.add_argument("--name", default=None, help="the case name for --export")
        parser.add_argument("--quiet", action="store_true", help="no progress lines")
        parser.add_argument(
            "--dialect",
            default=AUTO_DIALECT,
            choices=(*DIALECTS, AUTO_DIALECT),
            help="wire format of the stream (default: auto, from the first frames); "
            "every candidate is read in it",
        )
        parser.add_argument(
            "--lens",
            default=None,
            metavar="NAME",
            help="keep this lens's divergence from strict instead of the refusal "
            f"({', '.join(lens_names())}); also for streams strict accepts",
        )

    def handle(self, *args, **options) -> None:
        path = options["path"]
        name = options["name"]
        if options["export"] is not None:
            name = name or _default_name(path)
            if not NAME.fullmatch(name):
                raise CommandError(
                    f"--name {name!r}: use letters, digits, '_', '-' and '.'",
                    returncode=UNREADABLE,
                )
        elif name is not None:
            raise CommandError("--name goes with --export DIR", returncode=UNREADABLE)
        data = self.read_input(path)
        fmt = options["format"]
        seconds = options["seconds"] or float(settings.INSPECTOR_MINIMIZE_SECONDS)
        try:
            if fmt == AUTO:
                fmt = settle_format(None if path == "-" else path, data)
            found = _minimize(data, fmt, options, seconds)
        except (UnreadableInput, NothingToMinimize) as error:
            raise CommandError(str(error), returncode=UNREADABLE) from None

        files = self._case_files(found, path, name) if options["export"] is not None else None
        self._say(
            f"minimized: keeps {found.target}: {found.original_bytes} -> {len(found.data)} bytes, "
            f"{found.original_frames} -> {found.frames} frames, "
            f"{found.tests_run} candidates tried"
            + (f"; time ran out after {seconds:g} s, maybe not minimal" if found.timed_out else "")
        )
        if files is not None:
            folder = Path(options["export"])
            try:
                folder.mkdir(parents=True, exist_ok=True)
                for file_name, content in files.items():
                    (folder / file_name).write_bytes(content)
            except OSError as error:
                raise CommandError(
                    f"can't write to {folder}: {error.strerror or error}", returncode=UNREADABLE
                ) from None
            self._say(f"exported: {folder / (name + '.sse')} and {name}.expect.json")
        if options["out"]:
            try:
                Path(options["out"]).write_bytes(found.data)
            except OSError as error:
                raise CommandError(
                    f"can't write {options['out']}: {error.strerror or error}",
                    returncode=UNREADABLE,
                ) from None
        else:
            sys.stdout.buffer.write(found.data)
            sys.stdout.flush()

    def _case_files(self, found: Minimized, path: str, name: str) -> dict[str, bytes]:
        about = (
            f"Minimized from {Path(path).name if path != '-' else 'standard input'}: "
            f"keeps {found.target}."
        )
        try:
            return case_files(found.data, found.fmt, name=name, about=about)
        except (UnreadableInput, ValueError) as error:  # no SSE form (an unclosed array)
            raise CommandError(f"can't export: {error}", returncode=UNREADABLE) from None

    def _say(self, line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _minimize(data: bytes, fmt: str, options: dict, seconds: float) -> Minimized:
    """The minimizer, keeping the strict refusal or, with --lens, that lens's
    divergence (UnknownLens, LensUnavailable, LensAgrees: all NothingToMinimize)."""
    progress = None if options["quiet"] else _print_progress
    if options["lens"] is None:
        return minimize(
            data,
            fmt,
            deadline_s=seconds,
            entry=options["entry"],
            progress=progress,
            dialect=options.get("dialect") or AUTO_DIALECT,
        )
    target = lens_target(options["lens"], data, fmt, entry=options["entry"])
    return minimize(
        target.data,
        target.fmt,
        target=target,
        keeps=target.description,
        deadline_s=seconds,
        progress=progress,
    )


def _default_name(path: str) -> str:
    stem = "stdin" if path == "-" else Path(path).name.split(".", 1)[0]
    cleaned = "".join(
        c if (c.isascii() and c.isalnum()) or c in "_-" else "_" for c in stem
    ).lstrip("_-.")
    return f"{cleaned or 'stream'}_minimized"


def _print_progress(progress: Progress) -> None:
    sys.stderr.write(progress.line() + "\n")
    sys.stderr.flush()
