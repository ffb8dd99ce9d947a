"""The SSE reader's bytes-level path (whole blocks read as bytes while the
stream has LF endings only) reads exactly the frames the line reader does.

The line reader is what a stream with CRLF endings goes through from its
first byte, and it turns CRLF into LF before anything else: the same stream
written with CRLF is the reference for the LF one.
"""

from __future__ import annotations

import pytest
from test_assembly_sse import read_sse

from inspector.assembly import SSEReader

MIXED = (
    "\ufeff"
    'data: {"choices":[{"index":0,"delta":{"content":"h\u00e9"}}]}\n\n'
    'event: response.created\ndata: {"type":"response.created"}\n\n'
    "\n\n\n"
    ": keep-alive\n\n"
    'data: {"a":\ndata: 1}\n\n'
    "data: [DONE]\n\n"
    'data: {"not json"\n\n'
    'data: {"error":{"message":"x"}}\n\n'
    'data: {"type":"ping"}\n\n'
    'event: named\ndata: {"x":1}\nid: 7\n\n'
    'id: 3\ndata: {"y":2}\n\n'
    "event: only\n\n"
    'data:{"no":"space"}\n\n'
    'data: {"b":1}\n\n\ndata: {"after three LF":1}\n\n'
    "data: \n\n"
    "data: {bad\n\n"
    'data: {"multi":\ndata: 2}\n\n'
    'data: {"z":[]}\n\n: between\n\ndata: {"cut":'
)

INVALID_UTF8 = (
    b'data: {"a":"\xff\xfe"}\n\nevent: \xe2\x82\ndata: {"b":1}\n\ndata: {"c":"\xe2\x82"}\n\n'
)


def frames_of(data: bytes, pieces: int | None = None) -> list[tuple]:
    frames = read_sse(data, pieces=pieces)
    return [
        (f.number, f.kind, f.raw, f.data, f.payload, f.event, f.unterminated, f.parse_failed)
        for f in frames
    ]


@pytest.mark.parametrize("pieces", [None, 1, 2, 3, 7, 64])
def test_lf_blocks_read_as_bytes_give_the_frames_of_the_line_reader(pieces):
    lf = MIXED.encode()
    crlf = MIXED.replace("\n", "\r\n").encode()
    expected = frames_of(crlf)
    assert len(expected) == 18  # `event: only` and `data: ` make no frame
    assert frames_of(lf, pieces) == expected


@pytest.mark.parametrize("pieces", [None, 1, 5])
def test_invalid_utf8_in_a_block_read_as_bytes_is_replaced_as_the_line_reader_does(pieces):
    expected = frames_of(INVALID_UTF8.replace(b"\n", b"\r\n"))
    assert [frame[2] for frame in expected][1] == 'event: \ufffd\ndata: {"b":1}'
    assert frames_of(INVALID_UTF8, pieces) == expected


@pytest.mark.parametrize("cut", range(1, len(MIXED.encode()), 37))
def test_a_cr_arriving_mid_stream_hands_over_to_the_line_reader_at_a_block_boundary(cut):
    lf = MIXED.encode()
    data = lf[:cut] + lf[cut:].replace(b"\n", b"\r\n")
    reader = SSEReader()
    frames = reader.feed(data[:cut]) + reader.feed(data[cut:]) + reader.close()
    got = [(f.number, f.kind, f.raw, f.data, f.payload, f.event) for f in frames]
    assert got == [frame[:6] for frame in frames_of(MIXED.replace("\n", "\r\n").encode())]


def test_a_byte_order_mark_split_over_feeds_is_dropped_once_and_only_at_the_start():
    # The later one is text: its line is a field named "\ufeffdata", ignored.
    data = "\ufeffdata: {}\n\ndata: {}\n\n\ufeffdata: {}\n\n: c\n\n".encode()
    frames = frames_of(data, 1)
    assert [(f[0], f[2]) for f in frames] == [(0, "data: {}"), (1, "data: {}"), (2, ": c")]
