"""A live call card is rendered by the capture page's own card template:
its fragment rows (JSON state included) are the rows the stored page shows
for the same frames, in every dialect, and its identity is told in the
dialect's terms; the refusal banner is the page's too.  Live messages carry
only rendered rows and where they go."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from page_helpers import html

from inspector.captures.pages.calls import CALLS_PER_PAGE
from inspector.captures.pages.live_cards import CARDS_PER_BATCH, RENDER_INTERVAL
from inspector.captures.store import store_stream
from inspector.live.broadcast import merge_batches
from inspector.live.session import LiveCapture
from inspector.live.snapshot import DONE, SnapshotPager

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
STREAMS = {
    "chat": "parallel_calls_ok.sse",
    "responses": "responses_parallel_calls_ok.sse",
    "messages": "messages_parallel_calls_ok.sse",
    "gemini": "gemini_parallel_calls_ok.sse",
}
FRAGMENT_ROW = re.compile(r'(<tr id="(frag-\d+-\d+)".*?</tr>)', re.S)
CARD = re.compile(r'(<article class="call card[^"]*" id="(call-\d+)".*?</article>)', re.S)
HEAD = re.compile(r'<header class="call-head">(.*?)</header>', re.S)


def chunk(delta: dict, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


def live_cards(data: bytes, step: int = 300, *, close: bool = True) -> dict[str, str]:
    """`data` recorded live in reads of `step` bytes: each call's card as
    the last message that carried it had it."""
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = iter(range(0, 10**6, 10)).__next__  # no card held back: 10 s apart
    messages = [live.append(data[at : at + step]) for at in range(0, len(data), step)]
    if close:
        messages.append(live.close())
    cards = {}
    for message in filter(None, messages):
        assert all(set(frame) == {"number", "html"} for frame in message["frames"])
        for call in message["calls"]:
            assert set(call) == {"position", "html"}
            cards[f"call-{call['position']}"] = call["html"].replace(live.slug, "SLUG")
    return cards


def stored_cards(client, data: bytes) -> dict[str, str]:
    capture = store_stream(data, stream_format="sse")
    page = html(client.get(capture.get_absolute_url())).replace(capture.slug, "SLUG")
    return {anchor: card for card, anchor in CARD.findall(page)}


def fragment_rows(cards: dict[str, str]) -> dict[str, str]:
    rows = {}
    for card in cards.values():
        rows.update({anchor: row.strip() for row, anchor in FRAGMENT_ROW.findall(card)})
    return rows


@pytest.mark.parametrize("dialect", sorted(STREAMS))
def test_live_fragment_rows_are_the_stored_pages_rows(client, dialect):
    data = (DEMO / STREAMS[dialect]).read_bytes()
    live, stored = live_cards(data), stored_cards(client, data)
    assert sorted(live) == sorted(stored) and live
    live_rows, stored_rows = fragment_rows(live), fragment_rows(stored)
    assert live_rows and sorted(live_rows) == sorted(stored_rows)
    for anchor, row in live_rows.items():
        assert row == stored_rows[anchor], anchor


@pytest.mark.parametrize("dialect", ["responses", "messages", "gemini"])
def test_a_live_card_tells_the_call_in_its_dialects_terms(client, dialect):
    data = (DEMO / STREAMS[dialect]).read_bytes()
    live, stored = live_cards(data), stored_cards(client, data)
    term = {"responses": "output_index", "messages": "content block", "gemini": "functionCall part"}
    for anchor, card in live.items():
        live_terms = re.findall(r'<span class="chip term">(.*?)</span>', card)
        stored_terms = re.findall(r'<span class="chip term">(.*?)</span>', stored[anchor])
        assert live_terms == stored_terms and live_terms[0].startswith(term[dialect])


def test_json_state_after_a_closed_object_agrees_live_and_stored(client):
    """`{"a":1}` then ` x`: invalid from offset 8, and the object had closed
    (live.js once said "depth 0" there, the stored page "complete")."""
    header = {"index": 0, "id": "call_1", "type": "function"}
    header["function"] = {"name": "f", "arguments": '{"a":1'}
    data = chunk({"tool_calls": [header]})
    data += chunk({"tool_calls": [{"index": 0, "function": {"arguments": "} x"}}]})
    data += chunk({}, "tool_calls") + b"data: [DONE]\n\n"
    live_rows = fragment_rows(live_cards(data, step=len(data), close=False))
    stored_rows = fragment_rows(stored_cards(client, data))
    state = re.compile(r'<td class="state">(.*?)</td>', re.S)
    second = state.search(live_rows["frag-0-1"]).group(1)
    assert "invalid from offset 8" in second and ">complete<" in second
    assert "depth" not in second
    assert live_rows == stored_rows


def test_a_refusal_mid_stream_is_the_pages_banner_and_marks_its_frame():
    live = LiveCapture.open(stream_format="sse")
    for call_id in ("call_a", "call_b"):  # two unsettled calls on index 0
        header = {"index": 0, "id": call_id, "function": {"name": "grep", "arguments": ""}}
        live.append(chunk({"tool_calls": [header]}))
    batch = live.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))
    assert batch["refusal"]["code"] == "AMBIGUOUS_CONTINUATION"
    banner = batch["refusal_html"]
    assert banner.startswith('<div class="refusal" role="note">')
    assert 'class="refusal-frame-link">frame 2</a>' in banner and "not retryable" in banner
    (row,) = batch["frames"]
    assert '<span class="mark mark-refusal">AMBIGUOUS_CONTINUATION</span>' in row["html"]
    assert 'class="mark mark-refusal"' in row["html"] and "is-refusal" in row["html"]


def test_untrusted_text_in_a_live_card_is_escaped():
    header = {"index": 0, "id": "<i>id</i>", "type": "function"}
    header["function"] = {"name": "<script>x()</script>", "arguments": '{"k":"<b>v</b>"}'}
    live = LiveCapture.open(stream_format="sse")
    (card,) = live.append(chunk({"tool_calls": [header]}))["calls"]
    assert "<script>" not in card["html"] and "<b>" not in card["html"]
    assert "&lt;script&gt;x()&lt;/script&gt;" in card["html"] and "&lt;b&gt;v" in card["html"]


def test_a_fast_call_is_rendered_again_at_most_every_interval(client):
    """Cards are throttled per call: a batch inside the interval carries no
    card, a later one the newest state.  Closing renders none: the page swaps
    in the finished page's main part, which shows every change."""
    header = {"index": 0, "id": "call_1", "type": "function"}
    header["function"] = {"name": "f", "arguments": '{"a":'}
    now = [0.0]
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = lambda: now[0]

    def more(text: str) -> list:
        return live.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]}))[
            "calls"
        ]

    assert len(live.append(chunk({"tool_calls": [header]}))["calls"]) == 1
    now[0] = RENDER_INTERVAL / 2
    assert more("1") == [] and live.held_back
    now[0] = RENDER_INTERVAL
    (card,) = more("2")
    assert 'id="frag-0-2"' in card["html"] and "3 fragments" in card["html"]
    now[0] += RENDER_INTERVAL / 2
    assert more("}") == []
    closing = live.close()
    assert closing["type"] == "capture.finished" and closing["calls"] == []
    main = html(client.get(live.capture.get_absolute_url(), {"partial": "main"}))
    assert 'id="frag-0-3"' in main and "4 fragments" in main


