"""Where a lens parts from our assembler, spelled out.

`divergences(lens_result, strict)` compares one lens with the assembler's
result (a `Result` or its document) and returns sentences such as

    LiteLLM would run read with {"path":"/a"}{"path":"/b"}
    the OpenAI SDK would raise IndexError: list index out of range
    Vercel would drop call_2
    LangChain would name it read_fileread_file
    strict refuses AMBIGUOUS_CONTINUATION; LiteLLM would run read with ...

each as `{"lens", "call", "lens_call", "kind", "message"}`: `call` is the
position in the assembler's `calls` (None when the sentence is about no one
call of it), `lens_call` the position in the lens's `calls`.

Calls are paired by id first, then by position.  When the assembler is ok,
every difference in id, name or arguments is one divergence (arguments are
compared parsed when both parse, so `""` and `"{}"` agree); a call one side
lacks is one too, except a server or built-in call the lens reports none of
(the platform ran it; libraries hand it over as a result).  When it refused,
nothing it holds would run: every call the lens would hand over and that
parses is a divergence.  A lens that would
raise where the assembler is ok diverges once, for the whole stream; when
both fail, they agree.

Pure Python: nothing here imports Django.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any, TypedDict

from . import title
from .base import LensCall, LensResult

KINDS = (
    "error",
    "missing",
    "extra",
    "id",
    "name",
    "arguments",
    "unparsed",
    "runs_despite_refusal",
)


class Divergence(TypedDict):
    """One way a lens parts from the assembler: carried as it is from here to
    the page (never joined into text and parsed back)."""

    lens: str
    call: int | None  # position in the assembler's calls; None: about no one call of it
    lens_call: int | None  # position in the lens's calls
    kind: str  # one of KINDS
    message: str


def strict_document(strict: Any) -> dict[str, Any]:
    """The assembler's result document, from a `Result` or the document."""
    return strict.to_dict() if hasattr(strict, "to_dict") else strict


def pair_by_id_then_position(
    ids: list[str | None], other_ids: list[str | None]
) -> dict[int, tuple[int, str]]:
    """Pair two lists of calls, given as their ids (None or "" for none):
    index -> (index in the other list, "id" or "position").  First by id (the
    first unpaired call of the other list with it), then the rest by
    position (the same index, when that one is unpaired)."""
    # Each id's unpaired positions in the other list, earliest first: the
    # first unpaired call with that id is the head of its queue (one pass,
    # where a scan per call made a 50,000-call stream quadratic).
    waiting: dict[str, deque[int]] = {}
    for other, other_id in enumerate(other_ids):
        if other_id:
            waiting.setdefault(other_id, deque()).append(other)
    pairs: dict[int, tuple[int, str]] = {}
    taken: set[int] = set()
    for at, call_id in enumerate(ids):
        queue = waiting.get(call_id) if call_id else None
        if queue:
            other = queue.popleft()
            pairs[at] = (other, "id")
            taken.add(other)
    for at in range(len(ids)):
        if at not in pairs and at < len(other_ids) and at not in taken:
            pairs[at] = (at, "position")
            taken.add(at)
    return pairs


def match_calls(strict_calls: list[dict[str, Any]], lens_calls: list[LensCall]) -> dict[int, int]:
    """lens position -> assembler position: by id, then by position."""
    pairs = pair_by_id_then_position(
        [call.id for call in lens_calls], [held.get("id") for held in strict_calls]
    )
    return {lens_pos: strict_pos for lens_pos, (strict_pos, _) in pairs.items()}


def _text(text: str | None) -> str:
    if text is None or text == "":
        return '""'
    return text


def _name(name: str | None) -> str:
    if name is None:
        return "(no name)"
    return name if name else '""'


def _call_label(call: dict[str, Any], position: int) -> str:
    return call.get("id") or f"call {position}"


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _reads_as_is(text: str | None, value: Any) -> bool:
    try:
        return json.loads(text) == value if isinstance(text, str) else False
    except (json.JSONDecodeError, RecursionError):
        return False


def _with(call: LensCall) -> str:
    """`read with {"path":"/a"}`, saying how the lens read the text when it
    repaired it, or that it does not parse."""
    out = f"{_name(call.name)} with {_text(call.arguments_text)}"
    if call.parsed:
        if not _reads_as_is(call.arguments_text, call.arguments):
            out += f" (read as {_compact(call.arguments)})"
    else:
        out += f", which does not parse ({call.parse_error})"
    return out


