"""Websocket consumers: viewers of one capture, viewers of the list, and the
ingest socket through which a program pushes a stream's raw bytes.

Viewers join their group *before* reading the snapshot, and every frame is
stored before it is published, so a frame is either in the snapshot, in a
later message, or both; the page drops numbers it has already shown.  A
message the layer lost (dropped by a full channel, or published before a
Redis subscription took effect) shows as a gap in the numbers, whose frames
are read back from the database.  None is lost, none is shown twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from django.conf import settings

from inspector.assembly import AUTO_DIALECT, DIALECTS, FORMATS, HAR
from inspector.captures import models
from inspector.captures.uploads import TooLarge, check_total_size

from . import recording_process
from .broadcast import LIST_GROUP, capture_group, split_batch
from .recorder import Recorder, SocketRecording, keep, recording_of
from .recording_process import RemoteSocketRecording
from .snapshot import DONE, SnapshotPager, missed_message, page_size, stored_progress

logger = logging.getLogger(__name__)


class NoDatabaseDispatch:
    """Messages of the types in `no_database` go to their handler without
    channels' `aclose_old_connections()` first: a call into the one shared
    sync thread per message, which a handler that never touches the
    database doesn't need (thousands a second on a fast stream, each
    waiting its turn behind any other consumer's database call)."""

    no_database: frozenset[str] = frozenset()

    async def dispatch(self, message: dict[str, Any]) -> None:
        if message["type"] in self.no_database:
            await getattr(self, get_handler_name(message))(message)
        else:
            await super().dispatch(message)


class JsonConsumer(NoDatabaseDispatch, AsyncJsonWebsocketConsumer):
    """orjson as the websocket codec."""

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return orjson.dumps(content).decode()

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        return orjson.loads(text_data)


