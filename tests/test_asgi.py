"""Async tests through the real ASGI stack and the configured channel layer.

Template for consumer tests: pytest-asyncio auto mode (no asyncio marks needed) and
`django_db(transaction=True)` because channels closes old DB connections on every consumer
message (toolchain.md pitfalls 1 and 2).
"""

import pytest
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.testing import HttpCommunicator, WebsocketCommunicator

from inspector.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

GROUP = "tests-echo"


class EchoConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello"})

    async def disconnect(self, code):
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def tests_update(self, event):
        await self.send_json({"type": "update", "payload": event["payload"]})


async def test_health_over_asgi():
    response = await HttpCommunicator(
        application, "GET", "/health", headers=[(b"host", b"testserver")]
    ).get_response()
    assert response["status"] == 200
    assert response["body"] == b"ok"


async def test_consumer_receives_group_message():
    comm = WebsocketCommunicator(EchoConsumer.as_asgi(), "/ws/test/")
    connected, _ = await comm.connect()
    assert connected
    assert await comm.receive_json_from(timeout=2) == {"type": "hello"}
    await get_channel_layer().group_send(GROUP, {"type": "tests.update", "payload": {"n": 1}})
    assert await comm.receive_json_from(timeout=2) == {"type": "update", "payload": {"n": 1}}
    await comm.disconnect()


async def test_unknown_websocket_path_is_rejected():
    comm = WebsocketCommunicator(application, "/ws/nowhere/")
    with pytest.raises(ValueError):
        await comm.connect()
