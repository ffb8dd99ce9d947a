"""A live frame row rendered from its shape's stamp (`live/row_stamps.py`) is
exactly what the page's row template renders for it: every frame of every
demo stream (all dialects, refusals, drops and anomalies), at numbers and
times of every size, with hostile raw text; and a shape whose stamp would
not give the template's output is rendered by the template."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.captures.pages.frames import frame_row, live_frame_row
from inspector.captures.store import store_stream
from inspector.live import row_stamps

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "inspector" / "captures" / "demo"
HOSTILE = [
    'data: {"x": "<script>alert(1)</script>"}',
    "data: \"'><img src=x onerror=alert(1)>&amp;",
    'event: <b>\ndata: {"type": "<i>"}',
    "data: \ue0000\ue001 \x00 nul and placeholders",
    "data: " + "x" * 2500,  # longer than the table shows
]


def stored_frames():
    for path in sorted(DEMO.glob("*.sse")):
        capture = store_stream(path.read_bytes(), stream_format="sse", title=path.name)
        yield from capture.frames.order_by("number")


def test_every_demo_frame_is_stamped_as_the_template_renders_it():
    checked = 0
    for frame in stored_frames():
        for number, arrived in ((frame.number, frame.arrived_ms), (frame.number + 12345, 98765.4)):
            args = ("slug-x", number, frame.kind, frame.raw, arrived)
            notes = {"calls": frame.calls, "marks": frame.marks, "did": frame.did}
            expected = live_frame_row(*args, **notes, dialect="chat")
            assert row_stamps.live_row_html(*args, **notes, dialect="chat") == expected
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_raw_text_is_escaped_as_the_template_escapes_it(raw):
    did = [["args", 0, "<f>", "</td>\"'", 3], ["text", None, "<em>", 0]]
    for number in (0, 1, 1000):
        args = ("s", number, "chunk", raw, None)
        expected = live_frame_row(*args, calls=[0], marks=["<m>"], did=did)
        assert row_stamps.live_row_html(*args, calls=[0], marks=["<m>"], did=did) == expected
        assert "<script>" not in expected and "<img" not in expected


def test_a_shape_the_stamp_cannot_give_is_rendered_by_the_template(monkeypatch):
    """A template that transforms a value (here: cuts the number) breaks the
    stamp; the check on the shape's first row sees it."""
    monkeypatch.setattr(row_stamps, "_stamps", {})
    monkeypatch.setattr(row_stamps, "render", lambda row: f"<b>{str(row.number)[:2]}</b>")
    row = frame_row("s", 1234, "chunk", "data: {}", 8, 1.0)
    assert row_stamps.stamped(row) == "<b>12</b>"
    assert list(row_stamps._stamps.values()) == [None]
    assert row_stamps.stamped(frame_row("s", 5678, "chunk", "data: {}", 8, 1.0)) == "<b>56</b>"


def test_rows_whose_values_are_equal_or_falsy_take_stamps_of_their_own(monkeypatch):
    """Equal values share a slot and "" and 0 stay as they are, so a template
    that compares values or tests them renders each row as it would itself."""
    from django.template import Context, Template

    template = Template(
        "{% if row.number == row.raw_cut %}same{% else %}apart{% endif %}"
        " {{ row.number }}/{{ row.raw_cut }}{% if not row.raw_cut %} whole{% endif %}"
        " {% if row.time == row.kind %}={% endif %}{{ row.kind }}"
    )
    monkeypatch.setattr(row_stamps, "_stamps", {})
    monkeypatch.setattr(row_stamps, "render", lambda row: template.render(Context({"row": row})))
    rows = [
        frame_row("s", number, kind, "data: {}", length, None)
        for number, length in ((7, 7 + 2000), (7, 8 + 2000), (0, 8), (1, 8), (3, 2003))
        for kind in ("chunk", "")
    ]
    for row in rows:
        assert row_stamps.stamped(row) == row_stamps.render(row)
    assert [row_stamps.stamped(row)[:10] for row in rows[:4]] == [
        "same 7/7 c", "same 7/7 =", "apart 7/8 ", "apart 7/8 "
    ]  # fmt: skip
    assert None not in row_stamps._stamps.values()


def test_a_bool_equal_to_a_number_is_part_of_the_shape(monkeypatch):
    """True == 1: a template comparing a row's `focus` with its number renders
    "same" for frame 1 and "apart" for frame 2, and so do the stamps."""
    from django.template import Context, Template

    template = Template(
        "{% if row.focus == row.number %}same{% else %}apart{% endif %} {{ row.number }}"
    )
    monkeypatch.setattr(row_stamps, "_stamps", {})
    monkeypatch.setattr(row_stamps, "render", lambda row: template.render(Context({"row": row})))
    rows = [frame_row("s", n, "chunk", "data: {}", 8, None, focus=n) for n in (2, 1, 3, 1)]
    assert [row_stamps.stamped(row) for row in rows] == ["apart 2", "same 1", "apart 3", "same 1"]


def test_a_dataclass_without_fields_has_a_shape():
    import dataclasses

    @dataclasses.dataclass
    class Empty:
        pass

    shape: list = []
    row_stamps._walk([Empty(), "x"], shape, {}, [])
    assert shape == [Empty, 0]


def test_rows_whose_lists_nest_apart_take_stamps_of_their_own(monkeypatch):
    """A shape is written flat, each list with its length: `[["a"], "b"]` and
    `[["a", "b"]]` have the same leaves in the same order, not the same shape."""
    import dataclasses

    from django.template import Context, Template

    @dataclasses.dataclass
    class Row:
        calls: list

    template = Template("{{ row.calls|length }} {{ row.calls.0|length }} {{ row.calls.0.0 }}")
    monkeypatch.setattr(row_stamps, "_stamps", {})
    monkeypatch.setattr(row_stamps, "render", lambda row: template.render(Context({"row": row})))
    rows = [Row([["a"], "b"]), Row([["a", "b"]]), Row([["c"], "d"]), Row([["c", "d"]])]
    assert [row_stamps.stamped(row) for row in rows] == ["2 1 a", "1 2 a", "2 1 c", "1 2 c"]
    assert None not in row_stamps._stamps.values()


@pytest.mark.parametrize("char", list("&<>\"'"))
def test_each_character_the_escape_changes_is_escaped_on_a_stamped_row(monkeypatch, char):
    """The shape's first row is checked against the template; the next ones
    are not, so each character is put in the second row of a shape (one
    shape, stamped)."""
    monkeypatch.setattr(row_stamps, "_stamps", {})
    rows = [frame_row("s", 5, "chunk", text, 9, 1.5) for text in ("data: {}", f"da{char}a {char}")]
    assert [row_stamps.stamped(row) for row in rows] == [row_stamps.render(row) for row in rows]
    assert len(row_stamps._stamps) == 1 and None not in row_stamps._stamps.values()


@pytest.mark.parametrize("source", ["{% if row.focus %}x{% endif %}", "<{{ row.kind }}>"])
def test_a_template_writing_no_value_or_one_is_stamped(monkeypatch, source):
    from django.template import Context, Template

    template = Template(source)
    monkeypatch.setattr(row_stamps, "_stamps", {})
    monkeypatch.setattr(row_stamps, "render", lambda row: template.render(Context({"row": row})))
    rows = [frame_row("s", n, kind, "data: {}", 8, None) for n, kind in ((1, "a"), (2, "<b>"))]
    assert [row_stamps.stamped(row) for row in rows] == [row_stamps.render(row) for row in rows]
    assert None not in row_stamps._stamps.values()
