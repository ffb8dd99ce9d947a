"""Stream Inspector's assembler: a pure, sans-I/O core.

Bytes (SSE, JSON Lines, a JSON array, or a HAR's event streams) of any of
four wire formats (chat completions, Responses, Anthropic Messages, Gemini)
go in, in pieces of any
size; frames, events and a `Result` come out, as the project's assembly spec
lays down.  Nothing here imports Django, a database or the network.

    from inspector.assembly import assemble
    result = assemble(data, fmt="sse", policy="strict")
    result.to_dict()   # the document `manage.py assemble` prints
"""

from .assembler import LENIENT, POLICIES, STRICT, STRICT_ONLY_REFUSALS, Assembler, lenient_twin
from .dialect import AUTO_DIALECT, DIALECTS, dialect_from_url, dialect_of
from .errors import UnreadableInput
from .formats import AUTO, FORMATS, HAR, JSON_ARRAY, JSONL, SSE, detect_format
from .frames import Frame, FrameKind
from .har import HarStream, read_har
from .jsonarray import JSONArrayReader
from .readers import JSONLReader, SSEReader
from .result import ANOMALY_KINDS, DROP_REASONS, KINDS, REFUSAL_CODES, RETRYABLE, Call, Result
from .scanner import ArgumentScanner
from .stream import (
    StreamAssembler,
    assemble,
    read_stream,
    settle_format,
    slices,
    stream_bytes,
    stream_source,
)

__all__ = [
    "ANOMALY_KINDS",
    "AUTO",
    "AUTO_DIALECT",
    "DIALECTS",
    "JSON_ARRAY",
    "JSONArrayReader",
    "KINDS",
    "dialect_from_url",
    "dialect_of",
    "stream_source",
    "DROP_REASONS",
    "FORMATS",
    "HAR",
    "JSONL",
    "LENIENT",
    "STRICT_ONLY_REFUSALS",
    "lenient_twin",
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
    "settle_format",
    "read_har",
    "stream_bytes",
]
