"""A viewer who joins a capture this process records gets its snapshot from
the recording's memory (`LiveCapture.snapshot`): the rows it stored last and
every call's card, no query; the same snapshot the database gives
(`snapshot.SnapshotPager`), which a viewer elsewhere, or one needing rows no
longer kept, still reads.  (Not quite the same for a frame read before its
call's header, alone in its batch: its row, as the watching viewers got it,
names the call only from the close on; and a call's card is the one the
watching viewers were sent, up to RENDER_INTERVAL after the call changed.)"""

import asyncio
import threading
import time

import pytest
from channels.testing import WebsocketCommunicator
from live_helpers import chat_chunk as chunk

from inspector.asgi import application
from inspector.captures import models
from inspector.captures.pages import live_cards
from inspector.live import session
from inspector.live.recorder import SocketRecording, recording_of
from inspector.live.snapshot import DONE, SnapshotPager


def two_calls() -> list[bytes]:
    """Frame 0 a role, 1-3 call 0, 4 text, 5-6 call 1, 7 a dropped delta (an
    anomaly mark), still live: no finish."""
    head_a = {"index": 0, "id": "call_a", "function": {"name": "grep", "arguments": ""}}
    head_b = {"index": 1, "id": "call_b", "function": {"name": "read", "arguments": '{"p'}}
    return [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [head_a]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]}),
        chunk({"content": "thinking"}),
        chunk({"tool_calls": [head_b]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'ath": 1}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "", "function": {}}]}),
    ]


def recorded(pieces: list[bytes]) -> session.LiveCapture:
    """A live capture fed as a recorder feeds it: a batch of reads at a time,
    its rows kept."""
    live = session.LiveCapture.open(stream_format="sse", title="t", keep_rows=True)
    for at in range(0, len(pieces), 3):
        live.append_reads([(piece, time.monotonic()) for piece in pieces[at : at + 3]])
    return live


def from_database(capture: models.Capture, after: int) -> dict:
    """The snapshot a viewer elsewhere reads, its pages as one message."""
    pager = SnapshotPager(models.Capture.objects.get(pk=capture.pk), after)
    frames, last = [], None
    while (page := pager.next_page()) is not DONE:
        if page is not None:
            frames += page["frames"]
            last = page
    return {**last, "frames": frames}


def shown(message: dict) -> dict:
    """What a snapshot shows: rows, cards, refusal."""
    return {
        "frames": [(frame["number"], frame["html"]) for frame in message["frames"]],
        "calls": [(call["position"], call["html"]) for call in message["calls"]],
        "refusal": message["refusal"],
        "refusal_html": message["refusal_html"],
    }


@pytest.mark.django_db
@pytest.mark.parametrize("after", [-1, 3, 6])
def test_the_snapshot_from_memory_is_the_one_the_database_gives(after):
    live = recorded(two_calls())
    memory, _ = live.snapshot(after)
    assert memory["type"] == "snapshot" and memory["more"] is False
    assert shown(memory) == shown(from_database(live.capture, after))
    numbers = [frame["number"] for frame in memory["frames"]]
    # After the viewer's last frame; before it, the rows of its page with calls or marks.
    assert numbers == {-1: list(range(8)), 3: [1, 2, 3, 4, 5, 6, 7], 6: [1, 2, 3, 5, 6, 7]}[after]
    assert [position for position, _ in shown(memory)["calls"]] == [0, 1]


@pytest.mark.django_db
def test_the_snapshot_from_memory_makes_no_query(django_assert_num_queries):
    live = recorded(two_calls())
    with django_assert_num_queries(0):
        assert live.snapshot(-1) is not None


@pytest.mark.django_db
def test_the_snapshot_leaves_the_watching_viewers_cards_as_they_were():
    """Rendering every card for a joiner does not count as the watchers'
    render: the card changed since is still due to them."""
    live = recorded(two_calls())
    live.snapshot(-1)
    assert live.held_back
    held = live.held_cards()
    assert held is not None and [call["position"] for call in held["calls"]] == [0, 1]


@pytest.mark.django_db
def test_a_joiner_is_given_the_cards_the_watchers_were_sent_without_a_render(monkeypatch):
    """Rendering them again for each joiner cost about 3 ms a card of a long
    call, and the stream's next frames waited for it."""
    live = recorded(two_calls())
    now = [0.0]
    live.rows.clock = lambda: now[0]
    sent = live.held_cards()["calls"]  # (the watchers' cards: the stream paused)

    def no_render(card):
        raise AssertionError(f"call {card.position}'s card rendered again")

    monkeypatch.setattr(live_cards.CardToRender, "render", no_render)
    memory, _ = live.snapshot(-1)
    assert memory["calls"] == sent and [call["position"] for call in sent] == [0, 1]


@pytest.mark.django_db
def test_a_joiner_gets_a_call_s_newer_card_when_the_watchers_are_due_one():
    """A call changed since its card was sent: the joiner is given that card
    while the watchers' next one is not due (RENDER_INTERVAL), then, as they
    would be, the card as the call is now."""
    pieces = two_calls()
    live = recorded(pieces[:6])  # call 1 has its header only
    now = [0.0]
    live.rows.clock = lambda: now[0]
    sent = {call["position"]: call["html"] for call in live.held_cards()["calls"]}
    live.append_reads([(pieces[6], time.monotonic())])  # call 1's arguments
    now[0] = live_cards.RENDER_INTERVAL / 2
    cards = {call["position"]: call["html"] for call in live.snapshot(-1)[0]["calls"]}
    assert cards == sent
    now[0] = live_cards.RENDER_INTERVAL * 2
    cards = {call["position"]: call["html"] for call in live.snapshot(-1)[0]["calls"]}
    assert cards[0] == sent[0] and cards[1] != sent[1]
    assert cards[1] == live.rows.card_html(1)  # (as the call is now)


@pytest.mark.django_db
def test_a_joiner_gets_cards_rendered_anew_once_more_calls_share_the_page(monkeypatch):
    """A card shows fewer fragments a page as calls join the page of cards
    (`page_share`): the cards sent while four calls shared it are not the
    cards of five, though four of the calls did not change."""

    def head(index: int) -> bytes:
        call = {"index": index, "id": f"call_{index}", "function": {"name": "f", "arguments": "{}"}}
        return chunk({"tool_calls": [call]})

    live = recorded([chunk({"role": "assistant"}), *[head(i) for i in range(4)]])
    live.rows.clock = lambda: 0.0
    assert len(live.held_cards()["calls"]) == 4  # (the watchers' cards, four calls on the page)
    live.append_reads([(head(4), time.monotonic())])
    rendered: list[int] = []
    render = live_cards.CardToRender.render

    def counted(card):
        rendered.append(card.position)
        return render(card)

    monkeypatch.setattr(live_cards.CardToRender, "render", counted)
    cards = live.snapshot(-1)[0]["calls"]
    assert sorted(rendered) == [0, 1, 2, 3, 4]
    assert [call["html"] for call in cards] == [live.rows.card_html(p) for p in range(5)]


@pytest.mark.django_db
def test_cards_that_failed_to_render_are_due_again(monkeypatch):
    """Else a joiner would be given the card sent before, for good."""
    live = recorded(two_calls())

    def broken(card):
        raise RuntimeError("the template failed")

    with monkeypatch.context() as patch:
        patch.setattr(live_cards.CardToRender, "render", broken)
        with pytest.raises(RuntimeError):
            live.held_cards()
    assert live.held_back
    assert [call["position"] for call in live.held_cards()["calls"]] == [0, 1]


@pytest.mark.django_db
def test_rows_no_longer_kept_send_the_viewer_to_the_database(monkeypatch):
    pieces = two_calls()
    row = len(recorded(pieces[:1]).snapshot(-1)[0]["frames"][0]["html"])
    monkeypatch.setattr(session, "ROWS_KEPT_HTML", 3 * row)
    live = recorded(pieces)
    assert live.snapshot(-1) is None  # the viewer's page starts at frame 0, not kept
    monkeypatch.setattr(session, "ROWS_KEPT_HTML", 100 * row)
    assert recorded(pieces).snapshot(-1) is not None


@pytest.mark.django_db
def test_the_snapshot_comes_with_a_copy_of_the_capture_row_without_its_bytes():
    """The viewer's copy: the recording's thread changes its own as the
    stream goes, and its raw bytes, once written, are the whole stream."""
    live = recorded(two_calls())
    _, capture = live.snapshot(-1)
    assert capture is not live.capture and capture.pk == live.capture.pk
    assert (capture.slug, capture.outcome, capture.stream_format) == (
        live.capture.slug,
        "live",
        "sse",
    )
    assert capture.get_deferred_fields() == {"raw"}


@pytest.mark.django_db
def test_only_a_recorder_s_capture_keeps_its_rows():
    """HTTP ingest's captures (`append`, any process) are never served from
    memory: they keep no rows."""
    live = session.LiveCapture.open(stream_format="sse", title="t")
    for piece in two_calls():
        live.append_reads([(piece, time.monotonic())])
    assert live.snapshot(-1) is None and not live._kept


@pytest.mark.django_db(transaction=True)
def test_a_joiner_during_the_close_is_answered_at_once(monkeypatch):
    """The close holds the capture for as long as it writes (seconds for a
    big one): a joiner is sent to the database at once, not kept waiting."""
    live = recorded(two_calls())
    writing, release = threading.Event(), threading.Event()
    released: list[bool] = []  # whether the close was let go on, or gave up waiting
    finish = live.writer.finish

    def slow_finish(**meta):
        writing.set()
        released.append(release.wait(5))
        return finish(**meta)

    monkeypatch.setattr(live.writer, "finish", slow_finish)
    closing = threading.Thread(target=live.close)
    closing.start()
    try:
        assert writing.wait(5)
        assert live.snapshot(-1) is None  # had it waited for the lock, the close gave up first
    finally:
        release.set()
        closing.join(10)
    assert released == [True]


@pytest.mark.django_db
def test_a_closed_capture_has_no_snapshot_in_memory():
    live = recorded(two_calls())
    live.close()
    assert live.snapshot(-1) is None


async def connect(path: str) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(application, path)
    assert (await comm.connect(timeout=5))[0]
    return comm


async def until_stored(recording: SocketRecording, count: int) -> None:
    while recording.live._kept_html == 0 or len(recording.live._kept) < count:
        await asyncio.sleep(0.005)


async def frames_until_finished(comm) -> list[int]:
    numbers, message = [], {"type": ""}
    while message["type"] != "finished":
        message = await comm.receive_json_from(timeout=5)
        numbers += [frame["number"] for frame in message["frames"]]
    return numbers


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_of_a_recording_here_reads_no_page(monkeypatch):
    def no_page(self):
        raise AssertionError("the snapshot was read from the database")

    monkeypatch.setattr(SnapshotPager, "next_page", no_page)
    recording = SocketRecording.open(stream_format="sse", title="t")
    assert await recording.ready()
    assert recording_of(recording.slug) is recording
    pieces = two_calls()
    for piece in pieces[:5]:
        recording.feed(piece, time.monotonic())
    await until_stored(recording, 5)
    comm = await connect(f"/ws/captures/{recording.slug}/?after=-1")
    snapshot = await comm.receive_json_from(timeout=5)
    assert snapshot["type"] == "snapshot"
    assert [frame["number"] for frame in snapshot["frames"]] == [0, 1, 2, 3, 4]
    assert [call["position"] for call in snapshot["calls"]] == [0]
    for piece in [*pieces[5:], chunk({}, "tool_calls"), b"data: [DONE]\n\n"]:
        recording.feed(piece, time.monotonic())
    await recording.finish()
    assert await frames_until_finished(comm) == [5, 6, 7, 8, 9]
    assert recording_of(recording.slug) is None
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_viewer_needing_rows_no_longer_kept_reads_the_database(monkeypatch):
    monkeypatch.setattr(session, "ROWS_KEPT_HTML", 1)  # one row kept
    recording = SocketRecording.open(stream_format="sse", title="t")
    assert await recording.ready()
    pieces = two_calls()
    for piece in pieces[:5]:
        recording.feed(piece, time.monotonic())
    await until_stored(recording, 1)
    while recording.live._kept[-1][0]["number"] < 4:
        await asyncio.sleep(0.005)
    comm = await connect(f"/ws/captures/{recording.slug}/?after=-1")
    snapshot = await comm.receive_json_from(timeout=5)
    assert [frame["number"] for frame in snapshot["frames"]] == [0, 1, 2, 3, 4]
    for piece in pieces[5:]:
        recording.feed(piece, time.monotonic())
    await recording.finish()
    assert await frames_until_finished(comm) == [5, 6, 7]
    await comm.disconnect()
