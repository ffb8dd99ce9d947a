"""LiveCapture: bytes stored as they arrive, assembled in the same pass as an
upload would be, and one batch message per read."""

import math
from functools import partial

import pytest
from live_helpers import chat_chunk

from inspector.assembly import assemble
from inspector.assembly.jsontext import dumps
from inspector.captures import models, store
from inspector.captures.timeline_data import arrival_times
from inspector.live.broadcast import merge_batches
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db


chunk = partial(chat_chunk, model="m-live")


def call_stream():
    header = {"index": 0, "id": "call_1", "function": {"name": "read", "arguments": ""}}
    return [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [header]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th":"/a"}'}}]}),
        chunk({}, finish="tool_calls"),
        b"data: [DONE]\n\n",
    ]


def test_frames_are_stored_as_they_arrive_and_the_result_matches_an_upload():
    live = LiveCapture.open(stream_format="sse", source="ingest", title="live")
    pieces = call_stream()
    for number, piece in enumerate(pieces):
        batch = live.append(piece)
        assert [f["number"] for f in batch["frames"]] == [number]
        assert live.capture.frames.count() == number + 1
    assert models.Capture.objects.get(pk=live.capture.pk).outcome == "live"

    finished = live.close()

    capture = models.Capture.objects.get(pk=live.capture.pk)
    data = b"".join(pieces)
    expected = assemble(data, fmt="sse").to_dict()
    assert finished["outcome"] == capture.outcome == "ok"
    assert bytes(capture.raw) == data
    assert capture.model == "m-live"
    assert capture.finished is not None
    stored = capture.assemblies.get(policy="strict").result_json
    assert stored == dumps(expected).decode()
    assert capture.frames.get(number=2).calls == [0]
    assert all(f.arrived_ms is not None for f in capture.frames.all())


def test_a_read_that_completes_no_frame_sends_nothing():
    live = LiveCapture.open(stream_format="sse")
    first = call_stream()[0]
    assert live.append(first[:10]) is None
    batch = live.append(first[10:])
    assert [f["number"] for f in batch["frames"]] == [0]


def test_batches_carry_each_touched_calls_card_rendered_by_the_page_template():
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = iter(range(0, 10**6, 10)).__next__  # no card held back
    batches = [live.append(piece) for piece in call_stream()[:4]]
    calls = [call for batch in batches if batch for call in batch["calls"]]
    assert {call["position"] for call in calls} == {0}
    card = calls[-1]["html"]
    assert card.strip().startswith('<article class="call card" id="call-0">')
    assert '<code class="call-name">read</code>' in card and "call_1" in card
    assert 'id="frag-0-0"' in card and 'id="frag-0-1"' in card
    assert '<span class="chip ok">complete</span>' in card


def test_a_cut_stream_closes_refused_with_every_frame_kept():
    live = LiveCapture.open(stream_format="sse")
    for piece in call_stream()[:3]:
        live.append(piece)
    live.append(b'data: {"choices": [{"index": 0, "delta": {"tool_')
    finished = live.close()
    capture = models.Capture.objects.get(pk=live.capture.pk)
    assert finished["refusal"]["code"] == capture.refusal_code == "INCOMPLETE_STREAM"
    assert capture.frame_count == capture.frames.count() == 4
    assert capture.retryable is True


def test_a_refusal_is_announced_in_the_batch_that_decides_it():
    live = LiveCapture.open(stream_format="sse")
    batch = live.append(b"data: [1, 2]\n\n")
    assert batch["refusal"]["code"] == "INVALID_FRAME"


def test_merged_batches_keep_every_frame_in_order():
    live = LiveCapture.open(stream_format="sse")
    batches = [live.append(piece) for piece in call_stream()[1:4]]
    merged = merge_batches(merge_batches(batches[0], batches[1]), batches[2])
    assert [f["number"] for f in merged["frames"]] == [0, 1, 2]
    assert [call["position"] for call in merged["calls"]] == [0]


@pytest.mark.parametrize("cut", [False, True])
def test_the_close_times_its_timeline_by_the_arrivals_it_held_as_the_frames_stored_say(
    cut, monkeypatch
):
    """The writer keeps each frame's arrival time as it stores it, so the
    close's timeline reads none back: what it held is what the stored frames
    say, the frame only the end completes (a cut stream's last) included."""
    live = LiveCapture.open(stream_format="sse", source="ingest", title="live")
    pieces = call_stream()
    if cut:  # no [DONE], and the last frame unterminated: only the close completes it
        pieces = [*pieces[:-2], pieces[-2].removesuffix(b"\n\n")]
    for at, start in enumerate(range(0, len(pieces), 2)):  # reads of two frames, 5 ms apart
        live.append_reads([(piece, 1000.0 + at * 0.005) for piece in pieces[start : start + 2]])
    assert len(live.writer._arrival_times()) == len(pieces) - cut

    def read_back(capture):
        raise AssertionError("the close read the arrival times back")

    monkeypatch.setattr(store, "arrival_times", read_back)
    live.close()
    held = live.writer._arrival_times()
    capture = models.Capture.objects.get(pk=live.capture.pk)
    stored = arrival_times(capture)
    assert len(held) == capture.frame_count == len(pieces)
    assert list(held) == list(stored) and not any(math.isnan(ms) for ms in stored)
    time = capture.assemblies.get(policy="strict").timeline["time"]
    assert (time["start"], time["end"]) == (min(stored), max(stored))


def test_a_writer_that_took_over_stored_frames_reads_their_times_back():
    live = LiveCapture.open(stream_format="sse", source="ingest", title="live")
    pieces = call_stream()
    live.append_reads([(piece, 1000.0) for piece in pieces[:3]])
    resumed = LiveCapture.resume(live.capture, b"".join(pieces[:3]), dialect="auto")
    resumed.append_reads([(piece, 1000.5) for piece in pieces[3:]])
    assert resumed.writer._arrival_times() is None  # the first three are another's
    resumed.close()
    capture = models.Capture.objects.get(pk=live.capture.pk)
    stored = arrival_times(capture)
    time = capture.assemblies.get(policy="strict").timeline["time"]
    assert (time["start"], time["end"]) == (min(stored), max(stored))
    assert len(set(stored)) == 2  # each process's own clock: its frames' times, as stored


def test_a_batch_that_failed_to_store_leaves_the_close_reading_times_back(monkeypatch):
    live = LiveCapture.open(stream_format="sse", source="ingest", title="live")
    pieces = call_stream()
    live.append_reads([(piece, 1000.0) for piece in pieces[:2]])

    def broken(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(live.writer, "store", broken)
    with pytest.raises(RuntimeError):
        live.append_reads([(piece, 1000.5) for piece in pieces[2:4]])
    assert live.writer._arrival_times() is None  # two frames held, four assembled
