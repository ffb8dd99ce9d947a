"""The JSON-array reader's fast path (element after element, the end found
by the separator the stream repeats or by expression, each element parsed
once) reads the elements the array holds, whatever the separators (changing
from element to element), whatever look-alike ends strings hold, and however
the bytes are cut."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.assembly import FrameKind, JSONArrayReader
from inspector.assembly.stream import slices

SEPARATORS = [",", ", ", ",\r\n", "\n,\r\n", ",\n  ", " ,"]
LOOK_ALIKES = ["}", "},{", "}, {", "}]", "{", '\\"},{\\"', "]", "x"]

elements = st.fixed_dictionaries(
    {
        "candidates": st.lists(
            st.fixed_dictionaries({"text": st.sampled_from(LOOK_ALIKES)}), max_size=2
        )
    },
    optional={"n": st.integers(0, 9), "nested": st.just({"a": [{"b": "}"}]})},
)


def read(data: bytes, size: int) -> list:
    reader = JSONArrayReader()
    frames = []
    for piece in slices(data, size):
        frames.extend(reader.feed(piece))
    frames.extend(reader.close())
    assert reader.closed and not reader.cut_between
    assert all(frame.kind is FrameKind.CHUNK for frame in frames)
    assert [frame.number for frame in frames] == list(range(len(frames)))
    return [frame.payload for frame in frames]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(elements, st.sampled_from(SEPARATORS)), max_size=12),
    st.integers(1, 64),
)
def test_every_element_whatever_the_separators_and_the_cuts(items, size):
    body = "".join(
        orjson.dumps(element).decode() + (separator if i < len(items) - 1 else "")
        for i, (element, separator) in enumerate(items)
    )
    data = ("[" + body + "]").encode()
    wanted = orjson.loads(data)
    assert read(data, len(data) or 1) == wanted
    assert read(data, size) == wanted


def test_a_separator_that_stops_repeating_is_looked_for_no_more():
    """The stream's separator, learned, then others: each element still ends
    where it ends (the learned one is forgotten where it is not found)."""
    first = [orjson.dumps({"n": i}).decode() for i in range(4)]
    then = [orjson.dumps({"m": i, "s": "},{"}).decode() for i in range(4)]
    data = ("[" + ",\r\n".join(first) + ", " + ", ".join(then) + "]").encode()
    assert read(data, len(data)) == orjson.loads(data)