def test_a_batch_renders_a_bounded_number_of_cards_the_stalest_first():
    headers = [
        {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "f", "arguments": ""},
        }
        for i in range(CARDS_PER_BATCH + 2)
    ]
    now = [0.0]
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = lambda: now[0]
    first = live.append(chunk({"tool_calls": headers}))["calls"]
    assert [card["position"] for card in first] == list(range(CARDS_PER_BATCH))
    now[0] = 10 * RENDER_INTERVAL
    later = live.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}))
    # the calls never rendered go before call 0, rendered once already
    assert [c["position"] for c in later["calls"]] == list(
        range(CARDS_PER_BATCH, 2 * CARDS_PER_BATCH)
    )
    held = live.held_cards()["calls"]  # the stream paused: every card held back, now
    assert {c["position"] for c in first + later["calls"] + held} == set(range(len(headers)))
    assert not live.held_back


def test_merged_batches_keep_every_frame_and_the_newest_card():
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = iter(range(0, 10**6, 10)).__next__
    header = {"index": 0, "id": "call_1", "type": "function"}
    header["function"] = {"name": "f", "arguments": '{"pa'}
    pieces = [chunk({"tool_calls": [header]})]
    pieces.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th":"/a"}'}}]}))
    first, second = (live.append(piece) for piece in pieces)
    merged = merge_batches(first, second)
    assert [f["number"] for f in merged["frames"]] == [0, 1]
    (card,) = merged["calls"]
    assert card == second["calls"][0] and 'id="frag-0-1"' in card["html"]


