"""Incremental UTF-8 decoding and line splitting, shared by the SSE and JSON
Lines readers.

Theory of operation: bytes may be cut anywhere, inside a multi-byte character
or between the CR and LF of a CRLF.  The incremental decoder holds back an
unfinished character (and turns invalid bytes into U+FFFD); `_skip_lf`
remembers a CR that ended the previous piece so that an LF opening the next
piece is not read as a second line ending.  After that, CRLF and lone CR are
rewritten to LF and the text is split on LF.  An unfinished last line is
kept as a list of pieces, so a very long line fed in small pieces costs linear
time, not quadratic.
"""

from __future__ import annotations

import codecs

BOM = "\ufeff"


class LineSplitter:
    """Bytes in, complete lines (without their line ending) out."""

    __slots__ = ("_decoder", "_at_start", "_skip_lf", "_pending")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._at_start = True
        self._skip_lf = False
        self._pending: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        return self._split(self._decoder.decode(data))

    def started(self) -> None:
        """The stream's first bytes were read elsewhere (a BOM there dropped):
        a U+FEFF from now on is text."""
        self._at_start = False

    def close(self) -> tuple[list[str], str | None]:
        """Flush the decoder: the remaining complete lines, and the last line
        when the input did not end it (None when it did)."""
        lines = self._split(self._decoder.decode(b"", True))
        tail = "".join(self._pending) if self._pending else None
        self._pending = []
        return lines, tail

    def _split(self, text: str) -> list[str]:
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            if text[0] == BOM:
                text = text[1:]
        if self._skip_lf and text[:1] == "\n":
            text = text[1:]
        self._skip_lf = text[-1:] == "\r"
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            if text:
                self._pending.append(text)
            return []
        lines = text.split("\n")
        last = lines.pop()
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = "".join(self._pending)
            self._pending = []
        if last:
            self._pending.append(last)
        return lines
