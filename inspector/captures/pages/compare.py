"""Two captures side by side: `/compare/?a=<slug>&b=<slug>`.

Frames are aligned by number and read one page at a time by number range
(as on the capture page), both sides in one query; whether a frame's raw
text equals its twin's is decided by the database (`Exists` on the same
number and the same text), so a long frame is never loaded to be compared.
Calls are aligned by id, then by position for the rest, with the id, name,
index, choice, arguments and outcome of each side; arguments are compared by
length, head and tail in the query, and exactly (in the database) in one
more query only for pairs whose long texts look alike.

Either side may be a policy other than strict (`?pa=lenient`), so one
capture's strict and lenient assemblies compare too.  A fixed number of
queries whatever the size: captures, assemblies, frames, calls, and at most
one for long arguments (plus one count per side still being recorded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import Exists, OuterRef, Q
from django.db.models import Value as V
from django.db.models.functions import Greatest, Length, Substr
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from inspector.assembly import POLICIES, STRICT
from inspector.lenses.compare import pair_by_id_then_position

from ..models import Assembly, Call, Capture, Frame
from .assemblies import call_count
from .frames import frame_total, mark_tone
from .paging import Pager, pager, pager_links

FRAMES_PER_PAGE = 100
CALLS_SHOWN = 200  # calls of each side read and aligned
ARGS_SHOWN = 200  # characters of a call's arguments shown (and compared as head and tail)
RAW_SHOWN = 600  # characters of a frame's raw text shown per side
SLUG = re.compile(r"[A-Za-z0-9_-]{1,32}")
CAPTURE_URL = re.compile(r"/c/([A-Za-z0-9_-]{1,32})(?:/|$)")


def slug_of(text: str) -> str:
    """A slug from what a person pastes: the slug, or a capture's URL."""
    text = (text or "").strip()
    found = CAPTURE_URL.search(text)
    if found:
        return found.group(1)
    return text if SLUG.fullmatch(text) else ""


@dataclass
class Side:
    label: str  # "A" or "B"
    capture: Capture
    policy: str
    assembly: Assembly | None
    frame_total: int


@dataclass
class FramePair:
    number: int
    a: Frame | None
    b: Frame | None
    differs: bool
    a_marks: list[tuple[str, str]]  # (mark, tone)
    b_marks: list[tuple[str, str]]


@dataclass
class CallSide:
    position: int
    call_id: str
    name: str
    index: int | None
    choice: int
    arguments: str
    arguments_length: int
    outcome: str  # ok, invalid, the refusal code, not checked
    tone: str


@dataclass
class CallPair:
    a: CallSide | None
    b: CallSide | None
    by: str  # "id", "position", or "" when one side lacks it
    differs: set[str]


def _load_sides(slugs: list[str]) -> dict[str, Capture]:
    return {
        capture.slug: capture
        for capture in Capture.objects.filter(slug__in=slugs).only(*Capture.SUMMARY_FIELDS)
    }


def _assemblies(sides: list[tuple[Capture, str]]) -> dict[tuple[int, str], Assembly]:
    condition = Q(pk__in=[])
    for capture, policy in sides:
        condition |= Q(capture=capture, policy=policy)
    rows = (
        Assembly.objects.filter(condition)
        .defer("result_json", "text")
        .annotate(call_count=call_count())
    )
    return {(row.capture_id, row.policy): row for row in rows}


def _frames(a: Side, b: Side, page: Pager) -> list[FramePair]:
    """One page of frames of both sides by number range, one query; each
    row knows whether the other side has a frame of its number with the same
    raw text."""
    twin = Frame.objects.filter(
        capture_id=b.capture.pk, number=OuterRef("number"), raw=OuterRef("raw")
    )
    rows = (
        Frame.objects.filter(
            capture_id__in={a.capture.pk, b.capture.pk},
            number__gte=page.start,
            number__lt=page.stop,
        )
        .order_by("number", "capture_id")
        .only("capture_id", "number", "kind", "marks")
        .annotate(
            raw_head=Substr("raw", 1, RAW_SHOWN),
            raw_length=Length("raw"),
            twin_same=Exists(twin),  # read on A's rows: B has this very frame
        )
    )
    by_number: dict[int, dict[int, Frame]] = {}
    for frame in rows:
        by_number.setdefault(frame.number, {})[frame.capture_id] = frame
    pairs = []
    for number in range(page.start, page.stop):
        found = by_number.get(number, {})
        left, right = found.get(a.capture.pk), found.get(b.capture.pk)
        if left is None and right is None:
            continue
        if a.capture.pk == b.capture.pk:
            right = left
        differs = left is None or right is None or not left.twin_same
        pairs.append(FramePair(number, left, right, differs, _marks(left), _marks(right)))
    return pairs


def _marks(frame: Frame | None) -> list[tuple[str, str]]:
    return [(mark, mark_tone(mark)) for mark in frame.marks] if frame is not None else []


