"""minimize() on JSON-array streams (Gemini without `alt=sse`): the result is
an array of the same shape (closed, left open, cut, one whole object) that
lost whole elements, never half of one; it re-assembles with the original's
failure signature and is 1-minimal by elements."""

from __future__ import annotations

import orjson
import pytest
from gemini_arrays import CUT, REFUSED, RENAMED, UNCLOSED, WHOLE, elements_of, join_elements

from inspector.assembly import assemble
from inspector.minimize import failure_signature, minimize
from inspector.minimize.signature import CAUSE_CUT, CAUSE_UNCLOSED

FMT = "json-array"


@pytest.fixture(scope="module")
def minimized():
    return {name: minimize(data, FMT) for name, data in REFUSED.items()}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_keeps_the_signature_and_is_smaller(minimized, name):
    data, found = REFUSED[name], minimized[name]
    wanted = failure_signature(data, FMT)
    assert wanted is not None and wanted.dialect == "gemini"
    assert found.fmt == FMT
    assert found.signature == wanted
    assert failure_signature(found.data, FMT) == wanted
    assert assemble(found.data, fmt=FMT).refusal.code == wanted.code
    assert found.frames < found.original_frames or len(found.data) < len(data)
    assert len(found.data) < len(data)
    assert not found.timed_out


@pytest.mark.parametrize("name", sorted(set(REFUSED) - {"unclosed", "cut", "whole"}))
def test_a_closed_array_stays_a_valid_json_array(minimized, name):
    found = minimized[name]
    elements = orjson.loads(found.data)
    assert type(elements) is list and len(elements) == found.frames


@pytest.mark.parametrize("name", sorted(set(REFUSED) - {"whole"}))  # whole: one object
def test_one_minimal_by_elements(minimized, name):
    found = minimized[name]
    elements, closed = elements_of(found.data)
    assert len(elements) == found.frames
    wanted = found.signature
    for i in range(len(elements)):
        smaller = join_elements(elements[:i] + elements[i + 1 :], closed)
        assert failure_signature(smaller, FMT) != wanted, f"element {i} can go"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_elements_are_kept_verbatim_or_rewritten_compactly(minimized, name):
    original, _ = elements_of(REFUSED[name])
    elements, _ = elements_of(minimized[name].data)
    for i, element in enumerate(elements):
        if element in original:
            continue
        assert orjson.dumps(orjson.loads(element)).decode() == element, i


def test_an_unclosed_array_stays_unclosed():
    found = minimize(UNCLOSED, FMT)
    assert found.signature.cause == CAUSE_UNCLOSED
    assert found.data.startswith(b"[") and not found.data.rstrip().endswith(b"]")
    orjson.loads(found.data + b"]")  # one `]` away from a valid array


def test_a_cut_element_stays_cut_and_whole_elements_go():
    found = minimize(CUT, FMT)
    assert found.signature.cause == CAUSE_CUT
    elements, closed = elements_of(found.data)
    assert not closed
    cut = elements[-1]
    assert CUT.decode().endswith(cut)  # the cut element, as the input ended it
    for element in elements[:-1]:
        assert type(orjson.loads(element)) is dict


def test_a_whole_body_stays_one_object():
    found = minimize(WHOLE, FMT)
    assert type(orjson.loads(found.data)) is dict
    assert found.frames == 1
    assert found.signature.code == "MALFORMED_TOOL_CALL"


def test_the_renamed_call_keeps_both_names_and_loses_the_noise():
    found = minimize(RENAMED, FMT)
    assert found.signature.names_present == (True, True)
    assert b"Let me look" not in found.data and b"usageMetadata" not in found.data
    assert found.frames == 2
