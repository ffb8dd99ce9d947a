"""A minimizer target that keeps a lens's divergence from strict.

    target = lens_target("litellm", data, "sse")
    target.description          # "LiteLLM diverges: drops a call, merges calls"
    minimize(target.data, target.fmt, target=target, keeps=target.description)

A library maintainer wants the smallest stream on which *their* library parts
from the assembler, whether or not the assembler refuses it.  The target is
true for a candidate stream when the lens, run on the candidate's frames,
diverges from the strict result (`inspector.lenses.compare.divergences`) *the
same way* as on the original: the candidate's `LensSignature` equals the
original's.

Why a signature and not "any divergence".  Almost any stream cut short makes
some lens part from strict (a truncated stream is refused, and a library that
hands over what it has "runs despite the refusal"), so "diverges at all"
would shrink every stream to that trivial case.  The signature is the set of
labels (`ASPECTS`) the divergences read as, each a coarse kind: the merged
calls, the phantom call, the erased or repeated name, the `{}` arguments, the
exception type raised.  Messages, ids and argument values are left out, so
the minimizer may still change them; the count of calls is left out, so it
may drop the calls not involved.  When strict refuses, the refusal's code
(and, for INCOMPLETE_STREAM, its cause: see `stream.refusal_signature`) is
part of the label, so the stream stays refused the same way too.

Deterministic as long as the lens is (every lens here is).  Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inspector.assembly import AUTO, HAR, JSONL, SSE, UnreadableInput, detect_format, stream_bytes
from inspector.lenses import (
    LENSES,
    LensCall,
    LensResult,
    read_frames_and_result,
    run_lens,
    title,
)
from inspector.lenses.compare import divergences, strict_document

from .stream import NothingToMinimize, describe, refusal_signature

LensSignature = tuple[str, ...]

# The labels a divergence can read as, in the order a description lists them.
ASPECTS = (
    "raises",
    "merges calls",
    "drops a call",
    "adds a call",
    "leaves a call without an id",
    "changes an id",
    "erases a name",
    "repeats a name",
    "changes a name",
    "runs with {}",
    "runs with arguments that do not parse",
    "runs with other arguments",
    "does not run a call strict runs",
    "runs a call strict refuses",
)


class LensChoiceError(NothingToMinimize):
    """The lens asked for can't be kept: unknown, unavailable, or it agrees
    with strict on this stream.  The message is one line meant for a person."""


class UnknownLens(LensChoiceError):
    pass


class LensUnavailable(LensChoiceError):
    pass


class LensAgrees(LensChoiceError):
    pass


def lens_names() -> list[str]:
    return list(LENSES)


def check_lens_name(name: str) -> str:
    """`name` when it is a lens; UnknownLens otherwise."""
    if name not in LENSES:
        raise UnknownLens(f"unknown lens {name!r}: use one of {', '.join(LENSES)}")
    return name


# -- reading divergences as labels ----------------------------------------------------------


def _repeats(name: str, strict_name: str | None) -> bool:
    """`readread` for `read`: the name sent again on every chunk, appended."""
    if not strict_name or len(name) <= len(strict_name) or len(name) % len(strict_name):
        return False
    return name == strict_name * (len(name) // len(strict_name))


def _merged_into(held: dict[str, Any], delivered: Sequence[LensCall]) -> int | None:
    """The lens call that absorbed the strict call `held` (which the lens
    dropped): one whose arguments text holds `held`'s and more.  None when
    it was simply dropped."""
    text = held.get("arguments_text") or ""
    if not text:
        return None
    for position, call in enumerate(delivered):
        absorbed = call.arguments_text or ""
        if text in absorbed and absorbed != text:
            return position
    return None


def _name_label(call: LensCall, held: dict[str, Any]) -> str:
    if not call.name:
        return "erases a name"
    return "repeats a name" if _repeats(call.name, held.get("name")) else "changes a name"


def _arguments_label(call: LensCall) -> str:
    if not call.parsed:
        return "runs with arguments that do not parse"
    return "runs with {}" if call.arguments == {} else "runs with other arguments"


def _error_label(lens: LensResult) -> str:
    kind = (lens.error or "").split(":", 1)[0].strip() or "an error"
    return f"raises {kind}"


def labels(lens: LensResult, strict: Any, fmt_signature: str = "") -> LensSignature:
    """The signature of how `lens` parts from `strict` (a `Result` or its
    document): its sorted, distinct labels; () when it agrees.
    `fmt_signature` names strict's refusal (`stream.describe`) when refused."""
    entries = divergences(lens, strict)
    if not entries:
        return ()
    strict_calls: list[dict[str, Any]] = strict_document(strict).get("calls") or []
    out, merged = _missing_labels(entries, strict_calls, lens.delivered_calls)
    for entry in entries:
        label = _entry_label(entry, lens, strict_calls, merged, fmt_signature)
        if label:
            out.add(label)
    return tuple(sorted(out, key=_order))