def test_a_late_viewer_gets_the_cards_and_the_marked_rows_of_its_page():
    header = {"index": 0, "id": "call_9", "type": "function"}
    header["function"] = {"name": "grep", "arguments": '{"q":'}
    live = LiveCapture.open(stream_format="sse")
    live.append(chunk({"role": "assistant"}))
    sent = live.append(chunk({"tool_calls": [header]}))
    pager = SnapshotPager(live.capture, after=1)  # the page it loaded holds frames 0 and 1
    messages = []
    while (message := pager.next_page()) is not DONE:
        messages.append(message)
    (message,) = messages
    (card,) = message["calls"]
    assert "call_9" in card["html"] and 'id="frag-0-0"' in card["html"]
    # frame 1's row again, now with the call it touched; frame 0 touched none
    assert message["frames"] == sent["frames"]
    assert '<a href="#call-0">#0</a>' in message["frames"][0]["html"]


def test_live_js_only_inserts():
    """No scanner, no row builder, no copied limit or label in live.js."""
    script = (Path(__file__).resolve().parents[2] / "static" / "inspector" / "live.js").read_text()
    for gone in ("Scanner", "fragmentRow", "newCard", "stateChips", "cutMiddle", "WINDOW"):
        assert gone not in script, gone
    for label in ("invalid from offset", "inside a string", "depth ", "settled at frame"):
        assert label not in script, label
    assert "createElement" not in script and "innerHTML" not in script
    assert len(script.splitlines()) < 300


def test_a_late_viewer_gets_the_newest_page_of_cards():
    """As many cards as a page of them, the newest: a capture of many calls
    costs a late viewer a bounded snapshot."""
    live = LiveCapture.open(stream_format="sse")
    count = CALLS_PER_PAGE + 3
    for i in range(count):
        header = {"index": i, "id": f"call_{i}", "type": "function"}
        header["function"] = {"name": "f", "arguments": "{}"}
        live.append(chunk({"tool_calls": [header]}))
    pager = SnapshotPager(live.capture, after=-1)
    messages = []
    while (message := pager.next_page()) is not DONE:
        messages.append(message)
    positions = [call["position"] for call in messages[-1]["calls"]]
    assert positions == list(range(count - CALLS_PER_PAGE, count))


def test_the_dialect_note_follows_the_frames_that_tell_it():
    """The page was rendered before any frame: its note said chat was
    assumed; the first batch brings the page's note for what the frames tell."""
    data = (DEMO / STREAMS["messages"]).read_bytes()
    live = LiveCapture.open(stream_format="sse")
    first = live.append(data[:400])
    note = first["dialect_html"]
    assert note.startswith('<p class="dialect-note" id="dialect-note" data-dialect="messages">')
    assert "Read as Anthropic Messages (messages), told by its frames." in note
    assert live.append(data[400:800])["dialect_html"] == ""  # unchanged: not sent again


