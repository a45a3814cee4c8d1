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

__all__ = ["Pairing", "PairingWalk", "is_valid_call", "pair"]

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
    walk = PairingWalk()
    walk.walk(messages, len(messages))
    return walk.pairing()


@dataclass
class PairingWalk:
    """Where `pair`'s walk stands after the first `end` messages: plain values only (indexes and
    call ids), so that the next request of the conversation, which begins with those messages,
    resumes there (`_conversations`)."""

    end: int = 0
    answers: dict[int, tuple[int, int]] = field(default_factory=dict)
    rejected: dict[int, Literal["orphan", "duplicate"]] = field(default_factory=dict)
    malformed: list[int] = field(default_factory=list)
    #: call id -> the latest assistant message declaring it
    latest: dict[str, int] = field(default_factory=dict)
    #: (assistant message, call id) -> positions of its calls with that id no result answered yet
    #: (an answered call's entry may be gone: none left)
    open_slots: dict[tuple[int, str], deque[int]] = field(default_factory=dict)
    #: The run of results being read: whose call they answer, and where the next would be.
    run_owner: int = -1
    run_next: int = -1
    scattered: bool = False

    def copy(self) -> PairingWalk:
        return PairingWalk(
            self.end,
            dict(self.answers),
            dict(self.rejected),
            list(self.malformed),
            dict(self.latest),
            {key: deque(slots) for key, slots in self.open_slots.items() if slots},
            self.run_owner,
            self.run_next,
            self.scattered,
        )

    def walk(self, messages: Sequence[Message], end: int) -> None:
        """Pair the messages from `end` (the attribute) up to `end` (the argument)."""
        answers, rejected, malformed = self.answers, self.rejected, self.malformed
        latest, open_slots = self.latest, self.open_slots
        run_owner, run_next, scattered = self.run_owner, self.run_next, self.scattered
        for index in range(self.end, end):
            message = messages[index]
            role = message.get("role")
            if role == "assistant":
                if "tool_calls" not in message:
                    continue
                calls = message["tool_calls"]
                if type(calls) is not list or not calls:
                    malformed.append(index)
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
                    malformed.append(index)
            elif role == "tool":
                ident = message.get("tool_call_id")
                owner = latest.get(ident) if isinstance(ident, str) else None
                if owner is None:
                    rejected[index] = ORPHAN
                    continue
                slots = open_slots.get((owner, ident))  # type: ignore[arg-type]
                if slots:
                    answers[index] = (owner, slots.popleft())
                    # A call's results are one run directly after it: each either starts the run
                    # right after its call or continues the run of the same call.
                    if index == owner + 1:
                        run_owner, run_next = owner, index + 1
                    elif owner == run_owner and index == run_next:
                        run_next += 1
                    else:
                        scattered = True
                else:
                    rejected[index] = DUPLICATE
        self.end = end
        self.run_owner, self.run_next, self.scattered = run_owner, run_next, scattered

    def pairing(self) -> Pairing:
        """The pairing of the messages walked (holding the walk's own tables: walk no further)."""
        unanswered: dict[int, list[int]] = {}
        for (owner, _), slots in self.open_slots.items():
            if slots:
                unanswered.setdefault(owner, []).extend(slots)
        for positions in unanswered.values():
            positions.sort()
        return Pairing(self.answers, self.rejected, unanswered, self.malformed, self.scattered)
