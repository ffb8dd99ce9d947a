"""A live recording writes each started call's argument fragments with the
frames that bring them, so its close writes only what is left; whatever
happened on the way (another process's appends, a failed batch, calls the
assembler made anew), the stored rows are an upload's of the same bytes."""

from functools import partial

import pytest
from live_helpers import chat_chunk

from inspector.assembly import STRICT, assemble
from inspector.captures import fast_rows, models, store, writer
from inspector.captures.fast_rows import insert_rows
from inspector.captures.fragment_rows import FRAGMENT_FIELDS, SCAN_FIELDS, FragmentLog
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def every_batch(monkeypatch):
    """Each batch writes the fragments (a test below sets the interval back)."""
    monkeypatch.setattr(writer, "FRAGMENT_SECONDS", 0.0)


chunk = partial(chat_chunk, model="m-live")


def arguments(index, text):
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": text}}]})


def header(index, call_id, name):
    call = {"index": index, "id": call_id, "function": {"name": name, "arguments": ""}}
    return chunk({"tool_calls": [call]})


# Two calls, each in three fragments; the second's first fragment comes
# before its header (it starts only when its id and name arrive).
PIECES = [
    chunk({"role": "assistant"}),
    header(0, "call_1", "read"),
    arguments(0, '{"pa'),
    arguments(0, 'th":"/a\\u0000"'),
    arguments(0, "}"),
    arguments(1, '{"q"'),
    header(1, "call_2", "find"),
    arguments(1, ':"x y"'),
    arguments(1, "}"),
    chunk({}, finish="tool_calls"),
    b"data: [DONE]\n\n",
]


def rows(capture):
    return list(
        models.Fragment.objects.filter(capture=capture)
        .order_by("position", "seq")
        .values_list("position", *SCAN_FIELDS)
    )


STREAM = b"".join(PIECES)


def uploaded_rows(data=STREAM):
    return rows(store.store_stream(data, stream_format="sse"))


def live_capture():
    return LiveCapture.open(stream_format="sse", source="ingest", title="live")


def test_a_started_calls_fragments_are_stored_with_their_frames(monkeypatch):
    live = live_capture()
    live.append_reads([(piece, 1.0) for piece in PIECES[:4]])
    assert [row[:3] for row in rows(live.capture)] == [(0, 0, 2), (0, 1, 3)]
    live.append_reads([(piece, 2.0) for piece in PIECES[4:6]])
    # The second call's fragment waits for its header: no call 1 yet.
    assert [row[:2] for row in rows(live.capture)] == [(0, 0), (0, 1), (0, 2)]
    live.append_reads([(piece, 3.0) for piece in PIECES[6:8]])
    assert [row[:2] for row in rows(live.capture)][3:] == [(1, 0), (1, 1)]
    live.append_reads([(piece, 4.0) for piece in PIECES[8:]])

    written = fragment_rows_written(monkeypatch)
    live.close()

    assert written == []
    assert rows(live.capture) == uploaded_rows()


def fragment_rows_written(monkeypatch):
    """The fragment rows the later writes insert, seen
    where the writer and the close hand them to `insert_rows` (COPY on
    PostgreSQL and SQLite's own cursor never reach Django's query log)."""
    written = []

    def watched(model, fields, rows, **kwargs):
        rows = list(rows)
        if model is models.Fragment:
            written.extend(rows)
        return insert_rows(model, fields, rows, **kwargs)

    monkeypatch.setattr(store, "insert_rows", watched)  # the close's
    monkeypatch.setattr(fast_rows, "insert_rows", watched)  # the writer's, through `IN_PROCESS`
    return written


def test_fragments_wait_for_the_batch_due_and_the_close_writes_the_rest(monkeypatch):
    monkeypatch.setattr(writer, "FRAGMENT_SECONDS", 3600.0)
    live = live_capture()
    live.append_reads([(piece, 1.0) for piece in PIECES[:4]])
    assert [row[:2] for row in rows(live.capture)] == [(0, 0), (0, 1)]  # the first batch's
    live.append_reads([(piece, 2.0) for piece in PIECES[4:9]])
    assert [row[:2] for row in rows(live.capture)] == [(0, 0), (0, 1)]  # not due yet
    live.append_reads([(piece, 3.0) for piece in PIECES[9:]])
    live.close()
    assert rows(live.capture) == uploaded_rows()


def test_the_close_writes_the_fragments_of_its_last_frames(monkeypatch):
    live = live_capture()
    live.append_reads([(piece, 1.0) for piece in PIECES[:-3]])
    live.writer.feed(b"".join(PIECES[-3:]))  # read, not stored: the close stores them
    written = fragment_rows_written(monkeypatch)
    live.close()
    assert [row[1:3] for row in written] == [(1, 2)]  # call 1's last fragment, "}"
    assert rows(live.capture) == uploaded_rows()


def test_a_capture_another_process_appended_to_is_written_whole_at_its_close():
    live = live_capture()
    live.append_reads([(piece, 1.0) for piece in PIECES[:4]])
    resumed = LiveCapture.resume(live.capture, b"".join(PIECES[:4]), dialect="auto")
    resumed.append_reads([(piece, 2.0) for piece in PIECES[4:]])
    resumed.close()
    assert rows(live.capture) == uploaded_rows()


def test_after_a_failed_batch_the_close_writes_every_fragment_again(monkeypatch):
    live = live_capture()
    live.append_reads([(piece, 1.0) for piece in PIECES[:3]])
    writer = live.writer
    real = writer._store_fragments

    def stored_then_failed(rows):
        real(rows)  # the rows went in; the transaction they went in does not commit
        raise RuntimeError("the database went away")

    monkeypatch.setattr(writer, "_store_fragments", stored_then_failed)
    with pytest.raises(RuntimeError):
        live.append_reads([(PIECES[3], 2.0)])
    monkeypatch.undo()
    live.append_reads([(piece, 3.0) for piece in PIECES[4:]])
    live.close()
    # The assembler read the failed batch's frame: the calls hold its fragment.
    assert rows(live.capture) == uploaded_rows()


def test_rows_of_a_call_the_assembler_made_anew_are_replaced():
    """`FragmentLog.stale`: a position whose call is another object than the
    one its rows were written from (or is gone) is written again."""
    capture = live_capture().capture
    first = assemble(b"".join(PIECES), fmt="sse")
    log = FragmentLog()
    insert_rows(models.Fragment, FRAGMENT_FIELDS, log.new_rows(capture.pk, first.calls, "chat"))
    other = b"".join([PIECES[0], header(0, "call_9", "write"), arguments(0, '{"z":1}')])
    again = assemble(other + PIECES[-2] + PIECES[-1], fmt="sse")
    assert len(again.calls) == 1 and again.calls[0] is not first.calls[0]

    store._store_fragments(capture, again, log)

    assert [row[:2] + row[3:5] for row in rows(capture)] == [(0, 0, 0, '{"z":1}')]


def test_a_recovered_capture_replaces_the_rows_a_dead_process_left():
    live = live_capture()
    live.append_reads([(piece, 1.0) for piece in PIECES[:4]])
    capture = models.Capture.objects.get(pk=live.capture.pk)
    data = b"".join(PIECES[:4])
    frames, results = store.assemble_stream(data, "sse")
    store.close_capture(capture, data, "m-live", results)  # as recovery closes it: no log
    assert rows(capture) == uploaded_rows(data)
    assert results[STRICT].calls  # the rows replaced were that call's
