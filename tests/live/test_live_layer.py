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
from redis.asyncio.client import Pipeline

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


async def most_publishes_at_once(layer, sends: int = 8) -> int:
    """The most PUBLISH commands the layer's process had waiting for their
    answers at one time, when `sends` group sends are made together (each
    answer held back until all were made or 0.3 s passed)."""
    channel = await layer.new_channel()
    await layer.group_add("together", channel)
    (shard,) = layer._get_layer()._shards
    shard._ensure_redis()
    publish = shard._redis.publish
    waiting, most = 0, 0
    all_made = asyncio.Event()

    async def held_back(name, message):
        nonlocal waiting, most
        waiting += 1
        most = max(most, waiting)
        if waiting == sends:
            all_made.set()
        try:
            await asyncio.wait_for(all_made.wait(), 0.3)
        except TimeoutError:
            pass
        try:
            return await publish(name, message)
        finally:
            waiting -= 1

    shard._redis.publish = held_back
    try:
        await asyncio.gather(
            *(layer.group_send("together", {"type": "n", "n": n}) for n in range(sends))
        )
        received = [await asyncio.wait_for(layer.receive(channel), 2) for _ in range(sends)]
        assert sorted(message["n"] for message in received) == list(range(sends))
        return most
    finally:
        await layer.flush()


class Pipelines(list):
    release: asyncio.Event | None = None


async def until_a_pipeline(pipelines) -> None:
    for _ in range(200):
        if pipelines:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no pipeline was sent")


@pytest.fixture
def pipelines(monkeypatch) -> Pipelines:
    """The PUBLISHes of each pipeline a layer sends, in order; the first
    pipeline held back until `pipelines.release` is set, when it is set to
    an event (else none is held)."""
    sizes = Pipelines()
    execute = Pipeline.execute

    async def counted(pipeline, *args, **kwargs):
        sizes.append(len(pipeline.command_stack))
        if len(sizes) == 1 and sizes.release is not None:
            await asyncio.wait_for(sizes.release.wait(), 2)
        return await execute(pipeline, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", counted)
    return sizes


async def sent_together(layer, sends: int, group: str) -> list[dict]:
    """`sends` group sends made at once to a group with one subscriber: what it received."""
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    await asyncio.gather(*(layer.group_send(group, {"type": "n", "n": n}) for n in range(sends)))
    return [await asyncio.wait_for(layer.receive(channel), 2) for _ in range(sends)]


async def test_group_sends_made_together_go_in_one_pipeline(pipelines):
    """One capture's batch is not held up by another's answer from Redis
    (each waited 22-27 ms for the ones before it with 20 captures streaming:
    bench/README.md, seventeenth stop), and many cost one round trip."""
    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="together")
    try:
        received = await sent_together(layer, 8, "together")
    finally:
        await layer.flush()
    assert sorted(message["n"] for message in received) == list(range(8))
    assert pipelines == [8]


async def test_sends_made_while_a_pipeline_is_on_its_way_go_in_the_next(pipelines):
    pipelines.release = asyncio.Event()
    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="next-one")
    try:
        channel = await layer.new_channel()
        await layer.group_add("next-one", channel)
        first = asyncio.create_task(layer.group_send("next-one", {"type": "n", "n": 0}))
        await until_a_pipeline(pipelines)  # the first one on its way, held
        later = [
            asyncio.create_task(layer.group_send("next-one", {"type": "n", "n": n}))
            for n in range(1, 6)
        ]
        await asyncio.sleep(0.05)
        assert pipelines == [1]
        pipelines.release.set()
        await asyncio.gather(first, *later)
        received = [await asyncio.wait_for(layer.receive(channel), 2) for _ in range(6)]
    finally:
        await layer.flush()
    assert [message["n"] for message in received] == list(range(6))  # in the order made
    assert pipelines == [1, 5]


async def test_a_failed_pipeline_is_raised_to_each_of_its_senders(monkeypatch):
    async def refused(pipeline, *args, **kwargs):
        raise ConnectionError("Redis went away")

    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="refused")
    try:
        channel = await layer.new_channel()
        await layer.group_add("refused", channel)
        with monkeypatch.context() as patch:
            patch.setattr(Pipeline, "execute", refused)
            sends = [layer.group_send("refused", {"type": "n", "n": n}) for n in range(3)]
            outcomes = await asyncio.gather(*sends, return_exceptions=True)
        assert [type(outcome) for outcome in outcomes] == [ConnectionError] * 3
        await layer.group_send("refused", {"type": "n", "n": 3})  # the next pipeline goes
        assert await asyncio.wait_for(layer.receive(channel), 2) == {"type": "n", "n": 3}
    finally:
        await layer.flush()


async def test_the_stock_layer_publishes_one_at_a_time():
    """Why `PromptShardConnection.publish` exists: when this fails,
    channels_redis no longer holds its lock across a PUBLISH."""
    layer = pubsub.RedisPubSubChannelLayer(hosts=[REDIS_URL], prefix="one-at-a-time")
    assert await most_publishes_at_once(layer) == 1


async def test_a_flush_waits_for_the_publishes_on_their_way(pipelines):
    """A flush closes the client the pipelines go through (channels_redis
    held the lock across a PUBLISH for that too)."""
    pipelines.release = asyncio.Event()
    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="flushed")
    channel = await layer.new_channel()
    await layer.group_add("flushed", channel)
    send = asyncio.create_task(layer.group_send("flushed", {"type": "n", "n": 0}))
    await until_a_pipeline(pipelines)
    flushing = asyncio.create_task(layer.flush())
    await asyncio.sleep(0.1)
    assert not flushing.done()
    pipelines.release.set()
    await asyncio.wait_for(send, 2)  # sent, not broken by the flush
    await asyncio.wait_for(flushing, 2)


async def test_a_cancelled_sender_fails_its_sends_rather_than_leave_them_waiting(pipelines):
    pipelines.release = asyncio.Event()  # never set: the first pipeline is held
    layer = PromptPubSubChannelLayer(hosts=[REDIS_URL], prefix="cancelled")
    try:
        first = asyncio.create_task(layer.group_send("cancelled", {"type": "n", "n": 0}))
        await until_a_pipeline(pipelines)
        later = [
            asyncio.create_task(layer.group_send("cancelled", {"type": "n", "n": n}))
            for n in (1, 2)
        ]
        await asyncio.sleep(0.05)
        (shard,) = layer._get_layer()._shards
        shard._sender.cancel()  # (as when the loop closes)
        outcomes = await asyncio.wait_for(asyncio.gather(first, *later, return_exceptions=True), 1)
        assert [type(outcome) for outcome in outcomes] == [ConnectionError] * 3
    finally:
        pipelines.release.set()
        await layer.flush()
