"""minimize_capture() stores the minimized stream as a capture linked to its
original; export_files() gives any capture as a regression case."""

from __future__ import annotations

import json

import gemini_arrays
import pytest
from minimize_streams import CASES, OK

from inspector.captures.minimizing import export_files, minimize_capture
from inspector.captures.models import Capture
from inspector.captures.store import store_stream
from inspector.minimize import NotRefused, failure_signature, minimize

pytestmark = pytest.mark.django_db
BY_NAME = {(code, variant): (fmt, data) for code, variant, fmt, data in CASES}


def stored(key, **meta) -> Capture:
    fmt, data = BY_NAME[key]
    return store_stream(data, stream_format=fmt, **meta)


def test_minimize_capture_links_the_new_capture():
    original = stored(("IDENTITY_CONFLICT", "renamed_call"), title="Renamed", source="proxy")
    derived = minimize_capture(original, seconds=10)
    derived.refresh_from_db()
    assert derived.pk != original.pk
    assert derived.derived_from_id == original.pk
    assert derived.derivation == "minimized: keeps IDENTITY_CONFLICT"
    assert derived.title == "Renamed (minimized)"
    assert derived.source == "proxy"
    assert derived.outcome == "refused" and derived.refusal_code == "IDENTITY_CONFLICT"
    assert bytes(derived.raw) == minimize(bytes(original.raw), "sse").data
    assert derived.byte_size < original.byte_size
    assert derived.frames.count() == derived.frame_count < original.frame_count
    assert list(original.derivatives.all()) == [derived]


def test_jsonl_capture_stays_jsonl():
    original = stored(("AMBIGUOUS_CONTINUATION", "no_index_jsonl"))
    derived = minimize_capture(original)
    assert derived.stream_format == "jsonl" and derived.input_format == "jsonl"
    assert derived.refusal_code == "AMBIGUOUS_CONTINUATION"
    assert derived.title == "Untitled capture (minimized)"


def test_the_setting_is_the_default_budget(settings):
    settings.INSPECTOR_MINIMIZE_SECONDS = 0
    original = stored(("INVALID_FRAME", "not_json"))
    derived = minimize_capture(original)  # no time at all: the stream as it was
    assert bytes(derived.raw) == bytes(original.raw)
    assert derived.refusal_code == "INVALID_FRAME"


def test_an_ok_capture_has_nothing_to_minimize():
    capture = store_stream(OK["one_call"], stream_format="sse")
    with pytest.raises(NotRefused):
        minimize_capture(capture)
    assert Capture.objects.count() == 1


def test_export_files_of_original_and_minimized():
    original = stored(("MALFORMED_TOOL_CALL", "id_never_arrives"), title="No id: write")
    files = export_files(original)
    assert set(files) == {"No_id_write.sse", "No_id_write.expect.json"}
    assert files["No_id_write.sse"] == bytes(original.raw)
    case = json.loads(files["No_id_write.expect.json"])
    assert case["expect"]["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert "No id: write" in case["about"]

    derived = minimize_capture(original)
    files = export_files(derived, name="malformed")
    case = json.loads(files["malformed.expect.json"])
    assert files["malformed.sse"] == bytes(derived.raw)
    assert case["expect"]["refusal"]["code"] == "MALFORMED_TOOL_CALL"
    assert "minimized: keeps MALFORMED_TOOL_CALL" in case["about"]


def test_export_files_of_a_jsonl_capture_and_lenient():
    capture = stored(("AMBIGUOUS_CONTINUATION", "no_index_jsonl"))
    files = export_files(capture, policy="lenient")
    name = f"capture-{capture.pk}"
    assert files[f"{name}.sse"].startswith(b"data: {")
    case = json.loads(files[f"{name}.expect.json"])
    assert case["argv"] == ["--policy", "lenient"]
    # lenient guesses the continuation for call_y, so call_x keeps "{" alone
    assert case["expect"]["policy"] == "lenient"
    assert case["expect"]["refusal"]["code"] == "INVALID_ARGUMENTS"
    assert [a["kind"] for a in case["expect"]["anomalies"]] == ["guessed_continuation"]


def test_a_json_array_capture_stays_a_json_array_and_exports_as_sse():
    original = store_stream(gemini_arrays.TYPE_CLASH, stream_format="json-array")
    derived = minimize_capture(original)
    assert derived.stream_format == "json-array" and derived.input_format == "json-array"
    assert derived.refusal_code == "INVALID_ARGUMENTS" and derived.dialect == "gemini"
    assert type(json.loads(bytes(derived.raw))) is list
    wanted = failure_signature(gemini_arrays.TYPE_CLASH, "json-array")
    assert failure_signature(bytes(derived.raw), "json-array") == wanted
    files = export_files(derived, name="clash")
    assert failure_signature(files["clash.sse"], "sse") == wanted
    assert json.loads(files["clash.expect.json"])["expect"]["frames"] == derived.frame_count
