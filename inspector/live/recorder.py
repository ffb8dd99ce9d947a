"""The one recorder: every intake (proxy, guard, websocket ingest, HTTP
ingest) stores and publishes what it receives through this module.

A stream read in a server task (the proxy's relay, the ingest socket) is
recorded by a `Recorder`: `feed(bytes, arrival)` only queues, and a
recorder task feeds the queue to a `LiveCapture` in batches of a few
milliseconds (sync ORM, in the recording's writing thread), then publishes
each batch to the capture's viewers (`broadcast`); its side lane, a thread
of its own, writes the calls' fragments and renders their cards meanwhile.  The capture's
`arrived_ms` are the reads' arrival times, counted from the moment the
request was sent upstream, however far the recorder lags behind.  HTTP
ingest, one request per append, uses the sync functions at the end
(`open_ingest`, `append_sync`, `close_sync`).

What is stored passes through `redact.StreamScrubber` first: a secret of
the request that the upstream quotes back is never kept.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from inspector.assembly import AUTO_DIALECT
from inspector.captures import dialects, models
from inspector.captures.ingest_chunks import add_chunk, drop_chunks
from inspector.captures.pages.live_cards import RENDER_INTERVAL
from inspector.captures.store import open_capture
from inspector.captures.writes import own_connection_done, writing

from . import attempts, broadcast, recording_threads, redact
from .broadcast import FramesMessage, SnapshotMessage
from .recording_threads import close_connection, mend_connection
from .session import LiveCapture

logger = logging.getLogger(__name__)

# Reads that arrive this close together are fed to the assembler as one (a
# burst of small reads costs one assembler call); each frame's arrival time
# is then that of the group's last read, never earlier than the frame's true
# arrival and at most this much later.
MERGE_SECONDS = 0.001
# The reads are stored and published in batches, by time and by size: a
# batch closes when its first read has waited FLUSH_SECONDS, or when
# FLUSH_READS reads or FLUSH_BYTES bytes wait, whichever comes first.  Each
# batch costs one INSERT, one commit and one viewer message, however many
# frames it holds; a read is durable (committed) within FLUSH_SECONDS plus
# one batch's work, far inside issue 12's second.  A recorder that falls
# behind takes everything waiting at once, so it catches up in a few large
# batches rather than a flood of small ones.
FLUSH_SECONDS = 0.004
FLUSH_READS = 500
FLUSH_BYTES = 1 << 20
# A read that comes this long after the one before it (a slow stream, or the
# first read) is a batch at once: no read is coming to share it, and waiting
# FLUSH_SECONDS only delayed its viewers (and woke the loop once more).
QUIET_SECONDS = 0.02
# Attempts of a retry chain that race for one number: how often the loser retries.
NUMBERING_TRIES = 5

# The recordings this process writes, by slug, from their capture's creation
# to their close (or until nothing else holds them): a viewer who joins one
# gets its snapshot from the recording's memory (`Recorder.snapshot`), or
# from the recording process's (`recording_process.RemoteRecording`).  Only
# the event loop's thread reads or changes it.
_recordings: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def recording_of(slug: str) -> Recorder | None:
    """The recording of capture `slug` if this process is writing it (or
    its recording process is): something with `snapshot(after)`."""
    return _recordings.get(slug)


def register(slug: str, recording: Any) -> None:
    """`recording` writes capture `slug` now (see `recording_of`)."""
    _recordings[slug] = recording


def unregister(slug: str, recording: Any) -> None:
    if _recordings.get(slug) is recording:
        del _recordings[slug]


def capture_headers(slug: str, chain: str | None, attempt: int | None) -> dict[str, str]:
    """A relayed response's headers naming its capture: the slug and page;
    the retry chain and attempt number when known (a streamed response goes
    out before they are, unless the request named its chain)."""
    out = {"X-Inspector-Capture": slug, "X-Inspector-Capture-Url": reverse("capture", args=[slug])}
    if chain:
        out[attempts.CHAIN_HEADER] = chain
    if attempt is not None:
        out["X-Inspector-Attempt"] = str(attempt)
    return out


class PinnedClock:
    """`time.monotonic`, unless a time is pinned: a recording's capture
    starts its clock at the time pinned when it opens (the request sent
    upstream)."""

    __slots__ = ("pinned",)

    def __init__(self, pinned: float | None = None) -> None:
        self.pinned = pinned

    def __call__(self) -> float:
        pinned = self.pinned
        return time.monotonic() if pinned is None else pinned


@dataclass
class StoredRequest:
    """What of a request may be stored with its capture (secrets removed),
    and the secret values to scrub from what the upstream answers."""

    upstream: str = ""
    source_url: str = ""
    model: str = ""
    request_json: str = ""
    parsed: Any = None  # the request body with secrets removed, when it is JSON
    chain_header: str | None = None  # the retry chain the request named
    client_retry: bool = False  # the client's own retry count says this is a retry
    not_stored: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    # The API the request's route speaks: its capture is read in that dialect
    # from the first frame (basis "url"), not assumed chat until a frame tells.
    dialect: str | None = None


class Recorder:
    """One capture recorded from bytes read in a server task.

    `feed(bytes, arrival)` only queues; a task appends the queued reads to
    the `LiveCapture` in batches (FLUSH_SECONDS: all the reads waiting, in
    one transaction) and publishes one message for each batch, so a viewer
    gets a message every few milliseconds while the stream flows, and no
    flood when the recorder falls behind.  `finish()` drains the queue,
    closes the capture and publishes the closing messages.  Subclasses say
    how the capture opens.
    """

    source = models.Capture.Source.INGEST
    dialect = AUTO_DIALECT  # the wire format, when the intake was told it
    hint: str | None = None  # the dialect the request's route names
    # Whether the recording writes in the process's batch threads (`_in_thread`),
    # not in its request's.
    own_thread = False
    # Whether its viewers connect to this process (`recording_of`).
    viewed_here = True

    def __init__(
        self, clock: PinnedClock, *, secrets: list[str] = (), slug: str | None = None
    ) -> None:
        self.clock = clock
        self.slug = slug or models.new_slug()
        self.url = reverse("capture", args=[self.slug])
        self.live: LiveCapture | None = None
        self.finished: dict[str, Any] | None = None
        # The request's own secret values, scrubbed from the stored response
        # (an upstream that refuses a key quotes it); the client gets it as sent.
        self._scrubber = redact.StreamScrubber(secrets)
        self._queue: asyncio.Queue = asyncio.Queue()
        self._opened = asyncio.Event()
        self._failed = False
        self._task: asyncio.Task | None = None
        self._finishing: asyncio.Task | None = None
        self._draining = False
        self._closed = False
        self._last_arrival = float("-inf")  # the last read's, for QUIET_SECONDS
        # A websocket recording writes in one of the process's batch threads, on
        # its connection (`_in_thread`, `recording_threads`), in a context of its
        # own; a proxied one in its request's thread, as Django gives it.
        self._thread: ThreadPoolExecutor | None = None
        self._context: contextvars.Context | None = None
        self._thread_given_back = False
        if self.own_thread:
            self._thread = recording_threads.BATCHES.take()
            self._context = contextvars.Context()
        # The side lane (`_side_work`): one of the process's side-lane threads
        # (taken when it starts), and so another connection.
        self._side: ThreadPoolExecutor | None = None
        self._side_task: asyncio.Task | None = None
        self._side_wanted = asyncio.Event()  # fragments or a card due, or held cards
        self._held_wanted = False  # the stream paused with cards held back
        self._side_stopping = False

    def _in_thread(self, function: Callable) -> Callable:
        """`function` run in the recording's writing thread: the request's
        (thread-sensitive), or with `own_thread` a batch thread of the
        process (and its database connection, `recording_threads`), handed
        over with the other steps waiting for it (`HandOver`).  A
        websocket consumer's calls all go to channels' one shared thread, and
        every websocket message is dispatched after a call there: an ingest
        socket's messages would wait behind the recorder's writes, and those
        behind an upload's batch."""
        if self._thread is None:
            return sync_to_async(function)
        return functools.partial(recording_threads.hand_over(self._thread).run, function)

    def _task_of(self, coroutine: Any) -> asyncio.Task:
        return keep(asyncio.get_running_loop().create_task(coroutine, context=self._context))

    def start(self) -> None:
        """Start the recorder task.  Nothing here touches the database: the
        task's first job is to create the capture, so the reader never waits
        for another capture's writes."""
        self._task = self._task_of(self._run())

    def open_capture(self) -> models.Capture:
        """Create the capture row (in the recorder's thread, in a transaction)."""
        raise NotImplementedError

    def closing(self, capture: models.Capture) -> None:
        """Last touches to the capture row when it closes (sync ORM)."""

    def feed(self, data: bytes, arrived: float) -> None:
        self._queue.put_nowait((data, arrived))

    def _create(self) -> None:
        if self._thread is not None:  # a batch thread's connection, maybe long open
            connection.close_if_unusable_or_obsolete()
            own_connection_done()  # (its commit waits for the disk: "opened" follows)
        with writing(), transaction.atomic():
            capture = self.open_capture()
            if self.hint:
                capture.dialect, capture.dialect_basis = self.hint, dialects.URL
                capture.save(update_fields=["dialect", "dialect_basis"])
        # The capture's clock starts when the request was sent upstream.
        self.live = LiveCapture(
            capture,
            clock=self.clock,
            dialect=self.dialect,
            hint=self.hint,
            keep_rows=True,
            own_connection=True,
        )
        self.clock.pinned = None

    async def ready(self) -> bool:
        """Wait until the capture exists; False when it could not be created."""
        await self._opened.wait()
        return not self._failed

    async def _run(self) -> None:
        try:
            await self._in_thread(self._create)()
        except Exception:  # noqa: BLE001 - the relay goes on unrecorded
            logger.exception("capture %s: opening failed", self.slug)
            self._failed = True
            self._give_back_thread()  # (its intake may never call `finish`)
        else:
            if self.viewed_here:
                register(self.slug, self)
            self._side = recording_threads.SIDE_LANES.take()
            self._side_task = keep(
                asyncio.get_running_loop().create_task(
                    self._side_work(), context=contextvars.Context()
                )
            )
            await broadcast.announce(self.live.capture, "opened")
        finally:
            self._opened.set()
        try:
            await self._record()
        except Exception:  # noqa: BLE001 - never let `drain()` raise
            logger.exception("capture %s: the recorder failed", self.slug)
            self._failed = True

    async def _record(self) -> None:
        while True:
            items = await self._next_batch()
            if not items:  # quiet while call cards were held back: the side lane sends them
                self._held_wanted = True
                self._side_wanted.set()
                continue
            end = items[-1] is None
            reads = [item for item in items if item is not None]
            if reads:
                self._last_arrival = reads[-1][1]
            if (reads or end) and not self._failed:
                await self._store_and_publish(reads, end)
            if end:
                return

    async def _store_and_publish(self, reads: list[tuple[bytes, float]], end: bool) -> None:
        """One batch: its frames stored and sent to the viewers (one
        message); then the side lane woken if fragments or a card are due."""
        try:
            message = await self._in_thread(self._append)(reads, end)
        except Exception:  # noqa: BLE001 - the relay goes on unrecorded
            logger.exception("capture %s: storing frames failed", self.slug)
            self._failed = True
            return
        group = broadcast.capture_group(self.slug)
        for part in broadcast.split_batch(message) if message is not None else ():
            await broadcast.send(group, part)
        if not end and self.live.side_work_due:  # (at the end, the close does it all)
            self._side_wanted.set()

    async def _side_work(self) -> None:
        """The recording's side lane: the calls' new fragments written
        (every FRAGMENT_SECONDS) and the call cards the throttle lets out
        rendered and sent, in a side-lane thread of the process (and so on
        another database connection), while the frames' batches go on.  In
        the frames' lane, after each batch's message, they cost the viewers:
        the batches behind a fragments' COPY or a long call's card (each a
        few milliseconds) waited for them (bench/README.md, issue 13's
        twelfth stop).  A card's context is taken under the recording's lock
        and rendered outside it (`LiveCapture.due_cards`).  It wakes when a
        batch found either due (`LiveCapture.side_work_due`) or the stream
        paused with cards held back, and stops before the close
        (`_stop_side_work`), which writes every fragment left and whose page
        has every card."""
        run = functools.partial(sync_to_async, thread_sensitive=False, executor=self._side)
        try:
            while True:
                await self._side_wanted.wait()
                self._side_wanted.clear()
                if self._side_stopping or self._failed:
                    return
                try:
                    await self._side_pass(run)
                except Exception:  # noqa: BLE001 - the close writes and renders it all
                    logger.exception("capture %s: the side lane failed", self.slug)
        finally:
            recording_threads.SIDE_LANES.give_back(self._side)

    async def _side_pass(self, run: Callable[[Callable], Callable]) -> None:
        held, self._held_wanted = self._held_wanted, False
        message = await run(self._side_step)(held)
        if message is not None:
            await broadcast.send(broadcast.capture_group(self.slug), message)

    def _side_step(self, held: bool) -> FramesMessage | None:
        """What is due, in the side lane's thread: the fragments, then the
        cards held back or those the throttle lets out (`due_cards` says,
        under the lock); their message, if any."""
        mend_connection()
        live = self.live
        if live.fragments_due:
            try:
                live.store_fragments()
            except Exception:  # noqa: BLE001 - the close writes them all again
                logger.exception("capture %s: storing fragments failed", self.slug)
        try:
            return live.held_cards() if held else live.due_cards()
        except Exception:  # noqa: BLE001 - viewers are best effort
            logger.exception("capture %s: rendering cards failed", self.slug)
            return None

    async def _stop_side_work(self) -> None:
        """Let the side lane finish what it is doing, and stop it; the close
        goes on whatever happened there."""
        if self._side_task is None:
            return
        self._side_stopping = True
        self._side_wanted.set()
        try:
            await asyncio.shield(self._side_task)
        except Exception:  # noqa: BLE001 - logged; the capture must still close
            logger.exception("capture %s: stopping the side lane failed", self.slug)

    async def _next_batch(self) -> list[tuple[bytes, float] | None]:
        """The reads of the next batch (see FLUSH_SECONDS): all those waiting
        once the first has waited FLUSH_SECONDS (at once after a quiet spell,
        QUIET_SECONDS), or once FLUSH_READS reads or FLUSH_BYTES bytes wait;
        `None` last when the input ended.  None at all when call cards are
        held back and no read came for RENDER_INTERVAL."""
        queue = self._queue
        holding = self.live is not None and not self._failed and self.live.held_back
        try:
            first = await asyncio.wait_for(queue.get(), RENDER_INTERVAL if holding else None)
        except TimeoutError:
            return []
        items = [first]
        size = 0 if first is None else len(first[0])
        if first is None:
            due = time.monotonic()  # (the end: returned below)
        elif first[1] - self._last_arrival > QUIET_SECONDS:
            due = first[1]
        else:
            due = first[1] + FLUSH_SECONDS
        while True:
            while not queue.empty():
                item = queue.get_nowait()
                items.append(item)
                size += 0 if item is None else len(item[0])
            if items[-1] is None or len(items) >= FLUSH_READS or size >= FLUSH_BYTES:
                return items
            wait = due - time.monotonic()
            if wait <= 0:
                return items
            await asyncio.sleep(wait)

    def _append(self, reads: list[tuple[bytes, float]], end: bool) -> dict[str, Any] | None:
        """Store the reads (secrets scrubbed; at the end, also what the
        scrubber held back): the batch's message, or None."""
        if self._thread is not None:
            mend_connection()
        scrubbed = [(self._scrubber.feed(data), arrived) for data, arrived in merge_reads(reads)]
        if end:
            scrubbed.append((self._scrubber.flush(), reads[-1][1] if reads else time.monotonic()))
        return self.live.append_reads([(data, arrived) for data, arrived in scrubbed if data])

    async def snapshot(self, after: int) -> tuple[SnapshotMessage, models.Capture] | None:
        """What a viewer who has the frames up to `after` needs first, and
        the capture's row, from this recording's memory (`LiveCapture.
        snapshot`: no query, so any thread); None when it is not there to give."""
        live = self.live
        if live is None or self._failed:
            return None
        return await sync_to_async(live.snapshot, thread_sensitive=False)(after)

    async def drain(self) -> None:
        """Wait until every queued read is stored."""
        if not self._draining:
            self._draining = True
            self._queue.put_nowait(None)
        if self._task is not None:
            await asyncio.shield(self._task)

    def close_sync(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        """Close the capture (sync ORM; once; after `drain`): the closing
        message, or None when closing failed."""
        if self._closed:
            return self.finished
        self._closed = True
        if self.live is None:
            return None
        try:
            with writing():
                self.finished = self.live.close(**meta)
                self.closing(self.live.capture)
        except Exception:  # noqa: BLE001
            logger.exception("capture %s: closing failed", self.slug)
        return self.finished

    async def _close(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        """`close_sync`: a proxied recording's in its request's thread; one
        that wrote in a batch thread gives it back and closes in a thread of
        `recording_threads.CLOSES` (that thread's connection closed after), so
        that a long close (a long stream's) does not hold up the batches of
        the recordings that share the batch thread."""
        if self._thread is None:
            return await self._in_thread(self.close_sync)(meta)
        self._give_back_thread()
        apart = functools.partial(_then_closing_connection, self.close_sync)
        closes = recording_threads.CLOSES
        return await sync_to_async(apart, thread_sensitive=False, executor=closes)(meta)

    def _give_back_thread(self) -> None:
        """Done with the batch thread (once)."""
        if self._thread is not None and not self._thread_given_back:
            self._thread_given_back = True
            recording_threads.BATCHES.give_back(self._thread)

    async def announce(self, message: dict[str, Any]) -> None:
        await broadcast.send(broadcast.capture_group(self.slug), message)
        await broadcast.announce(self.live.capture, "closed", message["outcome"])

    def finish(self, **meta: Any) -> asyncio.Task:
        """Drain, close the capture and announce it (once); await the
        returned task for the closing message.  It runs as a task of its own,
        so a second cancellation of the request can't interrupt it."""
        if self._finishing is None:
            self._finishing = self._task_of(self._finish(meta))
        return self._finishing

    async def _finish(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        await self.drain()
        await self._stop_side_work()
        try:
            message = await self._close(meta)
        finally:
            unregister(self.slug, self)
        if message is not None:
            await self.announce(message)
        return message


class Recording(Recorder):
    """A proxied (or guarded) upstream response: its capture is an attempt
    of a retry chain, titled and described by the request."""

    source = models.Capture.Source.PROXY

    def __init__(
        self,
        out: StoredRequest,
        clock: PinnedClock,
        *,
        chain: str | None,
        stream_format: str,
        http_status: int | None,
        mode: str,
        slug: str | None = None,
    ) -> None:
        super().__init__(clock, secrets=out.secrets, slug=slug)
        self.out = out
        self.hint = out.dialect
        # Known once the capture exists (the chain the request named at once).
        self.retry_chain: str | None = chain or attempts.chain_from_header(out.chain_header)
        self.attempt: int | None = None
        self._given_chain = chain
        self.stream_format = stream_format
        self.input_format = stream_format  # what was received, when it wasn't the stream itself
        self.http_status = http_status
        self.mode = mode

    @classmethod
    def open(
        cls,
        out: StoredRequest,
        *,
        stream_format: str,
        http_status: int | None,
        started: float,
        chain: str | None = None,
        mode: str = "proxy",
        input_format: str | None = None,
        slug: str | None = None,
    ) -> Recording:
        """Start recording (see `Recorder.start`); `slug`: the capture's,
        when the relay's process named it (`recording_process`)."""
        recording = cls(
            out,
            PinnedClock(started),
            chain=chain,
            stream_format=stream_format,
            http_status=http_status,
            mode=mode,
            slug=slug,
        )
        recording.input_format = input_format or stream_format
        recording.start()
        return recording

    def headers(self) -> dict[str, str]:
        return capture_headers(self.slug, self.retry_chain, self.attempt)

    def open_capture(self) -> models.Capture:
        """Number the attempt and create its capture.

        Two requests of one retry chain can race for a number (another
        process, on PostgreSQL); the loser's INSERT breaks the unique (chain, attempt)
        constraint, and it takes the next number."""
        for tries_left in reversed(range(NUMBERING_TRIES)):
            try:
                with transaction.atomic():
                    return self._number_and_open()
            except IntegrityError:
                if not tries_left:
                    raise
        raise AssertionError("unreachable")

    def _number_and_open(self) -> models.Capture:
        out = self.out
        if self._given_chain is None:
            chain, attempt = attempts.assign(out.chain_header, out.parsed, retry=out.client_retry)
        else:
            attempts.lock_chain(self._given_chain)
            chain, attempt = self._given_chain, attempts.next_attempt(self._given_chain)
        self.retry_chain, self.attempt = chain, attempt
        return open_capture(
            stream_format=self.stream_format,
            input_format=self.input_format,
            slug=self.slug,
            title=f"{self.mode} {out.upstream}: {out.model or '?'} (attempt {attempt})",
            source=self.source,
            upstream=out.upstream,
            provider=out.upstream,
            source_url=out.source_url,
            model=out.model,
            request_json=out.request_json,
            not_stored=out.not_stored,
            http_status=self.http_status,
            retry_chain=chain,
            attempt=attempt,
        )

    def closing(self, capture: models.Capture) -> None:
        if not capture.model and self.out.model:
            # No chunk named its model (an error, a cut): keep the request's.
            capture.model = self.out.model
            models.Capture.objects.filter(pk=capture.pk).update(model=self.out.model)


class SocketRecording(Recorder):
    """A stream a client pushes over the ingest websocket."""

    own_thread = True

    def __init__(
        self,
        *,
        stream_format: str,
        title: str,
        dialect: str = AUTO_DIALECT,
        slug: str | None = None,
    ) -> None:
        super().__init__(PinnedClock(), slug=slug)
        self.stream_format = stream_format
        self.title = title
        self.dialect = dialect

    @classmethod
    def open(cls, **how: Any) -> SocketRecording:
        """Start recording (see `Recorder.start`); `how`: the constructor's
        (`slug`: the capture's, when the socket's process named it,
        `recording_process`)."""
        recording = cls(**how)
        recording.start()
        return recording

    def open_capture(self) -> models.Capture:
        return open_capture(
            stream_format=self.stream_format,
            slug=self.slug,
            source=self.source,
            title=self.title,
            **dialects.chosen_fields(self.dialect),
        )


# -- HTTP ingest: one request per append (sync views) ---------------------------------------


class OutOfTurn(Exception):
    """An append named an offset other than the capture's (or the capture
    is no longer live): `expected` is the capture's offset."""

    def __init__(self, expected: int) -> None:
        super().__init__(f"the capture's offset is {expected}")
        self.expected = expected


def open_ingest(*, stream_format: str, title: str, dialect: str = AUTO_DIALECT) -> LiveCapture:
    """Open a capture that HTTP appends will feed, and tell the list.  A
    dialect given is written down, so any process can resume the capture."""
    with writing():
        capture = open_capture(
            stream_format=stream_format,
            source=models.Capture.Source.INGEST,
            title=title,
            http_ingest=True,
            **dialects.chosen_fields(dialect),
        )
    live = LiveCapture(
        capture, clock=time.time, dialect=dialect, started=capture.created.timestamp()
    )
    broadcast.announce_sync(live.capture, "opened")
    return live


def append_sync(live: LiveCapture, data: bytes, offset: int) -> int:
    """Store one append's bytes at `offset` (and the frames they completed),
    then publish the frames; the new offset.  The capture's row is locked
    while it is written; `OutOfTurn` when its offset is not `offset`."""
    with writing(), transaction.atomic():
        locked = (
            models.Capture.objects.select_for_update()
            .only("byte_size", "outcome")
            .get(pk=live.capture.pk)
        )
        if locked.outcome != models.Capture.Outcome.LIVE or locked.byte_size != offset:
            raise OutOfTurn(locked.byte_size)
        end = add_chunk(live.capture, offset, data)
        batch = live.append(data, throttle=False)  # no later read may come to send a held card
    if batch is not None:
        broadcast.send_sync(broadcast.capture_group(live.slug), batch)
    return end


def close_sync(live: LiveCapture) -> dict[str, Any]:
    """Close a capture HTTP appends fed; its closing message, published.
    Its kept chunks go: `raw` now holds the bytes."""
    with writing():
        finished = live.close()
        drop_chunks(live.capture)
    broadcast.send_sync(broadcast.capture_group(live.slug), finished)
    broadcast.announce_sync(live.capture, "closed", finished["outcome"])
    return finished


def merge_reads(reads: list[tuple[bytes, float]]) -> list[tuple[bytes, float]]:
    """Consecutive reads within MERGE_SECONDS of their group's first, joined
    and stamped with the group's last arrival."""
    groups: list[tuple[list[bytes], float, float]] = []
    for data, arrived in reads:
        if groups and arrived - groups[-1][1] <= MERGE_SECONDS:
            chunks, first, _ = groups[-1]
            chunks.append(data)
            groups[-1] = (chunks, first, arrived)
        else:
            groups.append(([data], arrived, arrived))
    return [(b"".join(chunks), last) for chunks, _, last in groups]


def _then_closing_connection(function: Callable, *args: Any) -> Any:
    """`function(*args)`, then this thread's database connection closed."""
    try:
        return function(*args)
    finally:
        close_connection()


# Tasks that must outlive the request that started them (asyncio keeps only
# weak references to tasks).
_background: set[asyncio.Task] = set()


def keep(task: asyncio.Task) -> asyncio.Task:
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task
