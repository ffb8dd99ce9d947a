"""The recording process's side (`recording_process`): relayed streams'
reads in, recorded by `Recording` as in the relay's process.

Run as `manage.py record_relays FD` by daphne's process
(`recording_process.start`), FD its end of their socket pair.  When that
socket closes (daphne stopped or died), it closes every capture it was
recording, as a relay whose upstream dropped would, and exits.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import socket
from typing import Any

from .recorder import Recording, keep, unregister
from .recording_process import (
    FEED,
    FINISH,
    FINISHED,
    OPEN,
    OPENED,
    SNAPSHOT,
    SNAPSHOT_TAKEN,
    message,
    read_message,
    read_message_body,
)

logger = logging.getLogger(__name__)


class Worker:
    """The recordings one relay process handed over, by tag."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._recordings: dict[int, Recording] = {}

    def take(self, kind: int, tag: int, body: bytes) -> None:
        if kind == FEED:
            recording = self._recordings.get(tag)
            if recording is not None:
                recording.feed(*reversed(read_message_body(body)))
        elif kind == OPEN:
            how = pickle.loads(body)
            recording = self._recordings[tag] = Recording.open(how.pop("out"), **how)
            self._then(self._opened(tag, recording))
        elif kind == FINISH:
            recording = self._recordings.pop(tag, None)
            if recording is not None:
                self._then(self._finished(tag, recording, pickle.loads(body)))
        elif kind == SNAPSHOT:
            of, after = pickle.loads(body)
            self._then(self._snapshot(tag, self._recordings.get(of), after))
        else:
            raise ValueError(f"unknown message kind {kind}")

    def _then(self, coroutine: Any) -> None:
        keep(asyncio.get_running_loop().create_task(coroutine))

    def _answer(self, kind: int, tag: int, answer: Any) -> None:
        if not self._writer.is_closing():
            self._writer.write(message(kind, tag, pickle.dumps(answer)))

    async def _opened(self, tag: int, recording: Recording) -> None:
        ready = await recording.ready()
        # Viewers connect to the relay's process, which asks here for their
        # snapshot: this process's own `recording_of` is nobody's (and in the
        # tests, which serve in the relay's process, the relay's `RemoteRecording`).
        unregister(recording.slug, recording)
        self._answer(OPENED, tag, ready)

    async def _finished(self, tag: int, recording: Recording, meta: dict[str, Any]) -> None:
        self._answer(FINISHED, tag, await recording.finish(**meta))

    async def _snapshot(self, tag: int, recording: Recording | None, after: int) -> None:
        try:
            answer = None
            if recording is not None and await recording.ready():  # (asked at once, maybe)
                answer = await recording.snapshot(after)
        except Exception:  # noqa: BLE001 - the viewer reads the database instead
            logger.exception("a snapshot from the recording process failed")
            answer = None
        self._answer(SNAPSHOT_TAKEN, tag, answer)

    async def close_all(self) -> None:
        """The relay's process is gone: every capture still recording closes."""
        recordings, self._recordings = list(self._recordings.values()), {}
        await asyncio.gather(
            *(recording.finish() for recording in recordings), return_exceptions=True
        )


async def serve(sock: socket.socket) -> None:
    """Take the relay's messages until its socket closes; then close what
    is still recording."""
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
