"""A lens run goes on only while someone waits for it (`lens_cache.py`): one
nobody asks for in INSPECTOR_LENS_ABANDON_SECONDS is killed and stored as
abandoned, with no result, and the next request starts it again; one that is
asked for meanwhile (as the pages and API clients poll) ends as ever; an API
client that disconnects while it waits lets its runs stop at once.

The lens `slow_lens.SLOW` is made slow on purpose in its forked process.
The runs happen in the worker pool, whose threads see only committed rows:
these tests use `transactional_db`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
import slow_lens
from asgiref.sync import sync_to_async
from capture_streams import DONE, chunk, sse, tool
from django.core.asgi import get_asgi_application

from inspector.captures import lens_cache
from inspector.captures.lens_cache import lens_runs
from inspector.captures.lens_runs import LensRun
from inspector.captures.models import Capture
from inspector.captures.store import store_stream
from inspector.lenses import runner

pytestmark = pytest.mark.django_db(transaction=True)

Status = LensRun.Status
SLOW = slow_lens.SLOW
ABANDON = 2.5  # INSPECTOR_LENS_ABANDON_SECONDS here; the tests ask every 0.1 s
STREAM = sse(
    chunk(tool(0, "call_a", "read", '{"path":"/a"}')),
    chunk(tool(1, "call_b", "read", '{"path":"/b"}')),
    chunk(finish="tool_calls"),
    DONE,
)


class Forked:
    """What `bounded_run` was asked for and answered, seen from the worker threads."""

    def __init__(self) -> None:
        self.started = threading.Event()  # the slow lens's bounded run began
        self.answers: list[dict] = []

    def wrap(self, run):
        def recorded(name, *args, **kwargs):
            if name == SLOW:
                self.started.set()
            answer = run(name, *args, **kwargs)
            if name == SLOW:
                self.answers.append(answer)
            return answer

        return recorded


@pytest.fixture
def forked(monkeypatch, settings) -> Forked:
    settings.INSPECTOR_LENS_WORKERS = 2
    settings.INSPECTOR_LENS_WAIT_SECONDS = 0  # the request answers "computing" at once
    settings.INSPECTOR_LENS_ABANDON_SECONDS = ABANDON
    settings.INSPECTOR_LENS_SECONDS = 600  # the time limit never ends these runs
    seen = Forked()
    monkeypatch.setattr(lens_cache, "bounded_run", seen.wrap(lens_cache.bounded_run))
    return seen


def stored() -> Capture:
    return store_stream(STREAM, stream_format="sse", title="two calls")


def slow_run(capture: Capture) -> LensRun:
    return LensRun.objects.get(capture=capture, lens=SLOW)


def asked_until(capture: Capture, event: threading.Event) -> None:
    """Ask for the lenses every 0.1 s (as the page's script does) until `event`."""
    deadline = time.monotonic() + 60
    while not event.wait(0.1):
        assert time.monotonic() < deadline, "the slow lens never started"
        lens_runs(capture)


def settled(capture: Capture, *, asking: bool) -> LensRun:
    """The slow lens's run once it is no longer pending (at most 60 s), asking
    for the lenses every 0.1 s meanwhile or only reading its row."""
    deadline = time.monotonic() + 60
    while True:
        if asking:
            lens_runs(capture)
        run = slow_run(capture)
        if run.status != Status.PENDING:
            return run
        assert time.monotonic() < deadline, "the slow lens is still pending"
        time.sleep(0.1)


def process_gone(pid: int) -> bool:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


def test_a_run_nobody_asks_for_is_killed_and_the_next_request_starts_it_again(forked, monkeypatch):
    monkeypatch.setattr(runner, "_child", slow_lens.never_ending)
    capture = stored()
    assert lens_runs(capture)[SLOW].status == Status.PENDING
    asked_until(capture, forked.started)  # then the visitor leaves

    run = settled(capture, asking=False)
    assert run.status == Status.ABANDONED
    assert f"nobody asked for it in {ABANDON:g} s (INSPECTOR_LENS_ABANDON_SECONDS)" in run.detail
    assert (run.result_json, run.divergences_json, run.call_count) == ("", "", 0)
    [answer] = forked.answers
    assert answer["status"] == runner.ABANDONED and process_gone(answer["pid"])
    assert LensRun.objects.filter(capture=capture, lens=SLOW, status=Status.DONE).count() == 0

    monkeypatch.undo()  # the lens as it is
    again = lens_runs(capture)[SLOW]
    assert again.status in (Status.PENDING, Status.DONE) and again.started > run.started
    done = settled(capture, asking=True)
    assert (done.status, done.call_count) == (Status.DONE, 2)


def test_a_run_asked_for_meanwhile_ends_as_ever(forked, monkeypatch):
    monkeypatch.setattr(runner, "_child", slow_lens.slow_for_a_while)
    capture = stored()
    lens_runs(capture)
    run = settled(capture, asking=True)
    assert (run.status, run.call_count, run.detail) == (Status.DONE, 2, "")
    # It outlived INSPECTOR_LENS_ABANDON_SECONDS: the asking kept it going.
    assert run.wall_seconds >= slow_lens.A_WHILE_SECONDS > ABANDON
    [answer] = forked.answers
    assert process_gone(answer["pid"])


def lenses_request(slug: str) -> dict:
    path = f"/api/captures/{slug}/lenses"
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"accept", b"application/json")],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }


async def test_an_api_client_that_disconnects_lets_its_runs_stop(forked, monkeypatch, settings):
    monkeypatch.setattr(runner, "_child", slow_lens.never_ending)
    settings.INSPECTOR_LENS_WAIT_SECONDS = 600  # the request waits for its runs
    settings.INSPECTOR_LENS_ABANDON_SECONDS = 600  # only the disconnect can stop them
    capture = await sync_to_async(stored)()
    messages = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive():
        message = next(messages, None)
        if message is not None:
            return message
        await asyncio.to_thread(forked.started.wait, 60)
        return {"type": "http.disconnect"}

    sent = []

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(get_asgi_application()(lenses_request(capture.slug), receive, send), 60)
    assert sent == []  # cancelled: no answer

    run = await sync_to_async(settled)(capture, asking=False)
    assert run.status == Status.ABANDONED
    [answer] = forked.answers
    assert answer["status"] == runner.ABANDONED and process_gone(answer["pid"])
