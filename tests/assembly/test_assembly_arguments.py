"""Section 4 of the assembly spec: the incremental arguments scan and the strict
check at the end, with `invalid_at` and settling."""

from __future__ import annotations

import pytest
from streams import DONE, calls, code, finish, run_sse, tool

from inspector.assembly import ArgumentScanner
from inspector.assembly import assembler as assembler_module
from inspector.assembly import scanner as scanner_module


def scan(*fragments: str) -> ArgumentScanner:
    scanner = ArgumentScanner()
    for fragment in fragments:
        scanner.feed(fragment)
    return scanner


def one_call_stream(*fragments, id="call_A", name="read"):  # noqa: A002
    """A call whose header carries the first fragment (frame 0) and whose later
    fragments come one per frame (frames 1, 2, ...), then finish and done."""
    first, *rest = fragments
    return run_sse(
        calls(tool(0, id, name, first)),
        *[calls(tool(0, args=fragment)) for fragment in rest],
        finish(),
        DONE,
    )


# -- the scanner -----------------------------------------------------------------------------


def test_the_scanner_finds_where_the_root_object_closes():
    scanner = scan('{"a":', '{"b":[1,2]}', "}")
    assert scanner.closed
    assert scanner.closed_at == len('{"a":{"b":[1,2]}}')
    assert scanner.invalid_at is None
    assert scanner.depth == 0


def test_the_root_is_not_closed_while_brackets_are_open():
    scanner = scan('{"a":[{', "}")
    assert not scanner.closed
    assert scanner.depth == 2
    assert scanner.invalid_at is None


def test_blank_text_before_the_root_is_allowed():
    scanner = scan(" \t\r\n", " {}")
    assert scanner.closed_at == 7
    assert scanner.invalid_at is None


@pytest.mark.parametrize(
    ("text", "offset"),
    [("[1,2]", 0), ("  x", 2), ('"{}"', 0), ("}", 0), ("\f{}", 0), ("\u00a0{}", 0)],
)
def test_a_first_non_blank_character_other_than_a_brace_is_invalid_there(text, offset):
    scanner = scan(text)
    assert scanner.invalid_at == offset
    assert not scanner.closed


def test_a_closing_bracket_that_does_not_match_the_innermost_open_one_is_invalid():
    scanner = scan('{"paths":["/a","/b"', "}]}")
    assert scanner.invalid_at == len('{"paths":["/a","/b"')
    assert not scanner.closed


def test_a_closing_brace_for_an_open_array_inside_an_object_is_invalid():
    assert scan('{"a":{"b":]').invalid_at == 10


@pytest.mark.parametrize(
    ("fragments", "offset"),
    [(('{"a":1}', " x"), 8), (("{}{}",), 2), (("{}", "\n\t ", "]"), 5), (("{}", "{"), 2)],
)
def test_non_blank_text_after_the_closed_root_is_invalid(fragments, offset):
    scanner = scan(*fragments)
    assert scanner.closed
    assert scanner.invalid_at == offset


def test_blank_text_after_the_closed_root_is_fine():
    scanner = scan("{}", "  \n", "\t")
    assert scanner.closed_at == 2
    assert scanner.invalid_at is None


def test_brackets_inside_strings_do_not_count():
    scanner = scan('{"a":"}]{[", "b":"', "]]}}", '"}')
    assert scanner.closed
    assert scanner.invalid_at is None


def test_an_escaped_quote_cut_at_the_fragment_boundary_stays_inside_the_string():
    scanner = scan('{"a":"x\\', '"}', '"}')
    assert scanner.closed_at == len('{"a":"x\\"}"}')
    assert scanner.invalid_at is None


def test_an_escaped_backslash_cut_at_the_boundary_ends_before_the_quote():
    scanner = scan('{"a":"\\', "\\", '"}')
    assert scanner.closed_at == len('{"a":"\\\\"}')


def test_the_scanner_keeps_string_state_across_fragments():
    scanner = scan('{"a":"', "{[")
    assert scanner.in_string
    assert scanner.depth == 1
    scanner.feed('"}')
    assert not scanner.in_string and scanner.closed


def test_the_scan_stops_at_the_first_invalid_point():
    scanner = scan('{"a":[}', "]}", "xyz")
    assert scanner.invalid_at == 6
    assert not scanner.closed
    assert scanner.length == len('{"a":[}]}xyz')


