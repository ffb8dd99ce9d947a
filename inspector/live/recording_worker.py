"""The recording process's side (`recording_process`): relayed streams'
reads and ingest sockets' messages in, recorded by `Recording` and
`SocketRecording` as in daphne's process.

Run as `manage.py record_relays FD` by daphne's process
(`recording_process.start`), FD its end of their socket pair.  When that
socket closes (daphne stopped or died), it closes every capture it was
recording (as a relay whose upstream dropped, or an ingest socket that
dropped, would), and exits.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import socket
from typing import Any

from .recorder import Recorder, Recording, SocketRecording, keep
from .recording_process import (
    FEED,
    FINISH,
    FINISHED,
    OPEN,
    OPENED,
    RELAY,
    SNAPSHOT,
    SNAPSHOT_TAKEN,
    message,
    read_message,
    read_message_body,
)

logger = logging.getLogger(__name__)


class ChildRecording(Recording):
    """A relayed stream recorded here: in the process's batch threads, as an
    ingest socket's (`recording_threads`), not on asgiref's one shared
    thread, where every stream of the process would wait behind the
    others' steps and its closes.  Its
    viewers connect to the relay's process, which asks here for their
    snapshots (`RemoteRecording`): it is not in this process's `recording_of`."""

    own_thread = True
    viewed_here = False


class ChildSocketRecording(SocketRecording):
    """An ingest socket's stream recorded here; its viewers connect to the
    socket's process, as a relayed stream's (`ChildRecording`)."""

    viewed_here = False


class Worker:
    """The recordings one daphne process handed over, by tag.  Every message
    asking for an answer gets one, None when what it asked failed: the
    daphne process waits for them."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._recordings: dict[int, Recorder] = {}
        self._finishing: set[asyncio.Task] = set()

    def take(self, kind: int, tag: int, body: bytes) -> None:
        """One message; a failure is this message's alone."""
        try:
            self._take(kind, tag, body)
        except Exception:  # noqa: BLE001 - the other streams go on
            logger.exception("the recording process: message %d (tag %d) failed", kind, tag)
            if kind == OPEN:
                self._answer(OPENED, tag, False)
            elif kind == FINISH:
                self._answer(FINISHED, tag, None)
            elif kind == SNAPSHOT:
                self._answer(SNAPSHOT_TAKEN, tag, None)

    def _take(self, kind: int, tag: int, body: bytes) -> None:
        if kind == FEED:
            recording = self._recordings.get(tag)
            if recording is not None:
                recording.feed(*reversed(read_message_body(body)))
        elif kind == OPEN:
            how = pickle.loads(body)
            if how.pop("kind") == RELAY:
                recording = ChildRecording.open(how.pop("out"), **how)
            else:
                recording = ChildSocketRecording.open(**how)
            self._recordings[tag] = recording
            self._then(self._opened(tag, recording))
        elif kind == FINISH:
            recording = self._recordings.pop(tag, None)
            if recording is None:
                self._answer(FINISHED, tag, None)
                return
            finishing = self._then(self._finished(tag, recording, pickle.loads(body)))
            self._finishing.add(finishing)
            finishing.add_done_callback(self._finishing.discard)
        elif kind == SNAPSHOT:
            of, after = pickle.loads(body)
            self._then(self._snapshot(tag, self._recordings.get(of), after))
        else:
            raise ValueError(f"unknown message kind {kind}")

    def _then(self, coroutine: Any) -> asyncio.Task:
        return keep(asyncio.get_running_loop().create_task(coroutine))

    def _answer(self, kind: int, tag: int, answer: Any) -> None:
        try:
            body = pickle.dumps(answer)
        except Exception:  # noqa: BLE001 - answered None rather than never
            logger.exception("the recording process: an answer could not be pickled")
            body = pickle.dumps(None)
        if not self._writer.is_closing():
            self._writer.write(message(kind, tag, body))

    async def _opened(self, tag: int, recording: Recorder) -> None:
        ready = False
        try:
            ready = await recording.ready()
        finally:
            self._answer(OPENED, tag, ready)

    async def _finished(self, tag: int, recording: Recorder, meta: dict[str, Any]) -> None:
        closing = None
        try:
            closing = await recording.finish(**meta)
        finally:
            self._answer(FINISHED, tag, closing)

    async def _snapshot(self, tag: int, recording: Recorder | None, after: int) -> None:
        answer = None
        try:
            if recording is not None and await recording.ready():  # (asked at once, maybe)
                answer = await recording.snapshot(after)
        except Exception:  # noqa: BLE001 - the viewer reads the database instead
            logger.exception("a snapshot from the recording process failed")
        finally:
            self._answer(SNAPSHOT_TAKEN, tag, answer)

    async def close_all(self) -> None:
        """The daphne process is gone: every capture still recording closes,
        and those closing already finish closing."""
        recordings, self._recordings = list(self._recordings.values()), {}
        await asyncio.gather(
            *(recording.finish() for recording in recordings),
            *self._finishing,
            return_exceptions=True,
        )


async def serve(sock: socket.socket) -> None:
    """Take the daphne process's messages until its socket closes; then
    close what is still recording."""
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    worker = Worker(writer)
    try:
        while True:
            worker.take(*await read_message(reader))
    except (asyncio.IncompleteReadError, OSError):
        pass
    finally:
        await worker.close_all()
        writer.close()
