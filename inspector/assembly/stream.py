"""The sans-I/O facade: bytes in, in pieces of any size; frames, events and a
result out.  The caller owns all I/O (files, sockets, the database)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .assembler import STRICT, Assembler
from .dialect import AUTO_DIALECT, dialect_from_url
from .errors import UnreadableInput
from .formats import AUTO, HAR, JSON_ARRAY, JSONL, SSE, STREAM_FORMATS, detect_format
from .frames import Frame
from .har import read_har
from .jsonarray import JSONArrayReader
from .readers import JSONLReader, SSEReader
from .result import Result

FEED_SLICE = 16 * 1024


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
        if fmt == SSE:
            self.reader: SSEReader | JSONLReader | JSONArrayReader = SSEReader()
        elif fmt == JSONL:
            self.reader = JSONLReader()
        elif fmt == JSON_ARRAY:
            self.reader = JSONArrayReader()
        else:
            raise UnreadableInput(f"a stream is read as sse, jsonl or json-array, not {fmt!r}")
        self.assemblers = {
            policy: Assembler(policy, dialect, hint=hint, sse=fmt == SSE) for policy in policies
        }
        self._feeds = [assembler.feed for assembler in self.assemblers.values()]
        self.results: dict[str, Result] = {}

    def feed(self, data: bytes) -> list[Frame]:
        return self._assemble(self.reader.feed(data))

    def close(self) -> list[Frame]:
        frames = self._assemble(self.reader.close())
        if getattr(self.reader, "cut_between", False):
            for assembler in self.assemblers.values():
                assembler.cut_after_last_frame()
        self.results = {policy: asm.finish() for policy, asm in self.assemblers.items()}
        return frames

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
    and one result per policy.  Keeps every frame; `assemble` keeps none."""
    stream = StreamAssembler(fmt, policies, dialect=dialect, hint=hint)
    frames: list[Frame] = []
    for piece in slices(body, chunk_bytes or len(body) or 1):
        frames.extend(stream.feed(piece))
    frames.extend(stream.close())
    return frames, stream.results


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
    With `fmt` auto, when the chosen format reads no frame at all from input
    that is not blank, the other stream formats are tried in turn and the
    first that reads a frame wins.
    """
    detected = fmt == AUTO
    if detected:
        fmt = detect_format(name, data)
    fmt, body, named = stream_source(data, fmt, entry)
    hint = hint or named
    result = _assemble_as(fmt, body, policy, chunk_bytes, dialect, hint)
    if detected and result.frames == 0 and body.strip():
        for other in STREAM_FORMATS:
            if other != fmt:
                retry = _assemble_as(other, body, policy, chunk_bytes, dialect, hint)
                if retry.frames:
                    return retry
    return result


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
    for piece in slices(body, chunk_bytes or FEED_SLICE):
        stream.feed(piece)
    stream.close()
    return stream.results[policy]
