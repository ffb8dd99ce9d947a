"""A recording process: the proxy's relay and the ingest websocket in one
process, their recordings in another (`INSPECTOR_RECORDING_PROCESS`, with the
Redis channel layer).

In one interpreter, a relay at 5,000 frames/s and its recording queue for
one lock: the relay's reads (httpx, Django's response, daphne's writes)
and the recording's batches (assembly, rows, COPY) each wait for the other,
and the viewers' tail was that wait (bench/README.md, issue 13's tenth and
thirteenth stops).  Here each daphne process that has the setting starts
one child (`python -m django record_relays`, `recording_worker`) at its start, joined
by a socket pair; a relayed stream's reads, and an ingest socket's messages,
go to the child as they arrive (one `send` each), and the child records them
with the same `Recording` (`SocketRecording`) as in process: its batches,
its viewers' messages (through Redis), its close.  An ingest socket has the
same contention: daphne parses its websocket frames, and in process the
recording's batches queued beside them for one lock.

`RemoteRecording` is the relay's side of one such recording: `feed`,
`finish` and `headers` as `Recording`'s, and `snapshot` for a viewer who
joins on the relay's process (asked of the child: its rows are kept there);
`RemoteSocketRecording` is an ingest socket's (`ready`, `slug`, `url`,
`feed`, `finish`, as `SocketRecording`'s).
When the child is gone (it died, or could not start), new streams are
recorded in process as without the setting; the proxied streams it was
recording go on unrecorded, and the ingest sockets it was recording are
told and closed (`IngestConsumer`); the captures it left open are closed by
`recover_live` as any process's.

The messages are length-prefixed (`_HEADER`: kind, tag, length), their
bodies pickled: both ends are this program, on a socket pair no one else
holds.  A read's body is its arrival time and its bytes, unpickled.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.urls import reverse

from inspector.captures import models

from . import attempts
from .recorder import StoredRequest, capture_headers, keep, register, unregister

logger = logging.getLogger(__name__)

# Relay (or ingest socket) -> recording process.
OPEN, FEED, FINISH, SNAPSHOT = 1, 2, 3, 4
# Recording process -> relay (or ingest socket).
OPENED, FINISHED, SNAPSHOT_TAKEN = 11, 12, 13
# What an OPEN starts there (its body's "kind"): a relayed response's recording, or an
# ingest socket's.
RELAY, SOCKET = "relay", "socket"

# How long a viewer's snapshot may take there before the viewer reads the database.
SNAPSHOT_SECONDS = 2.0

_HEADER = struct.Struct("!BII")  # kind, tag (a recording's, or a snapshot's), body length
_ARRIVED = struct.Struct("!d")  # a read's arrival (time.monotonic(): one clock for both)


def message(kind: int, tag: int, body: bytes) -> bytes:
    return _HEADER.pack(kind, tag, len(body)) + body


def read_message_body(data: bytes) -> tuple[float, bytes]:
    """A FEED message's body: the read's arrival and its bytes."""
    return _ARRIVED.unpack_from(data)[0], data[_ARRIVED.size :]


async def read_message(reader: asyncio.StreamReader) -> tuple[int, int, bytes]:
    """The next message: (kind, tag, body).  `IncompleteReadError` at the end."""
    kind, tag, length = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return kind, tag, await reader.readexactly(length) if length else b""


Remote = TypeVar("Remote", bound="RemoteRecorder")


def stored_part(out: StoredRequest) -> StoredRequest:
    """What of a request the recording needs (an `Outbound` also holds the
    headers and body sent upstream: they stay in the relay's process)."""
    return StoredRequest(**{f.name: getattr(out, f.name) for f in fields(StoredRequest)})


class RecordingProcess:
    """The daphne process's end of the socket pair to its recording process."""

    def __init__(self, sock: socket.socket, child: subprocess.Popen | None = None) -> None:
        self._sock = sock
        self.child = child
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Future | None = None
        self._recordings: dict[int, RemoteRecorder] = {}
        self._snapshots: dict[int, asyncio.Future] = {}
        self._tags = itertools.count(1)
        self.gone = False

    @classmethod
    def spawn(cls) -> RecordingProcess:
        """Start a recording process (Django's settings from this process's
        environment, as daphne's own)."""
        ours, theirs = socket.socketpair()
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"]}
        with theirs:
            command = [sys.executable, "-m", "django", "record_relays", str(theirs.fileno())]
            child = subprocess.Popen(command, pass_fds=[theirs.fileno()], env=env)
        return cls(ours, child)

    async def open(self, out: StoredRequest, **how: Any) -> RemoteRecording | None:
        """Start recording a relayed stream there (`how`: `Recording.open`'s
        `stream_format`, `http_status`, `started`); None when the process is
        gone (record in process)."""
        opening = {"kind": RELAY, "out": stored_part(out), **how}
        return await self._open(lambda tag: RemoteRecording(self, tag, out), opening)

    async def open_socket(self, **how: Any) -> RemoteSocketRecording | None:
        """Start recording an ingest socket's stream there (`how`:
        `SocketRecording.open`'s); None when the process is gone."""
        opening = {"kind": SOCKET, **how}
        return await self._open(lambda tag: RemoteSocketRecording(self, tag), opening)

    async def _open(
        self, recording_of_tag: Callable[[int], Remote], opening: dict[str, Any]
    ) -> Remote | None:
        if self.child is not None and self.child.poll() is not None and not self.gone:
            self._lost()  # (it died before saying so: its socket's end not read yet)
        if not await self._connected():
            return None
        tag = next(self._tags)
        recording = recording_of_tag(tag)
        self._recordings[tag] = recording
        # A viewer who joins at once (the response's headers name the capture)
        # waits there for the capture's creation, then gets its snapshot from
        # memory; from the database, its first page took tens of milliseconds.
        register(recording.slug, recording)
        self._send(OPEN, tag, pickle.dumps({**opening, "slug": recording.slug}))
        return recording

    def feed(self, tag: int, data: bytes, arrived: float) -> None:
        if not self.gone:
            self._send(FEED, tag, _ARRIVED.pack(arrived) + data)

    def finish(self, tag: int, meta: dict[str, Any]) -> None:
        if not self.gone:
            self._send(FINISH, tag, pickle.dumps(meta))

    async def snapshot(self, tag: int, after: int) -> Any:
        """A recording's snapshot from the process's memory, or None (then
        the viewer reads the database): also when it takes over
        SNAPSHOT_SECONDS (the process busy or stuck)."""
        if self.gone:
            return None
        asked = next(self._tags)
        answer = self._snapshots[asked] = asyncio.get_running_loop().create_future()
        self._send(SNAPSHOT, asked, pickle.dumps((tag, after)))
        try:
            return await asyncio.wait_for(answer, SNAPSHOT_SECONDS)
        except TimeoutError:
            logger.warning("the recording process: no snapshot after %s s", SNAPSHOT_SECONDS)
            return None
        finally:
            self._snapshots.pop(asked, None)

    def _send(self, kind: int, tag: int, body: bytes) -> None:
        self._writer.write(message(kind, tag, body))

    async def _connected(self) -> bool:
        if self.gone:
            return False
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        await asyncio.shield(self._connecting)
        return not self.gone

    async def _connect(self) -> None:
        try:
            reader, self._writer = await asyncio.open_unix_connection(sock=self._sock)
        except OSError:
            logger.exception("the recording process: connecting failed")
            self.gone = True
            return
        keep(asyncio.get_running_loop().create_task(self._read(reader)))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, tag, body = await read_message(reader)
                self._answer(kind, tag, pickle.loads(body))
        except (asyncio.IncompleteReadError, OSError):
            pass
        except Exception:  # noqa: BLE001 - a bad message: no more can be trusted
            logger.exception("the recording process: a message could not be read")
        finally:
            self._lost()

    def _answer(self, kind: int, tag: int, answer: Any) -> None:
        if kind == SNAPSHOT_TAKEN:
            waiting = self._snapshots.pop(tag, None)
            if waiting is not None and not waiting.done():
                waiting.set_result(answer)
            return
        recording = self._recordings.get(tag)
        if recording is None:
            return
        if kind == OPENED:
            recording.opened(answer)
        elif kind == FINISHED:
            del self._recordings[tag]
            recording.finished(answer)

    def _lost(self) -> None:
        """The process is gone: what waited on it is told so."""
        if self.gone:
            return
        self.gone = True
        logger.error(
            "the recording process is gone: %d streams it recorded are not recorded any more; "
            "new streams are recorded in process",
            len(self._recordings),
        )
        if self.child is not None:
            keep(asyncio.get_running_loop().create_task(self._reap()))
        for recording in self._recordings.values():
            recording.finished(None)
        self._recordings.clear()
        for waiting in self._snapshots.values():
            if not waiting.done():
                waiting.set_result(None)
        self._snapshots.clear()
        if self._writer is not None:
            self._writer.close()
        else:
            self._sock.close()

    async def _reap(self) -> None:
        code = await asyncio.to_thread(self.child.wait)
        logger.error("the recording process exited with code %s", code)

    def stop(self) -> None:
        """Close the socket (the process then closes what it records, and
        exits)."""
        if self._writer is not None:
            self._writer.close()
        else:
            self._sock.close()


class RemoteRecorder:
    """Daphne's side of a recording in the recording process (a relayed
    stream's or an ingest socket's): `feed` and `finish` as a `Recorder`'s,
    `ready`, and a viewer's `snapshot` while it records
    (`recorder.recording_of`)."""

    def __init__(self, process: RecordingProcess, tag: int) -> None:
        self._process = process
        self._tag = tag
        self.slug = models.new_slug()
        self.url = reverse("capture", args=[self.slug])
        loop = asyncio.get_running_loop()
        self._opened: asyncio.Future = loop.create_future()
        self._done: asyncio.Future = loop.create_future()
        self._finish_sent = False

    def feed(self, data: bytes, arrived: float) -> None:
        self._process.feed(self._tag, data, arrived)

    def finish(self, **meta: Any) -> asyncio.Future:
        """Drain, close the capture and announce it (there; once); await the
        returned future for the closing message (None when closing failed, or
        the process is gone)."""
        if not self._finish_sent:
            self._finish_sent = True
            self._process.finish(self._tag, meta)
        return self._done

    @property
    def done(self) -> asyncio.Future:
        """Resolved when the recording there has ended: its closing message,
        or None (closing failed, or the process is gone)."""
        return self._done

    async def ready(self) -> bool:
        """Wait until the capture exists there; False when it could not be
        created (or the process is gone)."""
        return await asyncio.shield(self._opened)

    async def snapshot(self, after: int) -> Any:
        return await self._process.snapshot(self._tag, after)

    def opened(self, ok: bool) -> None:
        """The process created the capture (or could not: the stream goes on
        unrecorded, as in process)."""
        if not ok:
            unregister(self.slug, self)
        if not self._opened.done():
            self._opened.set_result(ok)

    def finished(self, closing: dict[str, Any] | None) -> None:
        unregister(self.slug, self)
        if not self._opened.done():
            self._opened.set_result(False)
        if not self._done.done():
            self._done.set_result(closing)


class RemoteRecording(RemoteRecorder):
    """A relayed stream recorded by the recording process: the relay's
    `Recording` (`feed`, `finish`, `headers`, `out`)."""

    def __init__(self, process: RecordingProcess, tag: int, out: StoredRequest) -> None:
        super().__init__(process, tag)
        self.out = out
        # A streamed response goes out before the attempt is numbered.
        self.retry_chain = attempts.chain_from_header(out.chain_header)

    def headers(self) -> dict[str, str]:
        return capture_headers(self.slug, self.retry_chain, None)


class RemoteSocketRecording(RemoteRecorder):
    """An ingest socket's stream recorded by the recording process: the
    socket's `SocketRecording` (`ready`, `slug`, `url`, `feed`, `finish`)."""


# -- this server's recording process (INSPECTOR_RECORDING_PROCESS) ------------

_process: RecordingProcess | None = None


def start() -> None:
    """Start this server's recording process (daphne's start, with the setting)."""
    global _process
    if not settings.REDIS_URL:
        raise ImproperlyConfigured(
            "INSPECTOR_RECORDING_PROCESS needs REDIS_URL: the recording process tells its "
            "viewers through the channel layer, and the in-memory one reaches only its own process"
        )
    if connection.vendor != "postgresql":
        raise ImproperlyConfigured(
            "INSPECTOR_RECORDING_PROCESS needs PostgreSQL: on SQLite the writers of one "
            "process take turns, not those of two (docs/deployment.md)"
        )
    if _process is None:
        _process = RecordingProcess.spawn()


async def open_remote(out: StoredRequest, **how: Any) -> RemoteRecording | None:
    """A relayed stream's recording in this server's recording process;
    None without one (no setting, or the process gone: record in process)."""
    if _process is None or _process.gone:
        return None
    return await _process.open(out, **how)


async def open_remote_socket(**how: Any) -> RemoteSocketRecording | None:
    """An ingest socket's recording in this server's recording process
    (`how`: `SocketRecording.open`'s); None without one."""
    if _process is None or _process.gone:
        return None
    return await _process.open_socket(**how)
