"""Every message a live viewer gets, and the one way it is sent.

Two kinds of channel-layer group: `captures` (the capture list) and
`capture.<slug>` (one capture's viewers).  The messages, each built here
and nowhere else (their `type` names the consumer's handler; the consumer
renames it for the browser):

* `captures.changed` (list): a capture opened or closed;
* `capture.frames` (one capture): the rows one read completed, rendered
  by the capture page's own templates: the new frames' rows, the cards of
  the calls that changed (`captures/pages/live_cards.py`), the refusal
  decided so far; the browser only inserts them, by their DOM ids;
* `capture.finished` (one capture): the last frames and the outcome;
* `snapshot`: what a viewer who joins late gets first (sent by the
  consumer itself, to that viewer alone).

`send` is the only sender: a missing layer or a failing one never stops a
recording, since viewers are best effort and the database has everything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from inspector.captures.pages.live_cards import Rendered
from inspector.captures.records import RefusalRecord, refusal_record

from .row_stamps import live_row_html

if TYPE_CHECKING:
    from inspector.assembly.result import Refusal

logger = logging.getLogger(__name__)

LIST_GROUP = "captures"


def capture_group(slug: str) -> str:
    """The channel-layer group of one capture's viewers."""
    return f"capture.{slug}"


# -- the records inside messages -------------------------------------------------------------


class FrameEntry(TypedDict):
    number: int  # where the row goes: after the rows shown, or in place of row `f-<number>`
    html: str  # the row the capture page shows for it, rendered here: the browser only inserts it


class CallEntry(TypedDict):
    position: int  # where the card goes: in place of `call-<position>`, or in position order
    html: str  # the call's card, rendered by the capture page's card template


# A refusal in a message is the one refusal record (`captures/records.py`).
RefusalEntry = RefusalRecord


def frame_entry(
    slug: str,
    number: int,
    kind: str,
    raw: str,
    arrived_ms: float | None,
    *,
    calls: Sequence[int] = (),
    marks: Sequence[str] = (),
    did: Sequence[Sequence[Any]] | None = None,
    dialect: str = "chat",
    frames_at: str | None = None,
) -> FrameEntry:
    """A frame as a viewer gets it: its row of the capture page's frames
    table (event name and JSON type, calls, marks, what it did, raw text,
    permalink), rendered by the page's own template (through its shape's
    stamp, `row_stamps`); `frames_at`: `frames.frames_path(slug)`, when
    the caller has it."""
    html = live_row_html(
        slug, number, kind, raw, arrived_ms,
        calls=calls, marks=marks, did=did, dialect=dialect, frames_at=frames_at,
    )  # fmt: skip
    return {"number": number, "html": html}


def call_entries(cards: Sequence[Rendered]) -> list[CallEntry]:
    """The calls' cards as a viewer gets them."""
    return [{"position": card.position, "html": card.html} for card in cards]


def refusal_entry(refusal: Refusal | None) -> RefusalEntry | None:
    """A refusal as a viewer sees it, also mid-stream: `call` is the call's
    position so far (calls are numbered for good when the stream ends)."""
    return refusal_record(refusal)


# -- the messages ---------------------------------------------------------------------------


class FramesMessage(TypedDict):
    type: str
    slug: str
    frames: list[FrameEntry]
    calls: list[CallEntry]
    refusal: RefusalEntry | None
    refusal_html: str  # the refusal as the capture page shows it, "" for none
    dialect_html: str  # the page's dialect note, when it changed ("" otherwise)


class FinishedMessage(FramesMessage):
    outcome: str
    lenient_outcome: str
    frame_count: int


class ChangedMessage(TypedDict):
    type: str
    action: str
    slug: str
    outcome: str
    source: str
    upstream: str
    retry_chain: str | None
    attempt: int | None


class SnapshotMessage(TypedDict):
    type: str
    slug: str
    outcome: str
    refusal_code: str
    refusal: RefusalEntry | None
    refusal_html: str
    dialect_html: str
    frames: list[FrameEntry]
    calls: list[CallEntry]


def frames_message(
    slug: str,
    frames: list[FrameEntry],
    calls: list[CallEntry],
    refusal: RefusalEntry | None,
    refusal_html: str = "",
    dialect_html: str = "",
) -> FramesMessage:
    return {"type": "capture.frames", "slug": slug, "frames": frames, "calls": calls,
            "refusal": refusal, "refusal_html": refusal_html,
            "dialect_html": dialect_html}  # fmt: skip


