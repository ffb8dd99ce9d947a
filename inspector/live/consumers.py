"""Websocket consumers: viewers of one capture, viewers of the list, and the
ingest socket through which a program pushes a stream's raw bytes.

Viewers join their group *before* reading the snapshot, and every frame is
stored before it is published, so a frame is either in the snapshot, in a
later message, or both; the page drops numbers it has already shown.  None is
lost, none is shown twice.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer

from inspector.assembly import FORMATS, HAR
from inspector.captures import models

from .broadcast import LIST_GROUP, capture_group
from .recorder import SocketRecording
from .snapshot import snapshot


class JsonConsumer(AsyncJsonWebsocketConsumer):
    """orjson as the websocket codec."""

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return orjson.dumps(content).decode()

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        return orjson.loads(text_data)


class CaptureConsumer(JsonConsumer):
    """`/ws/captures/<slug>/?after=N`: frames after N, then live batches."""

    async def connect(self) -> None:
        slug = self.scope["url_route"]["kwargs"]["slug"]
        capture = await _find_capture(slug)
        if capture is None:
            await self.close(code=4404)
            return
        self.group = capture_group(slug)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json(await database_sync_to_async(snapshot)(capture, _after(self.scope)))

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def capture_frames(self, message: dict[str, Any]) -> None:
        await self.send_json({**message, "type": "frames"})

    async def capture_finished(self, message: dict[str, Any]) -> None:
        await self.send_json({**message, "type": "finished"})


class CaptureListConsumer(JsonConsumer):
    """`/ws/captures/`: one message whenever a capture opens or closes."""

    async def connect(self) -> None:
        await self.channel_layer.group_add(LIST_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(LIST_GROUP, self.channel_name)

    async def captures_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({**message, "type": "changed"})


class IngestConsumer(AsyncWebsocketConsumer):
    """`/ws/ingest/`: push a stream's raw bytes as you read them.

    Send one text message `{"open": {"title": ..., "format": "sse"|"jsonl"}}`,
    then the stream's bytes as binary messages, then `{"close": true}`.  The
    answers are `{"type": "opened", "slug", "url"}` and `{"type": "closed",
    "outcome", "refusal"}`.  A socket that drops before `close` closes the
    capture with what it received.
    """

    recording: SocketRecording | None = None
    closed = False

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
            await self.recording.finish()

    async def _open(self, options: Any) -> None:
        if self.recording is not None:
            await self._error("this socket already has an open capture")
            return
        options = options if type(options) is dict else {}
        fmt = options.get("format", "sse")
        if fmt not in FORMATS or fmt == HAR:
            await self._error("format is sse or jsonl")
            return
        title = str(options.get("title") or "ingest")
        self.recording = SocketRecording.open(stream_format=fmt, title=title)
        if not await self.recording.ready():
            self.closed = True
            await self._error("the capture could not be stored")
            return
        await self._send({"type": "opened", "slug": self.recording.slug, "url": self.recording.url})

    async def _append(self, data: bytes) -> None:
        if self.recording is None or self.closed:
            await self._error("open a capture first")
            return
        self.recording.feed(data, time.monotonic())

    async def _close(self) -> None:
        if self.recording is None or self.closed:
            await self._error("no open capture")
            return
        self.closed = True
        finished = await self.recording.finish()
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
