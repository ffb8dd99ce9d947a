"""The integer XOR masker daphne's websockets unmask small frames with
(`inspector/websocket_masking.py`) gives what autobahn's own maskers give,
in one piece or many."""

from __future__ import annotations

import pytest
from autobahn.websocket import protocol, xormasker
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector import asgi  # noqa: F401 - installs the masker, as daphne's start does
from inspector.websocket_masking import SMALL_FRAME, IntegerXorMasker, create_xor_masker


def autobahn_masked(mask: bytes, data: bytes) -> bytes:
    return xormasker.create_xor_masker(mask, len(data)).process(data)


def test_the_rfc_example_unmasks_to_hello():
    # RFC 6455 section 5.7: a masked "Hello" from a client.
    mask, payload = bytes([0x37, 0xFA, 0x21, 0x3D]), bytes([0x7F, 0x9F, 0x4D, 0x51, 0x58])
    assert IntegerXorMasker(mask).process(payload) == b"Hello"


@settings(max_examples=300, deadline=None)
@given(
    mask=st.binary(min_size=4, max_size=4),
    data=st.binary(max_size=3000),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6),
)
def test_pieces_mask_as_autobahn_masks_the_whole(mask, data, cuts):
    masker = IntegerXorMasker(mask)
    edges = sorted({0, len(data), *(cut for cut in cuts if cut < len(data))})
    pieces = [masker.process(data[a:b]) for a, b in zip(edges, edges[1:], strict=False)]
    assert b"".join(pieces) == autobahn_masked(mask, data)
    assert masker.pointer() == len(data)
    masker.reset()
    assert masker.pointer() == 0 and masker.process(data) == autobahn_masked(mask, data)


def test_masking_twice_gives_the_payload_back():
    mask, data = b"\x00\xff\x10\x01", bytes(range(256)) * 3
    assert IntegerXorMasker(mask).process(IntegerXorMasker(mask).process(data)) == data


def test_only_small_frames_get_the_integer_masker():
    mask = b"abcd"
    assert isinstance(create_xor_masker(mask, SMALL_FRAME - 1), IntegerXorMasker)
    assert not isinstance(create_xor_masker(mask, SMALL_FRAME), IntegerXorMasker)
    assert not isinstance(create_xor_masker(mask, None), IntegerXorMasker)
    big = bytes(range(256)) * 20
    assert create_xor_masker(mask, len(big)).process(big) == autobahn_masked(mask, big)


def test_a_mask_is_four_bytes():
    with pytest.raises(ValueError):
        IntegerXorMasker(b"abc")


def test_the_asgi_module_installs_it_where_autobahn_looks_it_up():
    assert protocol.create_xor_masker is create_xor_masker
