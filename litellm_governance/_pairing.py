"""Which tool result answers which tool call.

A result answers the most recent earlier assistant message that declares its ``tool_call_id``,
filling that message's first unanswered call with the id. A result no earlier call declares is
an orphan; one whose call is already answered is a duplicate. Matching by position this way
also handles ids that real transcripts reuse across turns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from ._messages import Message, call_id, call_name

__all__ = ["Pairing", "is_valid_call", "pair"]

ORPHAN: Final = "orphan"
DUPLICATE: Final = "duplicate"


def is_valid_call(call: object) -> bool:
    """A call a provider can accept and a result can answer: a dict with an id and a name."""
    return call_id(call) is not None and call_name(call) is not None


@dataclass
class Pairing:
    """Result of matching tool results to tool calls over a message list."""

    #: tool message index -> (assistant message index, position of the call in its tool_calls)
    answers: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: tool message index -> why it answers nothing
    rejected: dict[int, Literal["orphan", "duplicate"]] = field(default_factory=dict)
    #: assistant message index -> positions of its valid calls that no result answers, in order
    unanswered: dict[int, list[int]] = field(default_factory=dict)
    #: assistant messages whose ``tool_calls`` is present but not a non-empty list of valid calls
    malformed: list[int] = field(default_factory=list)
    #: Some call's results do not all directly follow it, in one run (what `Backfill` regroups).
    scattered: bool = False


def pair(messages: Sequence[Message]) -> Pairing:
    """Match every tool result in `messages` to the call it answers."""
    found = Pairing()
    latest: dict[str, int] = {}  # call id -> the latest assistant message declaring it
    # (assistant message, call id) -> positions of its calls with that id no result answered yet
    open_slots: dict[tuple[int, str], deque[int]] = {}
    run_owner, run_next = -1, -1  # the run of results being read: whose call, where the next would be
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant" and "tool_calls" in message:
            _declare(found, index, message["tool_calls"], latest, open_slots)
        elif role == "tool":
            ident = message.get("tool_call_id")
            owner = latest.get(ident) if isinstance(ident, str) else None
            slots = open_slots.get((owner, ident)) if owner is not None else None  # type: ignore[arg-type]
            if owner is None:
                found.rejected[index] = ORPHAN
            elif not slots:
                found.rejected[index] = DUPLICATE
            else:
                found.answers[index] = (owner, slots.popleft())
                # A call's results are one run directly after it: each either starts the run right
                # after its call or continues the run of the same call.
                if index == owner + 1:
                    run_owner, run_next = owner, index + 1
                elif owner == run_owner and index == run_next:
                    run_next += 1
                else:
                    found.scattered = True
    for (owner, _), slots in open_slots.items():
        if slots:
            found.unanswered.setdefault(owner, []).extend(slots)
    for positions in found.unanswered.values():
        positions.sort()
    return found


def _declare(
    found: Pairing, index: int, calls: object, latest: dict[str, int], open_slots: dict[tuple[int, str], deque[int]]
) -> None:
    """Record the valid calls of the assistant message at `index`; a malformed ``tool_calls`` value or
    call marks the message malformed."""
    if not isinstance(calls, list) or not calls:
        found.malformed.append(index)
        return
    for position, call in enumerate(calls):
        if not is_valid_call(call):
            continue
        ident = call["id"]
        latest[ident] = index
        open_slots.setdefault((index, ident), deque()).append(position)
    if not all(is_valid_call(call) for call in calls):
        found.malformed.append(index)
