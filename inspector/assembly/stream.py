"""The sans-I/O facade: bytes in, in pieces of any size; frames, events and a
result out.  The caller owns all I/O (files, sockets, the database)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .assembler import LENIENT, STRICT, Assembler, lenient_twin
from .dialect import AUTO_DIALECT, dialect_from_url
from .errors import UnreadableInput
from .formats import (
    AUTO,
    HAR,
    JSON_ARRAY,
    JSONL,
    SSE,
    STREAM_FORMATS,
    by_content,
    detect_format,
)
from .frames import Frame, FrameKind
from .har import read_har
from .jsonarray import JSONArrayReader
from .readers import JSONLReader, Sinks, SSEReader
from .result import Result

# A slice's frames, parsed payloads and all, live until the slice is
# assembled.  8 KB of small frames (a Gemini piece is about 200 bytes and 8
# containers) stays under the garbage collector's 700-object threshold, so
# a collection rarely lands in the middle of a slice and moves its short-lived
# payloads into the older generations, whose full collections then cost more
# (16 KB took a third more time on a 100k-frame Gemini JSON array, and no less
# on chat: bench/README.md).
FEED_SLICE = 8 * 1024
# `consume` (SSE, one policy) keeps no frame: a common frame's payload is
# dropped as soon as it is assembled, whatever the slice, so its slices can
# be larger and cost less each (32 KB and up took about a tenth less time
# than 8 KB on the 100k-frame chat streams of bench/assemble.py).
CONSUME_SLICE = 64 * 1024


def reader_for(fmt: str) -> SSEReader | JSONLReader | JSONArrayReader:
    """A new reader of a stream format (sse, jsonl or json-array)."""
    if fmt == SSE:
        return SSEReader()
    if fmt == JSONL:
        return JSONLReader()
    if fmt == JSON_ARRAY:
        return JSONArrayReader()
    raise UnreadableInput(f"a stream is read as sse, jsonl or json-array, not {fmt!r}")


# How much of an input `settle_format` reads to see whether a format reads it.
SETTLE_BYTES = 64 * 1024


def settle_format(name: str | None, data: bytes) -> str:
    """The input's format, told by its content first, else its name, and
    checked against what it reads.  A format only the name chose must read a
    frame that is not invalid (`aaaa` named `.jsonl` is no JSON Lines); one
    the content told must read a frame.  Failing that, the first other
    stream format that reads a frame that is not invalid wins (a JSON Lines
    recording named `.txt` or `.sse`); when none does, the bytes hold no
    stream: UnreadableInput, so that every intake (the form, the API, the
    command) answers the same bytes the same way and none stores a 0-frame
    capture."""
    fmt = detect_format(name, data)
    head = data[:SETTLE_BYTES]
    if fmt not in STREAM_FORMATS or not head.strip():
        return fmt
    frames = _frames_read(fmt, head)
    if frames and (by_content(head) is not None or _some_valid(frames)):
        return fmt
    for other in STREAM_FORMATS:
        if other != fmt and _some_valid(_frames_read(other, head)):
            return other
    raise UnreadableInput(
        f"no stream in these bytes: read as {fmt} they hold no frame of a stream, and they are no "
        "SSE, JSON Lines or JSON array either; choose the format (sse, jsonl, json-array "
        "or har)"
    )


def _some_valid(frames: list[Frame]) -> bool:
    return any(frame.kind is not FrameKind.INVALID for frame in frames)


def _frames_read(fmt: str, head: bytes) -> list[Frame]:
    reader = reader_for(fmt)
    return [*reader.feed(head), *reader.close()]


class StreamAssembler:
    """One stream, one pass: `feed(bytes)` returns the frames those bytes
    completed (already assembled); `close()` returns the frames the end of
    the input completed, and `results` then holds one result per policy.

    Several policies can follow the same frames at once, so the bytes are
    split and parsed once however many results are wanted.  `dialect` is one
    of the dialects or `auto`; `hint` decides `auto` in place of the frames
    (a HAR entry's request URL, `dialect_from_url`).
    """

    def __init__(
        self,
        fmt: str = SSE,
        policies: Iterable[str] = (STRICT,),
        *,
        dialect: str = AUTO_DIALECT,
        hint: str | None = None,
    ) -> None:
        self.reader = reader_for(fmt)
        self.assemblers = {
            policy: Assembler(policy, dialect, hint=hint, sse=fmt == SSE) for policy in policies
        }
        self._feeds = [assembler.feed for assembler in self.assemblers.values()]
        self.results: dict[str, Result] = {}
        # One assembler reading SSE takes the reader's frames as they come,
        # the common ones without a `Frame` made for them (`consume`).
        self._sinks: Sinks | None = None
        if isinstance(self.reader, SSEReader | JSONArrayReader) and len(self.assemblers) == 1:
            (only,) = self.assemblers.values()
            self._sinks = (only.read_chunk, only.feed)

    def feed(self, data: bytes) -> list[Frame]:
        return self._assemble(self.reader.feed(data))

    @property
    def consumes(self) -> bool:
        """Whether `consume` keeps no frame (SSE read for one policy)."""
        return self._sinks is not None

    def consume(self, data: bytes) -> None:
        """`feed`, for a caller that does not want the frames (`assemble`):
        the same result, for less work."""
        if self._sinks is None:
            self._assemble(self.reader.feed(data))
        else:
            self.reader.read(data, self._sinks)  # type: ignore[union-attr]

    def close(self) -> list[Frame]:
        frames = self._assemble(self.reader.close())
        if getattr(self.reader, "cut_between", False):
            for assembler in self.assemblers.values():
                assembler.cut_after_last_frame()
        self.results = {policy: asm.finish() for policy, asm in self.assemblers.items()}
        return frames

    def compact(self) -> None:
        """See `Assembler.compact`: for a caller that stores frames as they
        come and keeps the stream going for a long time."""
        for assembler in self.assemblers.values():
            assembler.compact()

    def _assemble(self, frames: list[Frame]) -> list[Frame]:
        for feed in self._feeds:
            for frame in frames:
                feed(frame)
        return frames


def stream_bytes(data: bytes, fmt: str, entry: int = 0) -> tuple[str, bytes]:
    """The stream inside an input: (sse, jsonl or json-array, its bytes).  A
    HAR gives its `entry`-th event-stream response, read as SSE."""
    fmt, body, _ = stream_source(data, fmt, entry)
    return fmt, body


def stream_source(data: bytes, fmt: str, entry: int = 0) -> tuple[str, bytes, str | None]:
    """As `stream_bytes`, plus the dialect the input names, if any: a HAR
    entry's request URL (`/responses`, `/messages`, ...)."""
    if fmt == HAR:
        streams = read_har(data)
        if not 0 <= entry < len(streams):
            raise UnreadableInput(
                f"HAR entry {entry} out of range: it holds {len(streams)} "
                "event stream(s), counted from 0"
            )
        return SSE, streams[entry].body, dialect_from_url(streams[entry].url)
    return fmt, data, None


def slices(data: bytes, size: int) -> Iterator[bytes]:
    """`data` in pieces of `size` bytes, the way a network might cut it."""
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def read_stream(
    body: bytes,
    fmt: str,
    policies: Iterable[str] = (STRICT,),
    *,
    chunk_bytes: int | None = None,
    dialect: str = AUTO_DIALECT,
    hint: str | None = None,
) -> tuple[list[Frame], dict[str, Result]]:
    """Read a stream (`sse`, `jsonl` or `json-array`) once: all its frames,
    and one result per policy.  Keeps every frame; `assemble` keeps none.
    Lenient asked for beside strict is strict's twin (`lenient_twin`), read
    again only where the policies parted."""
    policies = tuple(policies)
    follows = LENIENT in policies and STRICT in policies
    read = tuple(policy for policy in policies if not (follows and policy == LENIENT))
    stream = StreamAssembler(fmt, read, dialect=dialect, hint=hint)
    frames: list[Frame] = []
    for piece in slices(body, chunk_bytes or len(body) or 1):
        frames.extend(stream.feed(piece))
    frames.extend(stream.close())
    results = stream.results
    if follows:
        results[LENIENT] = lenient_twin(results[STRICT]) or _assemble_as(
            fmt, body, LENIENT, chunk_bytes, dialect, hint
        )
    return frames, {policy: results[policy] for policy in policies}


def assemble(
    data: bytes,
    *,
    fmt: str = AUTO,
    name: str | None = None,
    policy: str = STRICT,
    entry: int = 0,
    chunk_bytes: int | None = None,
    dialect: str = AUTO_DIALECT,
    hint: str | None = None,
) -> Result:
    """Assemble a whole input held in memory.

    `chunk_bytes` feeds the stream that many bytes at a time, the way a
    network might have cut it; the result is the same for every size.
    With `fmt` auto the format is settled by `settle_format`.
    """
    if fmt == AUTO:
        fmt = settle_format(name, data)
    fmt, body, named = stream_source(data, fmt, entry)
    return _assemble_as(fmt, body, policy, chunk_bytes, dialect, hint or named)


def _assemble_as(
    fmt: str,
    body: bytes,
    policy: str,
    chunk_bytes: int | None,
    dialect: str,
    hint: str | None,
) -> Result:
    stream = StreamAssembler(fmt, (policy,), dialect=dialect, hint=hint)
    # Even a whole input is fed in slices: each slice's frames (and their
    # parsed payloads) are dropped as soon as they are assembled, instead of
    # all living at once and keeping the cyclic garbage collector busy.
    size = chunk_bytes or (CONSUME_SLICE if stream.consumes else FEED_SLICE)
    for piece in slices(body, size):
        stream.consume(piece)
    stream.close()
    return stream.results[policy]
