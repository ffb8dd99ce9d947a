"""The capture page, its permalinks and its tools in every dialect's terms."""

from __future__ import annotations

import io
import re
import zipfile

import orjson
import pytest
from dialect_streams import BY_DIALECT, GEMINI_OK, MESSAGES_OK, NO_DIALECT, RESPONSES_OK
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st
from page_helpers import html

from inspector.captures.models import Capture
from inspector.captures.store import store_stream

pytestmark = pytest.mark.django_db


def stored(data: bytes, title: str = "") -> Capture:
    return store_stream(data, stream_format="sse", title=title)


def test_responses_calls_show_output_index_item_id_and_call_id(client):
    page = html(client.get(stored(RESPONSES_OK).get_absolute_url()))
    assert "Read as OpenAI Responses (responses), told by its frames." in page
    assert '<span class="chip term">output_index 2</span>' in page
    assert '<span class="chip term">item id fc_demo_flight</span>' in page
    assert '<span class="chip term">call_id call_flight_7Q</span>' in page
    assert ">server tool</span>" in page  # the web search
    # The frames panel: each frame's event name and JSON type.
    same = 'title="the SSE event name and the JSON type of its data (the same)">'
    assert same + "response.function_call_arguments.delta</code>" in page


def test_anthropic_calls_show_block_index_and_tool_use_id(client):
    page = html(client.get(stored(MESSAGES_OK).get_absolute_url()))
    assert '<span class="chip term">content block 4</span>' in page
    assert '<span class="chip term">tool_use id toolu_01Flight</span>' in page
    assert '<span class="chip term">server_tool_use id srvtoolu_01Web</span>' in page
    assert '(the same)">content_block_delta</code>' in page
    # Where they differ, both are shown (event_type_mismatch).
    mixed = MESSAGES_OK.replace(b"event: ping\n", b"event: pong\n", 1)
    page = html(client.get(stored(mixed).get_absolute_url()))
    assert "event <code>pong</code>" in page and "type <code>ping</code>" in page


def test_gemini_path_pieces_show_path_piece_and_the_object_so_far(client):
    capture = stored(GEMINI_OK)
    page = html(client.get(capture.get_absolute_url()))
    assert '<span class="chip term">functionCall part 1 of candidate 0</span>' in page
    assert "<th>path and piece</th><th>arguments object so far</th>" in page
    assert "$.city += &quot;bon&quot;" in page
    assert "{&quot;city&quot;:&quot;Lisbon&quot;,&quot;nights&quot;:3" in page
    # JSON scanner chips make no sense for pieces: they are not shown there.
    hotel = page[page.index("search_hotels") :]
    assert "path piece: sets a value in the arguments object" in hotel
    # The state at a frame shows the object so far too, not a JSON scan of the pieces.
    state = html(client.get(reverse("frame", args=[capture.slug, 4])))
    panel = state[state.index('id="state-title"') :]
    assert "invalid from offset" not in panel
    assert "&quot;filters&quot;:{&quot;breakfast&quot;:true}}" in panel


def test_a_stream_of_no_known_dialect_says_chat_was_assumed_and_why(client):
    page = html(client.get(stored(NO_DIALECT).get_absolute_url()))
    assert "Read as OpenAI chat completions (chat) by assumption" in page
    assert "no frame is a JSON object of a known dialect" in page


def test_refusals_use_the_dialect_terms_and_marks_are_explained(client):
    page = html(client.get(stored(BY_DIALECT["messages"][1]).get_absolute_url()))
    assert "block 1 received input_json_delta after its content_block_stop" in page
    page = html(client.get(stored(BY_DIALECT["responses"][1]).get_absolute_url()))
    assert "item at output_index 0: the final copy" in page
    data = RESPONSES_OK.replace(b'"sequence_number":5}', b'"sequence_number":9}')
    page = html(client.get(stored(data).get_absolute_url()))
    assert "sequence_number jumped: events are missing in between" in page


@pytest.mark.parametrize("dialect", sorted(BY_DIALECT))
def test_permalinks_downloads_export_and_compare_work_in_every_dialect(client, dialect):
    ok, refused = (stored(data, f"{dialect} {i}") for i, data in enumerate(BY_DIALECT[dialect]))
    for capture in (ok, refused):
        strict = capture.assemblies.get(policy="strict")
        last = capture.frame_count - 1
        frame = client.get(reverse("frame", args=[capture.slug, last]))
        assert frame.status_code == 200
        assert f"State at frame {last}" in html(frame)
        call = strict.calls.order_by("position").first()
        if call is not None and call.fragments.exists():
            fragment = call.fragments.order_by("-seq").first()
            link = reverse("frame", args=[capture.slug, fragment.frame])
            page = html(client.get(link))
            assert f'id="frag-{call.position}-{fragment.seq}" class="is-focus"' in page
        raw = client.get(reverse("capture-raw", args=[capture.slug]))
        assert b"".join(raw.streaming_content if raw.streaming else [raw.content]) == bytes(
            capture.raw
        )
        result = orjson.loads(client.get(reverse("capture-result", args=[capture.slug])).content)
        assert result["dialect"] == dialect
        archive = client.get(reverse("capture-export", args=[capture.slug, "zip"]))
        names = zipfile.ZipFile(io.BytesIO(archive.content)).namelist()
        expect = next(name for name in names if name.endswith(".expect.json"))
        expected = orjson.loads(zipfile.ZipFile(io.BytesIO(archive.content)).read(expect))
        assert expected["expect"]["outcome"] == capture.outcome
    compare = client.get(reverse("compare"), {"a": ok.slug, "b": refused.slug})
    assert compare.status_code == 200


@pytest.mark.django_db(transaction=True)  # the minimizer runs in a worker thread
@pytest.mark.parametrize("dialect", ["responses", "messages", "gemini"])
def test_minimize_a_refused_capture_of_every_dialect(client, dialect):
    capture = stored(BY_DIALECT[dialect][1])
    response = client.post(reverse("capture-minimize", args=[capture.slug]))
    assert response.status_code == 303
    derived = Capture.objects.get(derived_from=capture)
    assert (derived.dialect, derived.refusal_code) == (dialect, capture.refusal_code)
    assert derived.frame_count <= capture.frame_count
    assert re.search(r"minimized: keeps", html(client.get(capture.get_absolute_url())))


def test_a_chat_frame_has_no_type_label_from_its_tool_calls(client):
    from inspector.captures.pages.frames import event_and_type

    chunk = '{"id":"c","choices":[{"delta":{"tool_calls":[{"type":"function"}]}}]}'
    assert event_and_type("data: " + chunk) == ("", "")
    page = html(client.get(stored(BY_DIALECT["chat"][0]).get_absolute_url()))
    assert "type <code>function</code>" not in page
    assert event_and_type('event: ping\ndata: {"type": "ping"}') == ("ping", "ping")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["event:", "event: x", "\n", "data:", " ", '{"type"', '"type"', ":", '"a"', "{", "}"]
        )
        | st.text(max_size=8),
        max_size=12,
    )
)
def test_a_frames_event_and_type_skip_their_search_only_where_it_cannot_match(pieces):
    # The searches run only where their literal is; they find what they found everywhere.
    from inspector.captures.pages.frames import _EVENT_LINE, _TYPE_KEY, event_and_type

    raw = "".join(pieces)
    event, kind = _EVENT_LINE.search(raw), _TYPE_KEY.search(raw)
    expected = (event.group(1).strip() if event else "", kind.group(1) if kind else "")
    assert event_and_type(raw) == expected
