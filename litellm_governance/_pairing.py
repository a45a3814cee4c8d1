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


def pair(messages: Sequence[Message]) -> Pairing:
    """Match every tool result in `messages` to the call it answers."""
    result = Pairing()
    latest: dict[str, int] = {}
    open_slots: dict[tuple[int, str], deque[int]] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            if "tool_calls" not in message:
                continue
            calls = message["tool_calls"]
            if type(calls) is not list or not calls:
                result.malformed.append(index)
                continue
            clean = True
            for position, call in enumerate(calls):
                function = call.get("function") if type(call) is dict else None
                if type(function) is dict:  # `is_valid_call`, inlined for the usual dicts
                    ident, name = call.get("id"), function.get("name")
                    valid = type(ident) is str and ident != "" and type(name) is str and name != ""
                else:
                    valid = is_valid_call(call)
                if valid:
                    ident = call["id"]
                    latest[ident] = index
                    open_slots.setdefault((index, ident), deque()).append(position)
                else:
                    clean = False
            if not clean:
                result.malformed.append(index)
        elif role == "tool":
            ident = message.get("tool_call_id")
            owner = latest.get(ident) if isinstance(ident, str) else None
            if owner is None:
                result.rejected[index] = ORPHAN
                continue
            slots = open_slots[(owner, ident)]  # type: ignore[index]
            if slots:
                result.answers[index] = (owner, slots.popleft())
            else:
                result.rejected[index] = DUPLICATE
    for (owner, _), slots in open_slots.items():
        if slots:
            result.unanswered.setdefault(owner, []).extend(slots)
    for positions in result.unanswered.values():
        positions.sort()
    return result