def _missing_labels(
    entries: list[dict[str, Any]],
    strict_calls: list[dict[str, Any]],
    delivered: Sequence[LensCall],
) -> tuple[set[str], set[int]]:
    """Labels of the strict calls the lens lacks (dropped or merged), and the
    lens calls that absorbed one (their arguments differ by the merge alone)."""
    out: set[str] = set()
    merged: set[int] = set()
    for entry in entries:
        if entry["kind"] == "missing":
            into = _merged_into(strict_calls[entry["call"]], delivered)
            out.add("drops a call" if into is None else "merges calls")
            if into is not None:
                merged.add(into)
    return out, merged


def _entry_label(
    entry: dict[str, Any],
    lens: LensResult,
    strict_calls: list[dict[str, Any]],
    merged: set[int],
    fmt_signature: str,
) -> str | None:
    """The label of one divergence other than a missing call (None: no label)."""
    kind, lens_pos = entry["kind"], entry["lens_call"]
    if kind == "error":
        return _error_label(lens)
    if kind == "extra":
        return "adds a call"
    if kind == "unparsed":
        return "does not run a call strict runs"
    if kind == "runs_despite_refusal":
        return f"runs a call strict refuses ({fmt_signature or 'refused'})"
    call = lens.delivered_calls[lens_pos] if lens_pos is not None else None
    if call is None:
        return None
    if kind == "id":
        return "changes an id" if call.id else "leaves a call without an id"
    if kind == "name":
        held = strict_calls[entry["call"]] if entry["call"] is not None else {}
        return _name_label(call, held)
    if kind == "arguments" and lens_pos not in merged:
        return _arguments_label(call)
    return None


def _order(label: str) -> tuple[int, str]:
    for position, aspect in enumerate(ASPECTS):
        if label.startswith(aspect):
            return position, label
    return len(ASPECTS), label


def signature(
    name: str, data: bytes, fmt: str, tools: list[dict[str, Any]] | None = None
) -> tuple[LensResult, LensSignature]:
    """(the lens's result, its signature) on the stream `data` (sse or jsonl)."""
    frames, strict = read_frames_and_result(data, fmt)
    result = run_lens(name, frames, tools=tools, dialect=strict.dialect)
    refused = refusal_signature(data, fmt) if strict.refusal is not None else None
    return result, labels(result, strict, describe(refused) if refused else "")


# -- the target -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LensTarget:
    """True for a stream on which the lens diverges with `signature`.

    `data` and `fmt` are the original's event stream (a HAR's entry taken
    out): what `minimize` must be given for this target."""

    lens: str
    signature: LensSignature
    fmt: str
    data: bytes
    tools: tuple[dict[str, Any], ...] | None = None

    def __call__(self, candidate: bytes) -> bool:
        tools = list(self.tools) if self.tools is not None else None
        return signature(self.lens, candidate, self.fmt, tools)[1] == self.signature

    @property
    def description(self) -> str:
        """For people: "LiteLLM diverges: drops a call, merges calls"."""
        who = title(self.lens)
        return f"{who[:1].upper()}{who[1:]} diverges: {', '.join(self.signature)}"


def _event_stream(data: bytes, fmt: str, entry: int) -> tuple[bytes, str]:
    if fmt == AUTO:
        fmt = detect_format(None, data)
    if fmt not in (SSE, JSONL, HAR):
        raise UnreadableInput(f"unknown format {fmt!r}: use sse, jsonl or har")
    inner, body = stream_bytes(data, fmt, entry)
    return body, inner


def lens_target(
    name: str,
    data: bytes,
    fmt: str,
    *,
    entry: int = 0,
    tools: list[dict[str, Any]] | None = None,
) -> LensTarget:
    """The target "lens `name` diverges from strict as on `data`".

    Raises UnknownLens, LensUnavailable (the OpenAI SDK not installed),
    LensAgrees (no divergence to keep) and UnreadableInput.
    """
    check_lens_name(name)
    body, inner = _event_stream(data, fmt, entry)
    result, found = signature(name, body, inner, tools)
    who = title(name)
    if not result.available:
        why = "; ".join(result.notes) or "its library is not installed"
        raise LensUnavailable(f"the {name} lens is unavailable: {why}")
    if not found:
        raise LensAgrees(f"{who} agrees with strict on this stream: no divergence to keep")
    return LensTarget(
        lens=name,
        signature=found,
        fmt=inner,
        data=body,
        tools=tuple(tools) if tools else None,
    )
