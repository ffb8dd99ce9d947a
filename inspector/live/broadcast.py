"""Fan-out of live capture messages over the channel layer.

A fast upstream can complete hundreds of frames a second.  `Publisher`
coalesces the batch messages of one capture and sends at most one message
per `interval` (plus the last one at close), so a viewer's channel never
holds more than a handful of messages, whatever the stream's pace.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from .session import LIST_GROUP, capture_group

FLUSH_INTERVAL = 0.01  # seconds


def merge_batches(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One `capture.frames` message saying what two consecutive ones said."""
    calls = {call["position"]: call for call in first["calls"]}
    for call in second["calls"]:
        earlier = calls.get(call["position"])
        if earlier is not None:
            call = {**call, "fragments": earlier["fragments"] + call["fragments"]}
        calls[call["position"]] = call
    return {
        **second,
        "frames": first["frames"] + second["frames"],
        "calls": sorted(calls.values(), key=lambda call: call["position"]),
        "refusal": second["refusal"] or first["refusal"],
    }


class Publisher:
    """Coalescing sender for one capture's messages (async callers).

    A batch is sent at once when the last send is `interval` old; otherwise
    it waits, merged with what follows, and a timer sends it when the
    interval is up, so a stream that pauses never leaves frames unsent.
    """

    def __init__(self, slug: str, *, interval: float = FLUSH_INTERVAL, clock=time.monotonic):
        self.group = capture_group(slug)
        self.layer = get_channel_layer()
        self.interval = interval
        self.clock = clock
        self.pending: dict[str, Any] | None = None
        self.last_sent = 0.0
        self.sent = 0
        self._timer: asyncio.Task | None = None

    async def add(self, batch: dict[str, Any] | None) -> None:
        if batch is not None:
            self.pending = batch if self.pending is None else merge_batches(self.pending, batch)
        if self.pending is None:
            return
        wait = self.last_sent + self.interval - self.clock()
        if wait <= 0:
            await self.flush()
        elif self._timer is None:
            self._timer = asyncio.ensure_future(self._flush_after(wait))

    async def _flush_after(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._timer = None
        await self.flush()

    async def flush(self) -> None:
        if self.pending is not None and self.layer is not None:
            message, self.pending = self.pending, None
            await self.layer.group_send(self.group, message)
            self.last_sent = self.clock()
            self.sent += 1

    async def finish(self, finished: dict[str, Any]) -> None:
        """Send what is pending, then the closing message, and tell the list."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.pending is not None:
            finished = {
                **finished,
                "frames": self.pending["frames"] + finished["frames"],
                "calls": merge_batches(
                    self.pending, {**self.pending, "frames": [], "calls": finished["calls"]}
                )["calls"],
            }
            self.pending = None
        if self.layer is not None:
            await self.layer.group_send(self.group, finished)
            await announce(finished["slug"], finished["outcome"])


async def announce(slug: str, outcome: str) -> None:
    """Tell list viewers that a capture opened, grew or closed."""
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(
            LIST_GROUP, {"type": "captures.changed", "slug": slug, "outcome": outcome}
        )


def announce_sync(slug: str, outcome: str) -> None:
    async_to_sync(announce)(slug, outcome)
