"""The recording proxy across two daphne processes joined by Redis: the real
OpenAI SDK streams a paced scenario through the proxy on process A while a
websocket viewer on process B watches the capture.  The viewer ends with every
frame exactly once (snapshot, then live batches deduplicated by number, as the
page does) and the closing message with the outcome.

Runs only with REDIS_URL set (the in-memory channel layer is per process)."""

from __future__ import annotations

import json
import os

import pytest
from live_helpers import SdkStream, Viewer, text_stream, wait_for, ws_url

from inspector.live.fake_upstream import FakeUpstream

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="needs REDIS_URL: two processes share a Redis layer"
)

pytest.importorskip("websockets.sync.client")  # the viewers in live_helpers use it

SCENARIO = "paced-words"
WORDS = 60  # + a role frame, a finish frame and [DONE]
PACE_MS = 30
MESSAGES = [{"role": "user", "content": "Say sixty words, slowly."}]


@pytest.fixture(scope="module")
def paced_fake(tmp_path_factory):
    """A fake upstream of our own whose only scenario is a paced text reply."""
    directory = tmp_path_factory.mktemp("paced-scenarios")
    (directory / f"{SCENARIO}.sse").write_text(text_stream(WORDS))
    (directory / f"{SCENARIO}.json").write_text(json.dumps({"pace_ms": PACE_MS}))
    fake = FakeUpstream(directory).start()
    yield fake
    fake.stop()


def test_a_viewer_on_process_b_sees_every_frame_the_proxy_on_process_a_records_once(
    daphne_factory, paced_fake, transactional_db
):
    from inspector.captures.models import Capture

    a = daphne_factory(
        {"INSPECTOR_UPSTREAMS": f"fake={paced_fake.url}", "INSPECTOR_TEST_PROCESS": "A"}
    )
    b = daphne_factory({"INSPECTOR_TEST_PROCESS": "B"})
    assert a != b
    scenario = paced_fake.scenario(SCENARIO)
    total = len(scenario.frames)
    assert total == WORDS + 3

    client = SdkStream(a, SCENARIO, MESSAGES, timeout=20)
    slug = client.slugs.get(timeout=15)
    assert slug, client.error
    # The recorder creates the capture while the first bytes are on their way.
    wait_for(lambda: Capture.objects.filter(slug=slug).exists(), 10, f"capture {slug}")
    viewer = Viewer(ws_url(b, f"/ws/captures/{slug}/?after=-1"), lambda m: m["type"] == "finished")
    viewer.join(30)
    client.join(30)
    assert not viewer.is_alive() and not client.is_alive(), "timed out"
    assert viewer.error is None and client.error is None, (viewer.error, client.error)

    # The SDK got the whole reply.
    words = "".join(c.choices[0].delta.content or "" for c in client.chunks if c.choices)
    assert words == "".join(f"word{i} " for i in range(WORDS))

    types = [m["type"] for m in viewer.messages]
    assert types[0] == "snapshot" and types[-1] == "finished"
    assert set(types[1:-1]) <= {"frames"}
    snapshot = viewer.messages[0]
    assert snapshot["slug"] == slug and snapshot["outcome"] == "live"
    # Dedup as the page does: the snapshot's numbers, then only numbers past the last seen.
    seen = [f["number"] for f in snapshot["frames"]]
    assert len(seen) < total, "the viewer joined after the stream had ended"
    for message in viewer.messages[1:]:
        for frame in message["frames"]:
            if not seen or frame["number"] > seen[-1]:
                seen.append(frame["number"])
    assert seen == list(range(total))
    live_numbers = [f["number"] for m in viewer.messages[1:] for f in m["frames"]]
    assert live_numbers, "no frame arrived live"
    assert len(live_numbers) == len(set(live_numbers))  # live batches never repeat a frame

    finished = viewer.messages[-1]
    assert finished["slug"] == slug
    assert finished["outcome"] == "ok" and finished["refusal"] is None
    assert finished["frame_count"] == total == len(seen)

    capture = wait_for(
        lambda: Capture.objects.filter(slug=slug).exclude(finished=None).first(), 10, "close"
    )
    assert capture.source == "proxy" and capture.upstream == "fake"
    assert capture.outcome == "ok" and capture.frame_count == total
    assert bytes(capture.raw) == scenario.raw
    assert [s.ended for s in paced_fake.served(SCENARIO)] == ["complete"]