def would_run(lens: LensResult, call: LensCall) -> bool:
    """Whether the library would hand the call on to run: a library that
    parses arguments itself holds back those that fail."""
    return call.parsed or not lens.gates_on_parse


def _raises(lens: LensResult) -> str:
    error = lens.error or ""
    if error.startswith("error part"):
        return f"would end the stream with an {error}"
    return f"would raise {error}"


def _entry(
    lens: str, call: int | None, lens_call: int | None, kind: str, message: str
) -> Divergence:
    return Divergence(lens=lens, call=call, lens_call=lens_call, kind=kind, message=message)


def divergences(lens: LensResult, strict: Any) -> list[Divergence]:
    """Every way `lens` parts from the assembler's result `strict`."""
    if not lens.available:
        return []
    document = strict_document(strict)
    label = document.get("policy") or "strict"
    strict_calls: list[dict[str, Any]] = document.get("calls") or []
    refusal = document.get("refusal")
    who = title(lens.lens)
    out: list[Divergence] = []
    delivered = lens.delivered_calls
    pairs = match_calls(strict_calls, lens.calls)

    if refusal is not None:
        code = refusal.get("code")
        for lens_pos, call in enumerate(delivered):
            if would_run(lens, call):
                out.append(
                    _entry(
                        lens.lens,
                        pairs.get(lens_pos),
                        lens_pos,
                        "runs_despite_refusal",
                        f"{label} refuses {code}; {who} would run {_with(call)}",
                    )
                )
        return out

    if lens.error:
        out.append(_entry(lens.lens, None, None, "error", f"{who} {_raises(lens)}"))
        if not delivered:
            return out

    matched = set()
    for lens_pos, call in enumerate(delivered):
        strict_pos = pairs.get(lens_pos)
        if strict_pos is None:
            verb = "run" if would_run(lens, call) else "produce, but not run,"
            out.append(
                _entry(lens.lens, None, lens_pos, "extra", f"{who} would also {verb} {_with(call)}")
            )
            continue
        matched.add(strict_pos)
        held = strict_calls[strict_pos]
        out.extend(_pair(lens, who, held, strict_pos, call, lens_pos))
    for strict_pos, held in enumerate(strict_calls):
        if strict_pos not in matched and not _ran_by_platform(held, delivered):
            out.append(
                _entry(
                    lens.lens,
                    strict_pos,
                    None,
                    "missing",
                    f"{who} would drop {_call_label(held, strict_pos)}",
                )
            )
    return out


def _ran_by_platform(held: dict[str, Any], delivered: list[LensCall]) -> bool:
    """A server or built-in call (a web search the platform ran) that the
    lens reports no call of its kind for: a client library hands such items
    over as results, not as calls to run, so leaving it out drops nothing."""
    kind = held.get("kind")
    return kind in ("server", "builtin") and all(call.kind != kind for call in delivered)


def _pair(
    lens: LensResult,
    who: str,
    held: dict[str, Any],
    strict_pos: int,
    call: LensCall,
    lens_pos: int,
) -> list[Divergence]:
    out: list[Divergence] = []
    label = _call_label(held, strict_pos)
    if call.id != held.get("id"):
        message = (
            f"{who} would leave {label} without an id"
            if not call.id
            else f"{who} would give {label} the id {call.id}"
        )
        out.append(_entry(lens.lens, strict_pos, lens_pos, "id", message))
    if call.name != held.get("name"):
        message = (
            f"{who} would leave it without a name"
            if call.name is None
            else f"{who} would name it {_name(call.name)}"
        )
        out.append(_entry(lens.lens, strict_pos, lens_pos, "name", message))
    strict_arguments = held.get("arguments")
    if call.parsed and strict_arguments is not None and call.arguments == strict_arguments:
        return out
    if would_run(lens, call):
        out.append(
            _entry(lens.lens, strict_pos, lens_pos, "arguments", f"{who} would run {_with(call)}")
        )
    else:
        out.append(
            _entry(
                lens.lens,
                strict_pos,
                lens_pos,
                "unparsed",
                f"{who} would not run {_name(call.name)}: its arguments "
                f"{_text(call.arguments_text)} do not parse ({call.parse_error})",
            )
        )
    return out


def all_divergences(results: dict[str, LensResult], strict: Any) -> list[Divergence]:
    """The divergences of every lens, lens by lens."""
    document = strict_document(strict)
    out: list[Divergence] = []
    for result in results.values():
        out.extend(divergences(result, document))
    return out
