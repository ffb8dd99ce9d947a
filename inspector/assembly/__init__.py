"""Stream Inspector's assembler: a pure, sans-I/O core.

Bytes (SSE, JSON Lines, or a HAR's event streams) go in, in pieces of any
size; frames, events and a `Result` come out, as the project's assembly spec
lays down.  Nothing here imports Django, a database or the network.

    from inspector.assembly import assemble
    result = assemble(data, fmt="sse", policy="strict")
    result.to_dict()   # the document `manage.py assemble` prints
"""

from .assembler import LENIENT, POLICIES, STRICT, Assembler
from .errors import UnreadableInput
from .formats import AUTO, FORMATS, HAR, JSONL, SSE, detect_format
from .frames import Frame, FrameKind
from .har import HarStream, read_har
from .readers import JSONLReader, SSEReader
from .result import ANOMALY_KINDS, DROP_REASONS, REFUSAL_CODES, RETRYABLE, Call, Result
from .scanner import ArgumentScanner
from .stream import StreamAssembler, assemble, read_stream, slices, stream_bytes

__all__ = [
    "ANOMALY_KINDS",
    "AUTO",
    "DROP_REASONS",
    "FORMATS",
    "HAR",
    "JSONL",
    "LENIENT",
    "POLICIES",
    "REFUSAL_CODES",
    "RETRYABLE",
    "SSE",
    "STRICT",
    "ArgumentScanner",
    "Assembler",
    "Call",
    "Frame",
    "FrameKind",
    "HarStream",
    "JSONLReader",
    "Result",
    "SSEReader",
    "StreamAssembler",
    "UnreadableInput",
    "assemble",
    "read_stream",
    "slices",
    "detect_format",
    "read_har",
    "stream_bytes",
]