class CaptureConsumer(JsonConsumer):
    """`/ws/captures/<slug>/?after=N`: frames after N, then live batches.

    The snapshot goes out in pages (`snapshot.SnapshotPager`) from a task
    of its own, so a disconnect is handled at once and cancels it; or whole,
    from memory, when this process records the capture (`recorder.
    recording_of`, `LiveCapture.snapshot`).  Live messages that arrive
    meanwhile are held and forwarded after the last page, without the
    frames a page already gave: in order, none twice.
    """

    paging: asyncio.Task | None = None
    watching: asyncio.Task | None = None
    # Live messages are forwarded, not read from the database (but for frames whose
    # messages were lost, read back in a thread of their own: `_send_missed`).
    no_database = frozenset({"capture.frames", "capture.finished"})

    async def connect(self) -> None:
        slug = self.scope["url_route"]["kwargs"]["slug"]
        # This process writes it: the snapshot, and the capture's row, from memory.
        recording = recording_of(slug)
        capture = None if recording is not None else await _find_capture(slug)
        if recording is None and capture is None:
            await self.close(code=4404)
            return
        self.slug = slug
        self.group = capture_group(slug)
        self.after = _after(self.scope)
        self.held: list[dict[str, Any]] | None = []  # live messages, while paging
        # What the viewer was sent (the snapshot's pages, then live batches); made
        # with the snapshot when it comes from memory.
        self.pager: SnapshotPager | None = capture and SnapshotPager(capture, self.after)
        self.heard = time.monotonic()  # when the last live message came
        self.finished = False  # the closing message went out
        # Each call's card sent, as of which frame: a late message's older card is dropped.
        self.card_as_of: dict[int, int] = {}
        self.sending = asyncio.Lock()  # live messages, and what `_watch` sends
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self.paging = asyncio.create_task(self._send_snapshot(recording))

    async def _send_snapshot(self, recording: Recorder | None) -> None:
        # Asked after joining the group, as the pages are: a frame stored
        # after the snapshot was taken comes in a live message.
        memory = await recording.snapshot(self.after) if recording is not None else None
        if memory is not None:
            whole, capture = memory
            self.pager = SnapshotPager(capture, self.after)
            self.pager.given(whole)
            await self._send_rows(whole)
        else:
            if self.pager is None:  # the recording closed meanwhile: the capture as stored
                capture = await _find_capture(self.slug)
                if capture is None:
                    await self.close(code=4404)
                    return
                self.pager = SnapshotPager(capture, self.after)
            await self._send_pages()
        while self.held:
            await self._forward(self.held.pop(0))
        self.held = None
        if self.pager.live and not self.finished:
            self.watching = asyncio.create_task(self._watch())

    async def _send_pages(self) -> None:
        """The snapshot read from the database, a page at a time."""
        # Not in the consumer's one thread-sensitive worker: the disconnect
        # handler's own database calls would queue behind a page being read.
        next_page = database_sync_to_async(self.pager.next_page, thread_sensitive=False)
        while (page := await next_page()) is not DONE:
            if page is not None:
                await self._send_rows(page)

    async def _watch(self) -> None:
        """While the capture is live: after INSPECTOR_VIEWER_CHECK_SECONDS
        without a live message, ask the database.  Frames stored since the
        last one sent are read back, and a capture no longer live is
        announced closed: their messages were lost (a Redis connection
        re-made drops what was published meanwhile; processes on channel
        layers that don't hear each other, during a deployment)."""
        interval = settings.INSPECTOR_VIEWER_CHECK_SECONDS
        check = database_sync_to_async(stored_progress, thread_sensitive=False)
        while not self.finished:
            await asyncio.sleep(interval)
            if time.monotonic() - self.heard < interval:
                continue
            try:
                await self._check(check)
            except Exception:  # noqa: BLE001 - the next check may succeed; live messages go on
                logger.warning("viewer of %s: the check failed", self.group, exc_info=True)

    async def _check(self, check: Any) -> None:
        last, closed = await check(self.pager.capture)
        async with self.sending:
            if self.finished:
                return
            if last > self.pager.sent_up_to:
                await self._send_missed(last + 1)
            if closed is not None:
                self.finished = True
                await self.send_json({**closed, "type": "finished"})

    async def disconnect(self, code: int) -> None:
        if self.paging is not None:
            self.paging.cancel()
        if self.watching is not None:
            self.watching.cancel()
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def capture_frames(self, message: dict[str, Any]) -> None:
        await self._live({**message, "type": "frames"})

    async def capture_finished(self, message: dict[str, Any]) -> None:
        await self._live({**message, "type": "finished"})

    async def _live(self, message: dict[str, Any]) -> None:
        self.heard = time.monotonic()
        if self.held is not None:
            self.held.append(message)
        else:
            await self._forward(message)

    async def _forward(self, message: dict[str, Any]) -> None:
        """A live message, without the frames the viewer already got, and
        after the frames it should have got before them and did not.  A
        message may come late (another process's append published after a
        later one; one held while the snapshot was read; one delayed past
        its frames' read-back): of its cards, those older than the card
        already sent for the same call are dropped (`_fresh_cards`)."""
        async with self.sending:
            if self.finished:
                return  # `_watch` found the capture closed first
            seen = self.pager.sent_up_to
            given = message.get("frames", [])
            frames = [frame for frame in given if frame["number"] > seen]
            if frames and frames[0]["number"] > seen + 1:
                await self._send_missed(frames[0]["number"])
            if frames:
                self.pager.sent_up_to = frames[-1]["number"]
            as_of = given[-1]["number"] if given else self.pager.sent_up_to
            calls = self._fresh_cards(message.get("calls", []), as_of)
            news = frames or calls or message.get("dialect_html") or message.get("refusal_html")
            if given and not news and message["type"] != "finished":
                return  # late, and nothing in it the viewer lacks
            self.finished = message["type"] == "finished"
            await self.send_json({**message, "frames": frames, "calls": calls})

    def _fresh_cards(self, calls: list[dict[str, Any]], as_of: int) -> list[dict[str, Any]]:
        """The cards rendered as of frame `as_of` that no card rendered
        later was sent for, noted as sent."""
        fresh = [call for call in calls if self.card_as_of.get(call["position"], -1) <= as_of]
        for call in fresh:
            self.card_as_of[call["position"]] = as_of
        return fresh

    async def _send_missed(self, before: int) -> None:
        """The stored frames between the last one the viewer got and
        `before`, read back a page at a time: their live messages were lost.
        Frames are numbered one after another and stored before they are
        published, one process's in order: a gap is a message the layer
        dropped, or one another process published later (then it comes
        late, and `_forward` drops it)."""
        read = database_sync_to_async(missed_message, thread_sensitive=False)
        while self.pager.sent_up_to < before - 1:
            message = await read(self.pager.capture, self.pager.sent_up_to, before, page_size())
            if not message["frames"]:
                return
            self.pager.sent_up_to = message["frames"][-1]["number"]
            await self._send_rows(message)

    async def _send_rows(self, message: dict[str, Any]) -> None:
        """A snapshot page or missed frames, in messages of at most
        MESSAGE_HTML characters of rows (daphne closes a socket told to send
        more than 1 MiB at once); a split snapshot page says `more` until
        its last part."""
        if message.get("calls"):  # a snapshot's cards, as of its last frame read
            self._fresh_cards(message["calls"], self.pager.sent_up_to)
        parts = split_batch(message)  # type: ignore[arg-type]
        for part in parts[:-1]:
            await self.send_json({**part, "more": True} if "more" in message else part)
        await self.send_json(parts[-1])