def finished_message(
    capture: Any, last: FramesMessage | None, refusal: RefusalEntry | None
) -> FinishedMessage:
    """The closing message of a capture just closed (`capture` is its row)."""
    return {
        "type": "capture.finished",
        "slug": capture.slug,
        "outcome": capture.outcome,
        "lenient_outcome": capture.lenient_outcome,
        "refusal": refusal,
        "refusal_html": last["refusal_html"] if last else "",
        "dialect_html": last["dialect_html"] if last else "",
        "frames": last["frames"] if last else [],
        "calls": last["calls"] if last else [],
        "frame_count": capture.frame_count,
    }


def changed_message(capture: Any, action: str, outcome: str | None = None) -> ChangedMessage:
    """`captures.changed` for a capture row (`outcome` when the row's is stale)."""
    return {
        "type": "captures.changed",
        "action": action,
        "slug": capture.slug,
        "outcome": outcome or capture.outcome,
        "source": capture.source,
        "upstream": capture.upstream,
        "retry_chain": capture.retry_chain or None,
        "attempt": capture.attempt,
    }


def snapshot_message(
    capture: Any,
    frames: list[FrameEntry],
    calls: list[CallEntry],
    refusal: RefusalEntry | None,
    refusal_html: str = "",
    dialect_html: str = "",
) -> SnapshotMessage:
    return {
        "type": "snapshot",
        "slug": capture.slug,
        "outcome": capture.outcome,
        "refusal_code": capture.refusal_code,
        "refusal": refusal,  # a live capture's refusal, decided mid-stream
        "refusal_html": refusal_html,
        "dialect_html": dialect_html,
        "frames": frames,
        "calls": calls,
    }


def merge_batches(first: FramesMessage, second: FramesMessage) -> FramesMessage:
    """One `capture.frames` message saying what two consecutive ones said
    (a call's later card replaces its earlier one)."""
    calls = {call["position"]: call for call in first["calls"] + second["calls"]}
    return {
        **second,
        "frames": first["frames"] + second["frames"],
        "calls": sorted(calls.values(), key=lambda call: call["position"]),
        "refusal": second["refusal"] or first["refusal"],
        "refusal_html": second["refusal_html"] or first["refusal_html"],
        "dialect_html": second["dialect_html"] or first["dialect_html"],
    }


# What a message of rows alone says of the calls, the refusal and the dialect: nothing.
NO_CALLS: dict[str, Any] = {"calls": [], "refusal": None, "refusal_html": "", "dialect_html": ""}

# A viewer message's rows, at most (characters of HTML): daphne refuses to send a
# websocket message over 1 MiB, and closes the viewer's socket (1011) when told to.
MESSAGE_HTML = 256 * 1024


def split_batch(message: FramesMessage, limit: int = MESSAGE_HTML) -> list[FramesMessage]:
    """A batch's message as messages whose rows hold at most `limit`
    characters of HTML each (one row may hold more), in order; the cards,
    refusal and dialect note go with the last."""
    parts: list[list[FrameEntry]] = [[]]
    size = 0
    for frame in message["frames"]:
        if parts[-1] and size + len(frame["html"]) > limit:
            parts.append([])
            size = 0
        parts[-1].append(frame)
        size += len(frame["html"])
    if len(parts) == 1:
        return [message]
    out: list[FramesMessage] = [{**message, **NO_CALLS, "frames": part} for part in parts[:-1]]
    out.append({**message, "frames": parts[-1]})
    return out


# -- sending --------------------------------------------------------------------------------


async def send(group: str, message: dict[str, Any]) -> None:
    """Send to a channel-layer group; no layer, or a failing one, is logged
    and never raised."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group, message)
    except Exception:  # noqa: BLE001 - viewers are best effort
        logger.warning("channel layer: send to %s failed", group, exc_info=True)


def send_sync(group: str, message: dict[str, Any]) -> None:
    """`send` for sync callers (views, commands)."""
    async_to_sync(send)(group, message)


async def announce(capture: Any, action: str, outcome: str | None = None) -> None:
    """Tell list viewers that a capture opened or closed."""
    await send(LIST_GROUP, changed_message(capture, action, outcome))


def announce_sync(capture: Any, action: str, outcome: str | None = None) -> None:
    send_sync(LIST_GROUP, changed_message(capture, action, outcome))
