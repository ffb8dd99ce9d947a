"""channels_redis' pub/sub layer, with a receiver that starts listening as
soon as a process subscribes.

The layer reads a Redis connection's subscriptions in one task per process
(per event loop).  That task sleeps 0.1 s whenever it finds no subscription,
and it looks while the first `SUBSCRIBE` is still on its way (redis-py notes
the channel only once Redis answered).  So a process's first subscriber, or
its first after every viewer had left, got no message for up to 0.1 s: a
viewer joining a stream of 5,000 frames a second through the proxy saw about
500 frames arrive 50-100 ms late, the p99 of the whole stream
(bench/README.md).  Checked in channels_redis 4.3.0 and its main branch on
2026-12-07.

`PromptPubSubChannelLayer` restarts the sleeping task right after a
subscription made it needed, so the task's next look finds it.  It relies on
the connection's private attributes (`_pubsub`, `_receive_task`,
`_ensure_receiver`), pinned with channels-redis in pyproject.toml;
tests/live/test_live_layer.py fails if they change.
"""

from __future__ import annotations

from typing import Any

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisSingleShardConnection


class PromptShardConnection(RedisSingleShardConnection):
    """One Redis connection of the layer, listening from its first subscription."""

    async def subscribe(self, channel: str) -> None:
        """`RedisSingleShardConnection.subscribe`, then the receiving task
        restarted when it found no subscription.  Under the connection's lock
        nothing else subscribes meanwhile, and redis-py notes the channel only
        after the answer was read (while this coroutine runs): so a task that
        found none is asleep at that moment, not reading, and is cancelled
        safely."""
        async with self._lock:
            if channel in self._subscribed_to:
                return
            self._ensure_redis()
            listening = self._pubsub.subscribed and self._receive_task is not None
            self._ensure_receiver()
            await self._pubsub.subscribe(channel)
            self._subscribed_to.add(channel)
            if not listening:
                self._receive_task.cancel()
                self._receive_task = None
                self._ensure_receiver()


class PromptPubSubChannelLayer(RedisPubSubChannelLayer):
    """`RedisPubSubChannelLayer` whose connections are `PromptShardConnection`s."""

    def _get_layer(self) -> Any:
        layer = super()._get_layer()
        shards = layer._shards
        if shards and type(shards[0]) is RedisSingleShardConnection:
            # A loop's layer just made: nothing has used its connections yet.
            layer._shards = [PromptShardConnection(shard.host, layer) for shard in shards]
        return layer
