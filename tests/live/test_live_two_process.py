"""Two daphne processes joined by Redis: a stream is pushed through HTTP ingest
on process A while viewers watch on process B.  Every frame reaches the
capture viewer exactly once (snapshot, live batches and the closing message
together) with the outcome, and the list viewer hears the open and the close.

Runs only with REDIS_URL set (the in-memory channel layer is per process)."""

from __future__ import annotations

import os
import urllib.request
from functools import partial

import orjson
import pytest
from live_helpers import Viewer, chat_chunk, ws_url

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="needs REDIS_URL: two processes share a Redis layer"
)

pytest.importorskip("websockets.sync.client")  # the viewers in live_helpers use it

WORDS = 400


chunk = partial(chat_chunk, chunk_id="c2")


def stream() -> list[bytes]:
    """WORDS text frames, a tool call in 40 pieces, a finish and [DONE]."""
    frames = [chunk({"content": f"w{i} "}) for i in range(WORDS)]
    arguments = orjson.dumps({"query": "x" * 200, "n": 3}).decode()
    frames.append(chunk({"tool_calls": [{"index": 0, "id": "c_1", "function": {"name": "f"}}]}))
    step = -(-len(arguments) // 40)
    frames += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[i : i + step]}}]})
        for i in range(0, len(arguments), step)
    ]
    frames.append(chunk({}, "tool_calls"))
    frames.append(b"data: [DONE]\n\n")
    return frames


def post(url: str, data: bytes = b"", content_type: str = "application/octet-stream") -> dict:
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=10) as response:
        return orjson.loads(response.read())


def test_a_viewer_on_process_b_sees_every_frame_pushed_to_process_a_once(
    daphne_factory, transactional_db
):
    a = daphne_factory({"INSPECTOR_TEST_PROCESS": "A"})
    b = daphne_factory({"INSPECTOR_TEST_PROCESS": "B"})
    assert a != b

    ours: dict[str, str] = {}  # the slug, once known; other captures' news is ignored
    lister = Viewer(
        ws_url(b, "/ws/captures/"),
        lambda m: m.get("slug") == ours.get("slug") and m.get("outcome") != "live",
    )
    opened = post(a + "/api/ingest", orjson.dumps({"title": "two"}), "application/json")
    ours["slug"] = opened["slug"]
    frames = stream()
    data = b"".join(frames)

    # Some frames are stored before the viewer joins: it gets them in its snapshot.
    head, cut = 0, len(b"".join(frames[:50])) + 7
    post(opened["append_url"], data[head:cut])
    viewer = Viewer(
        ws_url(b, f"/ws/captures/{opened['slug']}/?after=-1"), lambda m: m["type"] == "finished"
    )
    for start in range(cut, len(data), 997):  # pieces that cut frames anywhere
        post(opened["append_url"], data[start : start + 997])
    closed = post(opened["close_url"])
    viewer.join(30)
    lister.join(30)
    assert viewer.error is None and lister.error is None, (viewer.error, lister.error)

    types = [m["type"] for m in viewer.messages]
    assert types[0] == "snapshot" and types[-1] == "finished"
    assert set(types[1:-1]) <= {"frames"}
    numbers = [f["number"] for m in viewer.messages for f in m["frames"]]
    # The snapshot and the first live batch may overlap (the page drops repeats);
    # past that overlap, every frame arrives exactly once and in order.
    snapshot_numbers = [f["number"] for f in viewer.messages[0]["frames"]]
    assert snapshot_numbers == list(range(len(snapshot_numbers))) and len(snapshot_numbers) >= 50
    live = [n for n in numbers[len(snapshot_numbers) :] if n >= len(snapshot_numbers)]
    assert snapshot_numbers + live == list(range(len(frames)))
    finished = viewer.messages[-1]
    assert finished["outcome"] == closed["outcome"] == "ok"
    assert finished["frame_count"] == len(frames)

    changes = [m["outcome"] for m in lister.messages if m.get("slug") == opened["slug"]]
    assert changes == ["live", "ok"]


def test_an_idle_viewer_stays_connected_past_redis_s_default_socket_timeout(
    daphne_factory, transactional_db
):
    """With the list-based layer's 5 s blocking pops, a Redis socket timeout of 5 s
    (redis-py 8's default) dropped every viewer that heard nothing for 5 s (close code
    1011); an idle viewer of the pub/sub layer must stay as well."""
    a = daphne_factory({"INSPECTOR_TEST_PROCESS": "A"})
    b = daphne_factory({"INSPECTOR_TEST_PROCESS": "B"})
    ours: dict[str, str] = {}
    lister = Viewer(ws_url(b, "/ws/captures/"), lambda m: m.get("slug") == ours.get("slug"))
    lister.join(6.5)  # idle past one blocking pop
    assert lister.is_alive() and lister.error is None, lister.error
    opened = post(a + "/api/ingest", orjson.dumps({"title": "late"}), "application/json")
    ours["slug"] = opened["slug"]
    lister.join(10)
    assert lister.error is None, lister.error
    assert [m.get("outcome") for m in lister.messages if m.get("slug") == opened["slug"]][:1] == [
        "live"
    ]
    post(opened["close_url"])