def _call_outcome(call: Call, assembly: Assembly) -> tuple[str, str]:
    if assembly.refusal_call == call.position and assembly.refusal_code:
        return assembly.refusal_code, "bad"
    if call.invalid_at:
        offset = call.invalid_at.get("offset") if isinstance(call.invalid_at, dict) else None
        return (f"invalid at offset {offset}" if offset is not None else "invalid"), "bad"
    if assembly.outcome == Capture.Outcome.OK:
        return "ok", "ok"
    if assembly.outcome == Capture.Outcome.REFUSED:
        return "not checked", "muted"
    return "not settled yet", "muted"


def _calls(assemblies: list[Assembly]) -> dict[int, list[Call]]:
    """The first CALLS_SHOWN calls of each assembly, one query, arguments cut
    in the database: a head, a tail and the length."""
    ids = [assembly.pk for assembly in assemblies]
    tail_start = Greatest(Length("arguments_text") - ARGS_SHOWN + 1, V(1))
    rows = (
        Call.objects.filter(assembly_id__in=ids, position__lt=CALLS_SHOWN)
        .order_by("assembly_id", "position")
        .only("assembly_id", "position", "choice", "call_id", "name", "index", "invalid_at")
        .annotate(
            args_head=Substr("arguments_text", 1, ARGS_SHOWN),
            args_tail=Substr("arguments_text", tail_start, ARGS_SHOWN),
            args_length=Length("arguments_text"),
        )
    )
    out: dict[int, list[Call]] = {pk: [] for pk in ids}
    for call in rows:
        out[call.assembly_id].append(call)
    return out


def align(left: list[Any], right: list[Any]) -> list[tuple[Any, Any, str]]:
    """Pairs of calls, as the lenses pair them (`pair_by_id_then_position`):
    by id first, then by position among the rest.  Each call is anything with
    `position` and `call_id` ("" for none), listed in position order from 0."""
    pairs = pair_by_id_then_position(
        [call.call_id for call in left], [call.call_id for call in right]
    )
    taken = {j for j, _ in pairs.values()}
    out: list[tuple[Any, Any, str]] = []
    for i, call in enumerate(left):
        j, by = pairs.get(i, (None, ""))
        out.append((call, right[j] if j is not None else None, by))
    out.extend((None, call, "") for j, call in enumerate(right) if j not in taken)

    def order(pair: tuple[Any, Any, str]) -> tuple[int, int]:
        first, second, _ = pair
        return (first.position, 0) if first is not None else (second.position, 1)

    out.sort(key=order)
    return out


def _same_long_texts(pairs: list[tuple[Call, Call]]) -> set[int]:
    """Of pairs of calls whose long arguments agree on length, head and tail,
    the (left) pks whose whole texts are equal: compared in the database,
    one query."""
    if not pairs:
        return set()
    condition = Q(pk__in=[])
    for left, right in pairs:
        same = Call.objects.filter(pk=right.pk, arguments_text=OuterRef("arguments_text"))
        condition |= Q(pk=left.pk) & Q(Exists(same))
    return set(Call.objects.filter(condition).values_list("pk", flat=True))


def _call_side(call: Call, assembly: Assembly) -> CallSide:
    outcome, tone = _call_outcome(call, assembly)
    return CallSide(
        position=call.position,
        call_id=call.call_id,
        name=call.name,
        index=call.index,
        choice=call.choice,
        arguments=call.args_head,
        arguments_length=call.args_length,
        outcome=outcome,
        tone=tone,
    )


def call_pairs(a: Side, b: Side) -> list[CallPair]:
    """The calls of both sides aligned (`align`), each pair with what differs:
    one query, two when long arguments look alike and are compared whole."""
    assemblies = [side.assembly for side in (a, b) if side.assembly is not None]
    if not assemblies:
        return []
    loaded = _calls(assemblies)
    left = loaded.get(a.assembly.pk, []) if a.assembly else []
    right = loaded.get(b.assembly.pk, []) if b.assembly else []
    aligned = align(left, right)
    same_long = _same_long_texts([(x, y) for x, y, _ in aligned if _long_and_alike(x, y)])
    out = []
    for x, y, by in aligned:
        first = _call_side(x, a.assembly) if x is not None else None
        second = _call_side(y, b.assembly) if y is not None else None
        if first is None or second is None:
            differs = {"call"}
        else:
            differs = _fields_differing(first, second)
            if _arguments_differ(x, y, same_long):
                differs.add("arguments")
        out.append(CallPair(first, second, by, differs))
    return out


def _long_and_alike(x: Call | None, y: Call | None) -> bool:
    """Both calls' arguments are longer than what is read of them and agree on
    length, head and tail: only the database can tell whether they are equal."""
    return (
        x is not None
        and y is not None
        and x.args_length == y.args_length > 2 * ARGS_SHOWN
        and x.args_head == y.args_head
        and x.args_tail == y.args_tail
    )


def _fields_differing(first: CallSide, second: CallSide) -> set[str]:
    names = ("call_id", "name", "index", "choice", "outcome")
    return {name for name in names if getattr(first, name) != getattr(second, name)}


