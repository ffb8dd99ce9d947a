"""Async tests through the real ASGI stack and the configured channel layer.

Template for consumer tests: pytest-asyncio auto mode (no asyncio marks needed) and
`django_db(transaction=True)` because channels closes old DB connections on every consumer
message (toolchain.md pitfalls 1 and 2).
"""

import subprocess
import sys

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
    """Refused at the handshake (the router used to raise: a 500 and an ERROR line)."""
    comm = WebsocketCommunicator(application, "/ws/nowhere/")
    connected, _ = await comm.connect()
    assert not connected


def test_the_server_freezes_what_it_loaded_out_of_the_cyclic_gc():
    """Full collections traversing Django's startup objects paused the server
    ~80 ms at a time (bench/live_viewer.py)."""
    script = (
        "import gc, sys, inspector.asgi; "
        "print(gc.get_freeze_count(), 'inspector.live.proxy' in sys.modules)"  # a view module
    )
    env = {"DJANGO_SETTINGS_MODULE": "inspector.settings", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    frozen, proxy_loaded = done.stdout.split()
    assert int(frozen) > 50_000 and proxy_loaded == "True"


@pytest.mark.skipif(sys.version_info >= (3, 14), reason="the incremental GC has no 3rd threshold")
def test_a_daphne_process_makes_full_collections_rare_and_others_keep_pythons(tmp_path):
    """A full collection traversed what a live stream keeps, 15-21 ms each
    about every 2 s at 5,000 frames/s (inspector/server_gc.py): daphne's
    process, and its recording process, wait for FULL_AFTER collections of
    the middle generation; a process that only imports the app (tests, a
    command) keeps Python's thresholds."""
    from inspector.server_gc import FULL_AFTER

    as_daphne = "import sys; sys.modules['__main__'].__file__ = '/x/daphne/__main__.py'; "
    script = "import gc, inspector.asgi; print(*gc.get_threshold())"
    env = {
        "DJANGO_SETTINGS_MODULE": "inspector.settings",
        "PATH": "/usr/bin:/bin",
        "INSPECTOR_RECOVER_LIVE": "0",  # (a daphne process would look for left captures)
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }

    def thresholds(code: str) -> list[int]:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return [int(n) for n in done.stdout.split()]

    pythons = thresholds("import gc; print(*gc.get_threshold())")
    rare = [*pythons[:2], FULL_AFTER]
    assert pythons[2] != FULL_AFTER
    assert thresholds(as_daphne + script) == rare
    assert thresholds(script) == pythons
    recording_process = (  # `manage.py record_relays`, its serving left out
        "import django, gc, socket; django.setup(); "
        "from inspector.management.commands import record_relays as command; "
        "command.asyncio.run = lambda serving: serving.close(); "
        "ours, theirs = socket.socketpair(); command.Command().handle(fd=theirs.fileno()); "
        "print(*gc.get_threshold())"
    )
    assert thresholds(recording_process) == rare
