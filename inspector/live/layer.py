"""channels_redis' pub/sub layer, with a receiver that listens as soon as a
process subscribes.

The layer reads a Redis connection's subscriptions in one task per process
(per event loop).  That task sleeps 0.1 s whenever it finds no subscription,
and it first looks while the first SUBSCRIBE is being sent (the task is
started just before, and redis-py notes the channel once the command is
sent).  So a process's first subscriber, or its first after every viewer had
left, got no message for up to 0.1 s: a viewer joining a stream of 5,000
frames a second through the proxy saw about 500 frames arrive 50-100 ms late,
the p99 of the whole stream (bench/README.md, ninth stop).  Checked in
channels_redis 4.3.0 and on its main branch on 2026-12-07.

`PromptShardConnection` waits for a subscription on an event that
`subscribe` sets, instead of sleeping.

It also publishes without the connection's lock, and in pipelines.
channels_redis holds that one lock, shared with subscribing, across each
PUBLISH and its answer, so a process's group sends went out one at a time,
each waiting for the one before it to be answered through an event loop
busy with every socket of the process.  With 20 captures streaming on two
processes each live batch waited 22-27 ms (p50) there to be published, and
its recording's next batch waited behind it (bench/README.md, seventeenth
stop).  A PUBLISH needs none of what the lock guards (the subscriptions;
the client is made once, by `_ensure_redis`, without an await), only that
the client is not closed under it: `flush` waits for the publishes on
their way.  The group sends made while a pipeline is on its way go
together in the next one: a PUBLISH through redis-py's asyncio client
costs about 80 us of CPU alone, about 30 in a pipeline of five
(`bench/batch_costs.py`).  One recording's messages keep their order: it
awaits each send before the next, and a pipeline's commands run in order.

It relies on the connection's private attributes (`_pubsub`, `_lock`,
`_redis`, `_subscribed_to`, `_ensure_redis`, `_ensure_receiver`,
`_receive_message`), pinned with channels-redis in pyproject.toml;
tests/live/test_live_layer.py fails if they change.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisSingleShardConnection

logger = logging.getLogger(__name__)


class PromptShardConnection(RedisSingleShardConnection):
    """One Redis connection of the layer, listening from its first
    subscription, and publishing in pipelines (`publish`)."""

    def __init__(self, host: Any, channel_layer: Any) -> None:
        super().__init__(host, channel_layer)
        self._subscribed = asyncio.Event()  # set once a channel is subscribed
        self._outbox: list[tuple[str, Any, asyncio.Future]] = []  # PUBLISHes to go
        self._sender: asyncio.Task | None = None  # sending them, a pipeline at a time

    async def publish(self, channel: str, message: Any) -> None:
        """channels_redis' publish, sent in a pipeline with the others made
        meanwhile (without waiting for the connection's lock); raises what
        sending the pipeline raised."""
        future = asyncio.get_running_loop().create_future()
        self._outbox.append((channel, message, future))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send_outbox())
        await future

    async def _send_outbox(self) -> None:
        """Send what waits in the outbox, a pipeline at a time, until none
        waits; each sender is told how its pipeline went."""
        while self._outbox:
            sending, self._outbox = self._outbox, []
            try:
                self._ensure_redis()
                async with self._redis.pipeline(transaction=False) as pipeline:
                    for channel, message, _ in sending:
                        pipeline.publish(channel, message)
                    await pipeline.execute()
            except asyncio.CancelledError:  # (the loop closing): none waits for ever
                stranded, self._outbox = sending + self._outbox, []
                _settle(stranded, ConnectionError("the layer's sender was cancelled"))
                raise
            except Exception as error:  # noqa: BLE001 - raised in each sender's task
                _settle(sending, error)
            else:
                _settle(sending, None)

    async def flush(self) -> None:
        """channels_redis' flush, once the publishes on their way went: it
        closes the client they send through."""
        while self._sender is not None and not self._sender.done():
            await asyncio.wait([self._sender])
        await super().flush()

    async def subscribe(self, channel: str) -> None:
        await super().subscribe(channel)
        self._subscribed.set()

    async def _do_receiving(self) -> None:
        """channels_redis' receiving loop, but for its wait: with nothing
        subscribed it waits for `subscribe`, not 0.1 s.  The look and the
        wait have no await between them, nor `subscribe`'s noting of the
        channel and its `set()`, so no subscription goes unheard."""
        while True:
            try:
                if self._pubsub and self._pubsub.subscribed:
                    message = await self._pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=0.1
                    )
                    self._receive_message(message)
                else:
                    self._subscribed.clear()
                    await self._subscribed.wait()
            except (asyncio.CancelledError, TimeoutError, GeneratorExit):
                raise
            except BaseException:  # as channels_redis does: log, wait, go on
                logger.exception("Unexpected exception in receive task")
                await asyncio.sleep(1)


def _settle(sending: list[tuple[str, Any, asyncio.Future]], error: Exception | None) -> None:
    """Tell the senders of a pipeline how it went (those still waiting)."""
    for *_, future in sending:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


class PromptPubSubChannelLayer(RedisPubSubChannelLayer):
    """`RedisPubSubChannelLayer` whose connections are `PromptShardConnection`s."""

    def _get_layer(self) -> Any:
        layer = super()._get_layer()
        shards = layer._shards
        if shards and type(shards[0]) is RedisSingleShardConnection:
            # A loop's layer just made (no await since): nothing used its connections yet.
            layer._shards = [PromptShardConnection(shard.host, layer) for shard in shards]
        return layer
