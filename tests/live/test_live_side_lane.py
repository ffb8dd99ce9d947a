"""A recorder's side lane: the calls' fragments written and their cards
rendered in a thread of their own, so a batch of frames never waits behind
them (a fragments' COPY, or the card of a long call, took milliseconds in
the frames' lane).  A card is rendered from a context taken under the
recording's lock: what it shows is the call as it was then."""

from __future__ import annotations

import asyncio
import threading
import time

import orjson
import pytest
from channels.db import database_sync_to_async
from django.db import connection

from inspector.captures import models
from inspector.captures.pages import live_cards
from inspector.captures.writer import CaptureWriter
from inspector.live.recorder import SocketRecording
from inspector.live.session import LiveCapture

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": "'}}


def chunk(delta: dict) -> bytes:
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


def piece(text: str) -> bytes:
    return chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})


async def until(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return condition()


def batches(sent: list[dict]) -> list[dict]:
    return [m for m in sent if m["type"] == "capture.frames"]


def frames_sent(sent: list[dict]) -> list[int]:
    return [f["number"] for m in batches(sent) for f in m["frames"]]


@pytest.mark.asyncio
async def test_frames_go_out_while_a_card_renders(monkeypatch, sent):
    rendering, release = threading.Event(), threading.Event()
    render = live_cards.CardToRender.render
    threads: list[str] = []

    def slow_render(card):
        threads.append(threading.current_thread().name)
        rendering.set()
        release.wait(10)
        return render(card)

    monkeypatch.setattr(live_cards.CardToRender, "render", slow_render)
    recording = SocketRecording.open(stream_format="sse", title="slow card")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    try:
        assert await until(rendering.is_set)  # the call's first card, stuck in its render
        for number, text in enumerate(["x", "y", "z"], start=1):
            recording.feed(piece(text), time.monotonic())
            assert await until(lambda n=number: n in frames_sent(sent)), frames_sent(sent)
        assert not any(m["calls"] for m in batches(sent))
    finally:
        release.set()
    assert await until(lambda: any(m["calls"] for m in batches(sent)))
    card = next(m for m in batches(sent) if m["calls"])
    assert card["frames"] == [] and card["refusal_html"] == card["dialect_html"] == ""
    # Taken before the frames after it went out: the call as it was then.
    assert "0 fragments" in card["calls"][0]["html"] or "1 fragment," in card["calls"][0]["html"]
    assert threads and all(name.startswith("recorder-side") for name in threads)
    finished = await recording.finish()
    assert finished is not None and finished["type"] == "capture.finished"


@pytest.fixture
def slow_fragments(monkeypatch) -> tuple[threading.Event, threading.Event, list[str]]:
    """`store_fragment_rows` held until the second event is set; the first
    says it was called; the list, in which threads it was, and "written"
    when each returned."""
    writing, release = threading.Event(), threading.Event()
    store = CaptureWriter.store_fragment_rows
    threads: list[str] = []

    def slow_store(writer, rows, *args, **kwargs):
        threads.append(threading.current_thread().name)
        writing.set()
        release.wait(10)
        store(writer, rows, *args, **kwargs)
        threads.append("written")

    monkeypatch.setattr(CaptureWriter, "store_fragment_rows", slow_store)
    return writing, release, threads


@database_sync_to_async
def stored_fragments(slug: str) -> list[str]:
    fragments = models.Fragment.objects.filter(capture__slug=slug).order_by("seq")
    return [f.text for f in fragments]


@pytest.mark.asyncio
async def test_fragments_are_written_aside_and_the_close_waits_for_them(
    monkeypatch, slow_fragments, sent
):
    """(On SQLite the close would wait anyway, for the one turn to write: the
    order is the side lane's doing on PostgreSQL.)"""
    writing, release, threads = slow_fragments
    close_sync = SocketRecording.close_sync

    def closing(recording, meta):
        threads.append("close")
        return close_sync(recording, meta)

    monkeypatch.setattr(SocketRecording, "close_sync", closing)
    recording = SocketRecording.open(stream_format="sse", title="slow fragments")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    try:
        assert await until(writing.is_set)
        recording.feed(piece("w1") + piece('"}'), time.monotonic())
        finishing = recording.finish()
        await asyncio.sleep(0.2)
        assert not finishing.done()  # the close waits for the fragments being written
    finally:
        release.set()
    assert (await finishing)["type"] == "capture.finished"
    assert threads[-2:] == ["written", "close"]  # the held write was done before the close
    assert all(name.startswith("recorder-side") for name in threads[:-2])
    assert await stored_fragments(recording.slug) == ['{"a": "', "w1", '"}']  # each once


@pytest.mark.asyncio
@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite: one writer at a time")
async def test_frames_go_out_while_fragments_are_written(slow_fragments, sent):
    writing, release, _ = slow_fragments
    recording = SocketRecording.open(stream_format="sse", title="slow fragments")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    try:
        assert await until(writing.is_set)
        for number in range(1, 4):
            recording.feed(piece(f"w{number}"), time.monotonic())
            assert await until(lambda n=number: n in frames_sent(sent)), frames_sent(sent)
    finally:
        release.set()
    recording.feed(piece('"}'), time.monotonic())
    await recording.finish()
    assert await stored_fragments(recording.slug) == ['{"a": "', "w1", "w2", "w3", '"}']


def test_a_card_shows_the_call_as_it_was_when_taken():
    live = LiveCapture.open(stream_format="sse")
    live.append_reads([(chunk({"tool_calls": [HEADER]}) + piece("one"), time.monotonic())])
    (card,) = live.rows.cards_to_render(throttle=False)
    live.append_reads([(piece("two") + piece("three"), time.monotonic())])
    then = card.render().html
    now = live.rows.card_html(0)
    assert "3 fragments" not in then and ">one<" in then and ">two<" not in then
    assert "3 fragments" not in now and "4 fragments" in now and ">three<" in now


def test_no_throttled_card_is_due_until_the_last_ones_cost_is_told():
    live = LiveCapture.open(stream_format="sse")
    now = [0.0]
    live.rows.clock = lambda: now[0]
    live.append_reads([(chunk({"tool_calls": [HEADER]}), time.monotonic())])
    assert live.rows.card_due
    (card,) = live.rows.cards_to_render(throttle=True)
    card.render()
    live.append_reads([(piece("more"), time.monotonic())])
    now[0] = 100.0  # long past RENDER_INTERVAL
    assert not live.rows.card_due and live.rows.cards_to_render(throttle=True) == []
    live.rows.rendered(0.001)  # spacing: (CARD_SPACING + 1) ms from when they were taken
    assert live.rows.card_due


@pytest.mark.asyncio
async def test_a_failing_side_lane_is_logged_and_the_capture_still_closes(
    monkeypatch, sent, caplog
):
    def broken(live):
        raise RuntimeError("no cards today")

    monkeypatch.setattr(LiveCapture, "due_cards", broken)
    monkeypatch.setattr(LiveCapture, "store_fragments", broken)
    recording = SocketRecording.open(stream_format="sse", title="broken side")
    assert await recording.ready()
    recording.feed(chunk({"tool_calls": [HEADER]}), time.monotonic())
    assert await until(lambda: "rendering cards failed" in caplog.text)
    recording.feed(piece("x"), time.monotonic())
    assert await until(lambda: 1 in frames_sent(sent))  # the frames go on
    finished = await recording.finish()
    assert finished is not None and finished["outcome"] != models.Capture.Outcome.LIVE
    assert "storing fragments failed" in caplog.text


def test_due_cards_lets_the_next_card_out_after_the_spacing():
    live = LiveCapture.open(stream_format="sse")
    now = [0.0]
    live.rows.clock = lambda: now[0]
    live.card_budget = live_cards.CardBudget(clock=lambda: now[0])
    live.append_reads([(chunk({"tool_calls": [HEADER]}), time.monotonic())])
    assert live.side_work_due and live.due_cards()["calls"][0]["position"] == 0
    live.append_reads([(piece("more"), time.monotonic())])
    assert live.due_cards() is None  # rendered less than RENDER_INTERVAL ago
    now[0] = live_cards.RENDER_INTERVAL + 1.0  # far past the interval and the spacing
    assert live.due_cards()["calls"][0]["position"] == 0


def test_the_recordings_of_a_process_share_one_card_budget(monkeypatch):
    now = [0.0]
    budget = live_cards.CardBudget(clock=lambda: now[0])
    lives = [LiveCapture.open(stream_format="sse") for _ in range(2)]
    for live in lives:
        live.rows.clock = lambda: now[0]
        live.card_budget = budget
    first, second = lives
    first.append_reads([(chunk({"tool_calls": [HEADER]}), time.monotonic())])
    assert first.side_work_due and first.due_cards() is not None
    second.append_reads([(chunk({"tool_calls": [HEADER]}), time.monotonic())])
    # Its own throttle lets the card out, the process's spacing not yet: no wake-up.
    assert second.rows.card_due and not second.side_work_due
    assert second.due_cards() is None
    now[0] = 1.0  # past the spacing (ten times a render of a few ms)
    assert second.due_cards()["calls"][0]["position"] == 0
    # A render that fails opens the budget again, at its cost.
    monkeypatch.setattr(live_cards.CardToRender, "render", lambda card: 1 / 0)
    now[0] = 10.0
    first.append_reads([(piece("x"), time.monotonic())])
    with pytest.raises(ZeroDivisionError):
        first.due_cards()
    now[0] = 11.0
    assert budget.open()
    second.append_reads([(piece("y"), time.monotonic())])
    assert second.side_work_due


def test_a_joiners_snapshot_renders_its_cards_out_of_the_recordings_lock(monkeypatch):
    """A viewer who joins gets every call's card from the recording's
    memory; while they render (milliseconds each), the frames go on."""
    rendering, release = threading.Event(), threading.Event()
    render = live_cards.CardToRender.render

    def slow_render(card):
        rendering.set()
        release.wait(10)
        return render(card)

    live = LiveCapture.open(stream_format="sse", keep_rows=True)
    live.append_reads([(chunk({"tool_calls": [HEADER]}), time.monotonic())])
    monkeypatch.setattr(live_cards.CardToRender, "render", slow_render)
    snapshots: list = []
    joiner = threading.Thread(target=lambda: snapshots.append(live.snapshot(-1)))
    joiner.start()
    try:
        assert rendering.wait(10)
        appended: list = []
        batch = threading.Thread(
            target=lambda: appended.append(live.append_reads([(piece("x"), time.monotonic())]))
        )
        batch.start()
        batch.join(5)
        assert appended and [f["number"] for f in appended[0]["frames"]] == [1]
    finally:
        release.set()
        joiner.join(10)
    message, _ = snapshots[0]
    assert [call["position"] for call in message["calls"]] == [0]
    assert [frame["number"] for frame in message["frames"]] == [0]