class CaptureListConsumer(JsonConsumer):
    """`/ws/captures/`: one message whenever a capture opens or closes."""

    async def connect(self) -> None:
        await self.channel_layer.group_add(LIST_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(LIST_GROUP, self.channel_name)

    async def captures_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({**message, "type": "changed"})


class IngestConsumer(NoDatabaseDispatch, AsyncWebsocketConsumer):
    """`/ws/ingest/`: push a stream's raw bytes as you read them.

    Send one text message `{"open": {"title": ..., "format": "sse"|"jsonl"}}`,
    then the stream's bytes as binary messages, then `{"close": true}`.  The
    answers are `{"type": "opened", "slug", "url"}` and `{"type": "closed",
    "outcome", "refusal"}`.  A socket that drops before `close` closes the
    capture with what it received.  A capture is held to
    INSPECTOR_MAX_UPLOAD_BYTES: the message that would take it past the
    limit is refused with an error, the capture closed with what it holds
    (`closed`) and the socket closed with 1009.  With a recording process
    (INSPECTOR_RECORDING_PROCESS) the stream is recorded there; if that
    process dies mid-stream, the socket gets an error and is closed with
    1011.
    """

    # Its reads only queue: the recording writes in a batch thread (`recording_threads`),
    # or in the recording process with INSPECTOR_RECORDING_PROCESS (`recording_process`).
    no_database = frozenset({"websocket.receive"})
    recording: SocketRecording | RemoteSocketRecording | None = None
    closed = False
    received = 0  # bytes appended: held to INSPECTOR_MAX_UPLOAD_BYTES in all

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Channels' consumer loop for a socket that only its client talks
        to: no channel of the layer (nothing is ever sent to an ingest
        socket's channel), and each message dispatched as it is received.
        Channels waits on the socket and the channel together, a new task and
        an `asyncio.wait` per message: at thousands of frames a second, about
        a tenth of the process's time (py-spy, `bench/live_viewer.py`).  So an
        ingest socket joins no group (`groups` stays empty)."""
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        if bytes_data is not None:
            await self._append(bytes_data)
            return
        try:
            message = orjson.loads(text_data or "")
        except orjson.JSONDecodeError:
            await self._error("messages are JSON text or binary stream bytes")
            return
        if type(message) is not dict:
            await self._error("a text message is a JSON object")
        elif "open" in message:
            await self._open(message["open"])
        elif "data" in message and type(message["data"]) is str:
            await self._append(message["data"].encode())
        elif message.get("close"):
            await self._close()
        else:
            await self._error("expected open, data or close")

    async def disconnect(self, code: int) -> None:
        if self.recording is not None and not self.closed:
            self.closed = True
            await asyncio.shield(self.recording.finish())  # (daphne may cancel us)

    async def _open(self, options: Any) -> None:
        if self.recording is not None:
            await self._error("this socket already has an open capture")
            return
        options = options if type(options) is dict else {}
        fmt = options.get("format", "sse")
        if fmt not in FORMATS or fmt == HAR:
            await self._error("format is sse or jsonl")
            return
        dialect = options.get("dialect") or AUTO_DIALECT
        if dialect not in (*DIALECTS, AUTO_DIALECT):
            await self._error(f"dialect is one of {', '.join((*DIALECTS, AUTO_DIALECT))}")
            return
        title = str(options.get("title") or "ingest")
        how = {"stream_format": fmt, "title": title, "dialect": dialect}
        remote = await recording_process.open_remote_socket(**how)
        self.recording = remote if remote is not None else SocketRecording.open(**how)
        if not await self.recording.ready():
            self.closed = True
            await asyncio.shield(self.recording.finish())  # (ends its task, here or there)
            await self._error("the capture could not be stored")
            return
        if remote is not None:
            remote.done.add_done_callback(self._ended_there)
        await self._send({"type": "opened", "slug": self.recording.slug, "url": self.recording.url})

    def _ended_there(self, done: asyncio.Future) -> None:
        keep(asyncio.get_running_loop().create_task(self._lost_there()))

    async def _lost_there(self) -> None:
        """The recording there ended: when the socket did not end it (the
        recording process died while the stream flowed), the client is told
        the capture ends with what was stored (`recover_live` closes it),
        and the socket is closed (1011), so it stops sending into nothing."""
        if self.closed:
            return
        self.closed = True
        await self._error("the recording process is gone: the capture holds what it stored")
        await self.close(code=1011)

    async def _append(self, data: bytes) -> None:
        if self.recording is None or self.closed:
            await self._error("open a capture first")
            return
        try:
            check_total_size(self.received, len(data))
        except TooLarge as error:
            await self._refuse_too_large(str(error))
            return
        self.received += len(data)
        self.recording.feed(data, time.monotonic())

    async def _refuse_too_large(self, reason: str) -> None:
        """The append that would take the capture past the upload limit: the
        capture is closed with what it holds, the client told, the socket
        closed (1009: message too big)."""
        self.closed = True
        await self._error(reason)
        await self._finish()
        await self.close(code=1009)

    async def _close(self) -> None:
        if self.recording is None or self.closed:
            await self._error("no open capture")
            return
        self.closed = True
        await self._finish()

    async def _finish(self) -> None:
        """Close the capture and say how it ended."""
        finished = await asyncio.shield(self.recording.finish())
        if finished is None:
            await self._error("the capture could not be stored")
            return
        await self._send(
            {
                "type": "closed",
                "slug": self.recording.slug,
                "outcome": finished["outcome"],
                "refusal": finished["refusal"],
            }
        )

    async def _send(self, message: dict[str, Any]) -> None:
        await self.send(text_data=orjson.dumps(message).decode())

    async def _error(self, reason: str) -> None:
        await self._send({"type": "error", "error": reason})


@database_sync_to_async
def _find_capture(slug: str) -> models.Capture | None:
    return models.Capture.objects.defer("raw").filter(slug=slug).first()


def _after(scope: dict[str, Any]) -> int:
    query = scope.get("query_string", b"").decode("latin-1")
    for pair in query.split("&"):
        key, _, value = pair.partition("=")
        if key == "after":
            try:
                return int(value)
            except ValueError:
                return -1
    return -1
