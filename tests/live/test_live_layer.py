"""The Redis pub/sub layer hears a process's first subscription at once
(`inspector.live.layer`).

The receiving task of channels_redis' layer sleeps 0.1 s each time it finds
no subscription, and it looks while the first SUBSCRIBE is unanswered.  Here
that sleep never ends (`channels_redis.pubsub.asyncio.sleep` waits forever),
so a message reaches the subscriber only if the task is woken for it: no
test of time.  Runs with REDIS_URL set."""

import asyncio
import os

import pytest
from channels_redis import pubsub

from inspector.live.layer import PromptPubSubChannelLayer

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = pytest.mark.skipif(not REDIS_URL, reason="needs REDIS_URL")


class SleepingForever:
    """The `asyncio` module, but for a `sleep` that never ends."""

    def __getattr__(self, name):
        return getattr(asyncio, name)

    @staticmethod
    async def sleep(delay, result=None):
        await asyncio.Event().wait()


@pytest.fixture
def endless_sleep(monkeypatch):
    monkeypatch.setattr(pubsub, "asyncio", SleepingForever())


async def first_message(layer) -> dict | None:
    """What a process's first subscriber (a new channel, then a group)
    receives of a group send, or None when nothing came in 2 s."""
    channel = await layer.new_channel()
    await layer.group_add("first", channel)
    await layer.group_send("first", {"type": "hello"})
    try:
        return await asyncio.wait_for(layer.receive(channel), 2)
    except TimeoutError:
        return None
    finally:
        await layer.flush()


async def test_the_first_subscriber_of_a_process_gets_its_messages(endless_sleep):
    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="prompt-test")
    assert await first_message(layer) == {"type": "hello"}


async def test_a_subscriber_after_all_left_gets_its_messages(endless_sleep):
    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="prompt-again")
    try:
        channel = await layer.new_channel()
        await layer.group_add("again", channel)
        await layer.group_send("again", {"type": "first"})
        assert await asyncio.wait_for(layer.receive(channel), 2) == {"type": "first"}
        # Every subscription dropped: the task reads the answers, finds none, and sleeps.
        (shard,) = layer._get_layer()._shards
        for name in list(shard._subscribed_to):
            await shard.unsubscribe(name)

        async def none_left():
            while shard._pubsub.subscribed:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(none_left(), 2)
        other = await layer.new_channel()
        await layer.group_add("again", other)
        await layer.group_send("again", {"type": "later"})
        assert await asyncio.wait_for(layer.receive(other), 2) == {"type": "later"}
    finally:
        await layer.flush()


async def test_the_stock_layer_sleeps_through_the_first_subscription(endless_sleep):
    """Why `PromptPubSubChannelLayer` exists: when this fails, channels_redis
    wakes its receiver itself, and `inspector/live/layer.py` can go."""
    layer = pubsub.RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix="stock-test")
    assert await first_message(layer) is None