def test_each_read_takes_the_fragments_so_a_cards_context_scans_none():
    """A card's context is taken under the recording's lock: the fragments
    are taken into the call's trail as each batch is read (half a second's
    scan at once held a fast stream's frames for milliseconds), and the
    card's fragment rows are made when it renders, out of the lock."""
    live = LiveCapture.open(stream_format="sse")
    head = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "["}}
    live.append(chunk({"role": "assistant"}) + chunk({"tool_calls": [head]}))
    for i in range(50):
        piece = {"index": 0, "function": {"arguments": f'"{i}",'}}
        live.append(chunk({"tool_calls": [piece]}))  # (throttled: no card meanwhile)
    trail = live.rows._trails[0]
    assert trail.count == 51
    card = live.rows.card_to_render(0)
    assert trail.count == 51
    assert card.context["card"].fragments == [] and len(card.fragments) > 0
    html = card.render().html
    assert len(card.context["card"].fragments) == len(card.fragments)
    assert "of 51" in html  # (the newest page: the last fragments)


def one_long_call_then_four_more() -> tuple[list[bytes], int]:
    """Call 0's 42 fragments, then calls 1-4 start (five calls share the page
    of cards: 20 fragment rows each, not 25), then call 4's; and the index of
    the piece that starts calls 1-4."""
    header = {"index": 0, "id": "call_0", "type": "function"}
    header["function"] = {"name": "f", "arguments": "["}
    pieces = [chunk({"tool_calls": [header]})]
    pieces += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": f"{n},"}}]}) for n in range(40)
    ]
    pieces.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "0]"}}]}))
    joining = [
        {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "g", "arguments": ""},
        }
        for i in range(1, 5)
    ]
    joins = len(pieces)
    pieces.append(chunk({"tool_calls": joining}))
    pieces += [
        chunk({"tool_calls": [{"index": 4, "function": {"arguments": piece}}]})
        for piece in ["{", '"a"', ":", "1", "}"]
    ]
    return pieces, joins


def last_card_of_call_0(messages: list[dict | None]) -> str:
    cards = [c["html"] for m in messages if m for c in m["calls"] if c["position"] == 0]
    return cards[-1] if cards else ""


def shown_fragments(card: str) -> list[str]:
    return [anchor for _, anchor in FRAGMENT_ROW.findall(card)]


def test_a_shown_card_shrinks_to_its_share_when_more_calls_join_the_page(client):
    """A page of cards shares its fragment rows among its calls: when a
    fifth call starts, each card shows fewer fragments.  The watchers get the
    cards already shown again, with their new share, though their calls did
    not change: as a reload shows them."""
    pieces, _ = one_long_call_then_four_more()
    data = b"".join(pieces)
    live = LiveCapture.open(stream_format="sse")
    live.rows.clock = iter(range(0, 10**6, 10)).__next__  # no card held back: 10 s apart
    messages = [live.append(piece) for piece in pieces]
    messages.append(live.held_cards())  # the stream pauses: every card due goes out
    stored = stored_cards(client, data + b"data: [DONE]\n\n")
    # 42 fragments, 20 a page (100 rows / 5 calls): the stored page shows the first 20,
    # a live card the newest page, the last two (with 25 a page, the last 17).
    assert len(FRAGMENT_ROW.findall(stored["call-0"])) == 20
    assert shown_fragments(last_card_of_call_0(messages)) == ["frag-0-40", "frag-0-41"]
    live.close()


def test_a_process_that_took_the_capture_over_reshares_the_cards_the_other_showed():
    """HTTP ingest: the process that rendered call 0's card is not the one
    whose append starts calls 1-4; that one renders call 0's card again."""
    pieces, joins = one_long_call_then_four_more()
    first = LiveCapture.open(stream_format="sse")
    first.rows.clock = iter(range(0, 10**6, 10)).__next__
    shown = [first.append(piece) for piece in pieces[:joins]]
    assert shown_fragments(last_card_of_call_0(shown))[0] == "frag-0-25"  # 25 a page
    resumed = LiveCapture.resume(first.capture, b"".join(pieces[:joins]), dialect="auto")
    resumed.rows.clock = iter(range(0, 10**6, 10)).__next__
    messages = [resumed.append(piece) for piece in pieces[joins:]]
    messages.append(resumed.held_cards())
    assert shown_fragments(last_card_of_call_0(messages)) == ["frag-0-40", "frag-0-41"]
    resumed.close()