def _arguments_differ(x: Call, y: Call, same_long: set[int]) -> bool:
    """Whether two calls' arguments differ: by length, head or tail, else
    (for long ones) by the whole-text comparison in `same_long`."""
    if x.args_length != y.args_length or x.args_head != y.args_head:
        return True
    if x.args_tail != y.args_tail:
        return True
    return x.args_length > 2 * ARGS_SHOWN and x.pk not in same_long


def _side(label: str, capture: Capture, policy: str, found: dict) -> Side:
    return Side(
        label=label,
        capture=capture,
        policy=policy,
        assembly=found.get((capture.pk, policy)),
        frame_total=frame_total(capture),
    )


def _summary_differs(a: Side, b: Side) -> set[str]:
    out = set()
    left, right = a.assembly, b.assembly
    if (left and left.outcome) != (right and right.outcome):
        out.add("outcome")
    if (left and left.refusal_code) != (right and right.refusal_code):
        out.add("refusal")
    if (left and left.refusal_frame) != (right and right.refusal_frame):
        out.add("refusal_frame")
    if (left and left.call_count) != (right and right.call_count):
        out.add("calls")
    if a.frame_total != b.frame_total:
        out.add("frames")
    if a.capture.byte_size != b.capture.byte_size:
        out.add("bytes")
    return out


@require_safe
def compare_page(request: HttpRequest) -> HttpResponse:
    """The form, and once it names two captures, both side by side: 400 for
    what can't be compared, 404 for a capture that does not exist."""
    asked = {"a": request.GET.get("a", ""), "b": request.GET.get("b", "")}
    policies = {
        "a": request.GET.get("pa") or STRICT,
        "b": request.GET.get("pb") or STRICT,
    }
    slugs = {key: slug_of(value) for key, value in asked.items()}
    context: dict[str, Any] = {
        "asked": asked,
        "policies": policies,
        "policy_choices": POLICIES,
        "errors": _unknown_policies(policies),
        "ready": False,
    }
    if not slugs["a"] or not slugs["b"]:
        if any(asked.values()):
            context["errors"].append("Name two captures: a slug or a capture's link each.")
        status = 400 if any(asked.values()) else 200
        return render(request, "inspector/compare.html", context, status=status)
    found = _load_sides([slugs["a"], slugs["b"]])
    for key in ("a", "b"):
        if slugs[key] not in found:
            context["errors"].append(f"{key.upper()}: no capture {slugs[key]!r}")
    if context["errors"]:
        status = 404 if any("no capture" in error for error in context["errors"]) else 400
        return render(request, "inspector/compare.html", context, status=status)
    context.update(_comparison(request, found, slugs, policies))
    return render(request, "inspector/compare.html", context)


def _unknown_policies(policies: dict[str, str]) -> list[str]:
    return [
        f"{key.upper()}: no policy {policies[key]!r}"
        for key in ("a", "b")
        if policies[key] not in POLICIES
    ]


def _comparison(
    request: HttpRequest,
    found: dict[str, Capture],
    slugs: dict[str, str],
    policies: dict[str, str],
) -> dict[str, Any]:
    """What the page shows of two captures found: their summaries, one page of
    frames and the aligned calls, and where each differs."""
    capture_a, capture_b = found[slugs["a"]], found[slugs["b"]]
    assemblies = _assemblies([(capture_a, policies["a"]), (capture_b, policies["b"])])
    a = _side("A", capture_a, policies["a"], assemblies)
    b = _side("B", capture_b, policies["b"], assemblies)
    total = max(a.frame_total, b.frame_total)
    frames_pager = pager(request.GET.get("page"), FRAMES_PER_PAGE, total)
    frames = _frames(a, b, frames_pager)
    calls = call_pairs(a, b)
    kept = _kept_query(slugs["a"], slugs["b"], policies)
    return {
        "ready": True,
        "a": a,
        "b": b,
        "sides": [a, b],
        "summary_differs": _summary_differs(a, b),
        "frames": frames,
        "frames_pager": frames_pager,
        "frames_links": pager_links(
            frames_pager, lambda number: "?" + urlencode({**kept, "page": number}) + "#frames"
        ),
        "frames_differing": sum(1 for pair in frames if pair.differs),
        "calls": calls,
        "calls_differing": sum(1 for pair in calls if pair.differs),
        "calls_cut": any(
            side.assembly is not None and side.assembly.call_count > CALLS_SHOWN for side in (a, b)
        ),
        "calls_shown": CALLS_SHOWN,
        "swap_url": "?" + urlencode(_swapped(kept)),
    }


def _kept_query(slug_a: str, slug_b: str, policies: dict[str, str]) -> dict[str, str]:
    """The query naming this comparison: the slugs, and each policy but strict."""
    kept = {"a": slug_a, "b": slug_b}
    if policies["a"] != STRICT:
        kept["pa"] = policies["a"]
    if policies["b"] != STRICT:
        kept["pb"] = policies["b"]
    return kept


def _swapped(kept: dict[str, str]) -> dict[str, str]:
    """The same comparison with A and B swapped."""
    swapped = {"a": kept["b"], "b": kept["a"]}
    if "pb" in kept:
        swapped["pa"] = kept["pb"]
    if "pa" in kept:
        swapped["pb"] = kept["pa"]
    return swapped