def test_scanner_offsets_count_code_points_not_bytes():
    scanner = scan('{"ü":"東京', '😀"]')
    assert scanner.invalid_at == len('{"ü":"東京😀"')
    assert scanner.invalid_at == 10


# -- linear work -----------------------------------------------------------------------------


class CountingPattern:
    """Wraps a compiled pattern and counts the characters its searches walk over."""

    def __init__(self, pattern, counter):
        self.pattern = pattern
        self.counter = counter

    def search(self, text, pos=0):
        found = self.pattern.search(text, pos)
        self.counter["searches"] += 1
        self.counter["examined"] += (found.start() + 1 if found else len(text)) - pos
        return found


@pytest.fixture
def work(monkeypatch):
    counter = {"searches": 0, "examined": 0}
    for name in ("_STRUCTURAL", "_STRING_STOP", "_NON_BLANK"):
        pattern = getattr(scanner_module, name)
        monkeypatch.setattr(scanner_module, name, CountingPattern(pattern, counter))
    return counter


def big_arguments(size: int) -> str:
    body = '{"k":"' + "v" * 10 + '","n":[1,{"x":"}]\\""}]},'
    text = '{"items":['
    while len(text) < size:
        text += body
    return text + '{"end":true}]}'


def test_a_200kb_argument_fed_one_character_at_a_time_costs_linear_work(work):
    text = big_arguments(200_000)
    scanner = ArgumentScanner()
    for char in text:
        scanner.feed(char)
    assert scanner.closed_at == len(text)
    assert scanner.invalid_at is None
    # Every character is walked over a bounded number of times.
    assert work["examined"] <= 2 * len(text)
    assert work["searches"] <= 2 * len(text)


def test_later_fragments_never_rescan_the_text_already_seen(work):
    scanner = ArgumentScanner()
    scanner.feed(big_arguments(100_000)[:-2])
    work["examined"] = work["searches"] = 0
    for _ in range(1000):
        scanner.feed(" ")
    scanner.feed("]}")
    assert scanner.closed
    assert work["examined"] <= 1002


def test_a_long_string_value_in_one_fragment_is_walked_once(work):
    text = '{"blob":"' + "x" * 100_000 + '"}'
    assert scan(text).closed_at == len(text)
    assert work["examined"] <= len(text)
    assert work["searches"] <= 10


class CountingJson:
    def __init__(self, module):
        self.module = module
        self.JSONDecodeError = module.JSONDecodeError
        self.loads_calls = 0

    def loads(self, text):
        self.loads_calls += 1
        return self.module.loads(text)


def test_the_assembler_parses_arguments_once_at_the_end_not_per_fragment(monkeypatch):
    counting = CountingJson(assembler_module.orjson)
    monkeypatch.setattr(assembler_module, "orjson", counting)
    text = big_arguments(20_000)
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    result = one_call_stream(*pieces)
    assert result["outcome"] == "ok"
    assert result["calls"][0]["arguments_text"] == text
    assert counting.loads_calls == 1


# -- blank and the strict check --------------------------------------------------------------


@pytest.mark.parametrize("blank", ["", " ", "\n\t\r "])
def test_blank_arguments_mean_an_empty_object(blank):
    result = one_call_stream(blank)
    assert result["outcome"] == "ok"
    assert result["calls"][0]["arguments"] == {}
    assert result["calls"][0]["arguments_text"] == blank


@pytest.mark.parametrize("bad", ["[]", '"{}"', "null", "1", "true"])
def test_there_is_no_empty_object_fallback_for_text_that_is_not_an_object(bad):
    result = one_call_stream(bad)
    assert code(result) == "INVALID_ARGUMENTS"
    assert result["calls"][0]["arguments"] is None
    assert result["calls"][0]["invalid_at"]["offset"] == 0


def test_a_value_the_scan_accepts_but_the_parser_rejects_fails_with_a_parser_offset():
    result = one_call_stream('{"a": ', "tru}")
    assert code(result) == "INVALID_ARGUMENTS"
    call = result["calls"][0]
    # Settling follows the scan: the root closed in frame 1.
    assert call["settled_frame"] == 1
    assert call["invalid_at"]["frame"] == 1
    assert 6 <= call["invalid_at"]["offset"] <= 10
    assert call["invalid_at"]["message"]
    assert result["refusal"]["frame"] == 1
    assert result["refusal"]["call"] == 0


