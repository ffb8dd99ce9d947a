"""Any process takes any append: two daphne processes on PostgreSQL + Redis,
the appends of one capture alternating between them (as a plain balancer
would send them), a viewer on each.  The capture stored equals an upload of
the same bytes, and both viewers see every frame once, in order.

Runs in the PostgreSQL + Redis leg of `make test` only: SQLite serves one
process, and the in-memory channel layer is per process."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from functools import partial

import orjson
import pytest
from live_helpers import Viewer, chat_chunk, stored, ws_url

pytestmark = [
    pytest.mark.skipif(
        not os.environ.get("REDIS_URL"), reason="needs REDIS_URL: two processes share a Redis layer"
    ),
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="needs DATABASE_URL on PostgreSQL: SQLite serves one process",
    ),
]

pytest.importorskip("websockets.sync.client")  # the viewers in live_helpers use it


chunk = partial(chat_chunk, chunk_id="c3")


def stream() -> bytes:
    """Text frames, then two tool calls whose arguments arrive in pieces."""
    frames = [chunk({"content": f"w{i} "}) for i in range(120)]
    for index, name in enumerate(("get_weather", "search")):
        start = {"index": index, "id": f"call_{index}", "type": "function"}
        frames.append(chunk({"tool_calls": [{**start, "function": {"name": name}}]}))
        arguments = orjson.dumps({"q": name * 20, "n": index}).decode()
        frames += [
            chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + 9]}}]}
            )
            for i in range(0, len(arguments), 9)
        ]
    frames.append(chunk({}, "tool_calls"))
    return b"".join(frames) + b"data: [DONE]\n\n"


def post(url: str, data: bytes = b"", headers: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(url, data=data, method="POST", headers=headers or {})
    request.add_header("Content-Type", "application/octet-stream")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, dict(response.headers), orjson.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), orjson.loads(error.read())


def frame_numbers(viewer: Viewer) -> list[int]:
    """Every frame number the viewer got, snapshot and live, in arrival order."""
    return [frame["number"] for message in viewer.messages for frame in message["frames"]]


def test_appends_alternating_between_two_processes_lose_double_and_misorder_nothing(
    daphne_factory, transactional_db
):
    from inspector.assembly import assemble
    from inspector.captures import models
    from inspector.captures.store import store_stream

    servers = [daphne_factory({"INSPECTOR_TEST_PROCESS": name}) for name in ("A", "B")]
    status, _, opened = post(servers[0] + "/api/ingest")
    assert status == 201
    slug = opened["slug"]
    viewers = [
        Viewer(ws_url(base, f"/ws/captures/{slug}/?after=-1"), lambda m: m["type"] == "finished")
        for base in servers
    ]
    data = stream()
    offset, piece = 0, 0
    while offset < len(data):
        size = 97 + 61 * (piece % 5)  # pieces that cut frames anywhere
        base = servers[piece % 2]
        status, headers, body = post(
            f"{base}/api/ingest/{slug}/append",
            data[offset : offset + size],
            {"Upload-Offset": str(offset)},
        )
        assert status == 200, body
        offset = min(offset + size, len(data))
        assert body["offset"] == int(headers["Upload-Offset"]) == offset
        piece += 1
    # A retry of the last append (its answer "lost") is refused with the offset, not stored.
    status, headers, body = post(
        f"{servers[0]}/api/ingest/{slug}/append", data[-10:], {"Upload-Offset": str(len(data) - 10)}
    )
    assert status == 409 and body["expected"] == len(data) == int(headers["Upload-Offset"])
    status, _, closed = post(f"{servers[1]}/api/ingest/{slug}/close")  # not the opener
    assert status == 200 and closed["outcome"] == "ok"

    for viewer in viewers:
        viewer.join(30)
        assert viewer.error is None, viewer.error
    total = assemble(data, fmt="sse").frames
    for viewer in viewers:
        assert viewer.messages[0]["type"] == "snapshot"
        assert viewer.messages[-1]["type"] == "finished"
        assert frame_numbers(viewer) == list(range(total))  # each once, in order
    upload = store_stream(data, stream_format="sse")
    assert stored(models.Capture.objects.get(slug=slug)) == stored(upload)
    assert [name for name, _ in stored(upload)["calls"]] == ["get_weather", "search"]


def test_appends_racing_on_both_processes_are_stored_in_offset_order(
    daphne_factory, transactional_db
):
    """Two senders at once, one per process, each with every other piece: an
    append that comes before its turn is refused with the offset the capture
    has (409), and is sent again once that offset is reached."""
    import threading
    import time

    from inspector.captures import models
    from inspector.captures.store import store_stream

    servers = [daphne_factory({"INSPECTOR_TEST_PROCESS": name}) for name in ("A", "B")]
    slug = post(servers[1] + "/api/ingest")[2]["slug"]
    data = stream()
    cuts = list(range(0, len(data), 113)) + [len(data)]
    pieces = list(zip(cuts, cuts[1:], strict=False))
    refused = [0, 0]
    failures: list[str] = []
    # The second sender goes first, so its first piece comes before its turn
    # whatever the timing; the first sender starts once that was refused.
    raced = threading.Event()

    def send(side: int) -> None:
        if side == 0 and not raced.wait(30):
            failures.append("the second sender was never refused")
            return
        for start, end in pieces[side::2]:
            deadline = time.monotonic() + 30
            while True:
                status, _, body = post(
                    f"{servers[side]}/api/ingest/{slug}/append",
                    data[start:end],
                    {"Upload-Offset": str(start)},
                )
                if status == 200:
                    break
                if status != 409 or body["expected"] > start or time.monotonic() > deadline:
                    failures.append(f"piece at {start}: {status} {body}")
                    return
                refused[side] += 1
                raced.set()
                time.sleep(0.002)

    senders = [threading.Thread(target=send, args=(side,)) for side in (1, 0)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(60)
    assert not failures, failures
    assert refused[1] > 0  # the race did happen: appends came before their turn
    assert post(f"{servers[0]}/api/ingest/{slug}/close")[2]["outcome"] == "ok"
    upload = store_stream(data, stream_format="sse")
    assert stored(models.Capture.objects.get(slug=slug)) == stored(upload)