@pytest.mark.parametrize("bad_value", ["01", "1.", "+1", "0x1F", "NaN", "Infinity", "'a'"])
def test_the_end_check_is_strict_json(bad_value):
    result = one_call_stream('{"n": ', bad_value, "}")
    assert code(result) == "INVALID_ARGUMENTS"
    # Parsers differ on the exact offset; it lies in the bad value or just after it.
    assert result["calls"][0]["invalid_at"]["frame"] in (1, 2)
    assert result["calls"][0]["invalid_at"]["offset"] >= 6


def test_a_parser_offset_is_in_code_points_and_maps_to_the_right_fragment():
    first = '{"k":"' + "é" * 20 + '",'
    second = '"b":01'
    third = ', "c":' + " " * 30 + "1}"
    result = one_call_stream(first, second, third)
    invalid_at = result["calls"][0]["invalid_at"]
    assert invalid_at["frame"] == 1
    assert len(first) <= invalid_at["offset"] < len(first) + len(second)


def test_an_unexpected_end_points_at_the_last_non_empty_fragment():
    result = one_call_stream('{"path":', '"/var/lo', "")
    call = result["calls"][0]
    assert code(result) == "INVALID_ARGUMENTS"
    assert call["invalid_at"]["frame"] == 1
    assert call["settled_frame"] is None
    assert result["refusal"]["frame"] == 1


def test_a_blank_last_fragment_is_still_a_non_empty_fragment():
    result = one_call_stream('{"path":', '"/a"', "   ")
    assert result["calls"][0]["invalid_at"]["frame"] == 2


def test_a_scan_found_invalid_point_wins_over_an_earlier_parser_error():
    result = one_call_stream('{"a": tru', "}}")
    invalid_at = result["calls"][0]["invalid_at"]
    assert invalid_at == {"frame": 1, "offset": 10, "message": invalid_at["message"]}


def test_a_mismatched_bracket_fails_at_its_frame_and_the_call_never_settles():
    result = one_call_stream('{"paths":["/a",', '"/b"}', "]}")
    call = result["calls"][0]
    assert call["settled_frame"] is None
    assert call["invalid_at"]["frame"] == 1
    assert call["invalid_at"]["offset"] == len('{"paths":["/a","/b"')
    assert result["refusal"]["frame"] == 1


def test_trailing_text_after_the_root_fails_but_the_call_settled_when_the_root_closed():
    result = run_sse(
        calls(tool(0, "call_A", "read", '{"a":1}')),
        calls(tool(0, "call_A", args=" ")),
        calls(tool(id="call_A", args='garbage"')),
        finish(),
        DONE,
    )
    call = result["calls"][0]
    assert call["settled_frame"] == 0
    assert call["invalid_at"]["frame"] == 2
    assert call["invalid_at"]["offset"] == 8


def test_invalid_at_offsets_count_code_points_of_arguments_text():
    result = one_call_stream('{"ü":"東京', '😀"]')
    call = result["calls"][0]
    assert call["invalid_at"]["offset"] == 10
    assert call["arguments_text"][10] == "]"
    assert call["invalid_at"]["frame"] == 1


def test_a_call_whose_text_is_invalid_before_its_root_closes_never_settles():
    result = one_call_stream("x", "{}")
    assert result["calls"][0]["settled_frame"] is None
    assert result["calls"][0]["invalid_at"]["offset"] == 0
    assert result["calls"][0]["invalid_at"]["frame"] == 0


def test_an_unsettled_invalid_call_keeps_taking_id_less_continuations():
    # It never settles, so an id-less delta still continues it.
    result = one_call_stream('{"a":]', "1}")
    assert result["calls"][0]["arguments_text"] == '{"a":]1}'
    assert result["calls"][0]["frames"] == [0, 1]


def test_escaped_quotes_split_across_frames_assemble_correctly():
    result = one_call_stream('{"q":"say \\', '"hi\\', '"", "b":"}', '"}')
    assert result["outcome"] == "ok"
    assert result["calls"][0]["arguments"] == {"q": 'say "hi"', "b": "}"}
    assert result["calls"][0]["settled_frame"] == 3


def test_deeply_nested_arguments_parse_up_to_the_strict_limit():
    deep = '{"a":' * 1024 + "1" + "}" * 1024
    result = one_call_stream(deep)
    assert result["outcome"] == "ok"
    too_deep = '{"a":' * 1025 + "1" + "}" * 1025
    assert code(one_call_stream(too_deep)) == "INVALID_ARGUMENTS"
