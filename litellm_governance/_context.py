"""The contract between the pipeline and its steps.

A step is a callable ``step(messages, ctx) -> StepResult``:

* `Context` is what the step may read — the request's inputs, frozen: the config, the provider's
  profile, the budget, the token counter, the per-attempt settings of shrinking — and a `Memo` of
  what was already computed for this request (token counts, tool-call pairing, the last
  ``cache_control`` breakpoint), a cache that never changes what a step decides; through it, a step
  walking the request as read resumes where the previous request of the conversation left its walk,
  and keeps where this one stands for the next (`Context.conversation`, `Context.keep`,
  `_conversations`): what it would compute again, so that too changes no decision;
* `StepResult` is what the step did — the messages (the input list itself when nothing changed),
  the counts of what it did (the report's ``steps``), notes, and whether the request is still
  over budget — returned, never written into shared state. The pipeline adds the results up.

Steps never mutate their input messages either: a changed message is a new dict.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._config import GovernanceConfig
from ._messages import (
    SYSTEM_NOTE_END,
    SYSTEM_NOTE_LABEL,
    Message,
    has_cache_control,
    is_empty_content,
    is_instruction,
    system_note,
)
from ._pairing import Pairing, PairingWalk, pair
from ._profiles import Profile
from ._tokens import TokenCounter

if TYPE_CHECKING:
    from ._calls import CallInfo
    from ._cut_turns import CutTurns
    from ._microcompact import Catalogue

__all__ = [
    "BRIDGE_CONTENT",
    "SYNTHETIC_USER_CONTENT",
    "Context",
    "Memo",
    "StepResult",
    "Tally",
    "is_turn",
    "system_note",
]

#: Content of the user message inserted where a provider needs one and the history has none.
SYNTHETIC_USER_CONTENT: Final = "(Earlier conversation continues below.)"
#: Content of the assistant message inserted between tool results and the next user message for
#: providers that need one there (Mistral, Bedrock Converse).
BRIDGE_CONTENT: Final = "(Tool results received.)"


@dataclass(frozen=True)
class StepResult:
    """What one step did: its output messages and what it counted."""

    messages: list[Message]
    #: What the step did, by the report's step names (``compacted``, ``snipped`` …).
    counts: Counter[str] = field(default_factory=Counter)
    #: Notes for the report (never message content).
    notes: tuple[str, ...] = ()
    #: The request is still over budget after this step (shrinking steps only).
    over_budget: bool = False
    #: index -> tool name of large results no rule may compact (for the report).
    large_uncompacted: Mapping[int, str] = field(default_factory=dict)
    #: The turns a cut removed (shrinking steps), for a summary model.
    cut: CutTurns | None = None
    #: Tokens the step's stubs save against the results they replace, where the step knows it
    #: (`StableShrink`); None: the ledger finds the stubs itself.
    saved: int | None = None


@dataclass
class Tally:
    """The results of the steps run so far, added up (the pipeline's running total)."""

    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    over_budget: bool = False
    large_uncompacted: dict[int, str] = field(default_factory=dict)
    cut: CutTurns | None = None
    #: What the last step's stubs saved, if it said (`StepResult.saved`: shrinking steps).
    saved: int | None = None

    def add(self, result: StepResult) -> list[Message]:
        """Count `result` in; its messages, for the next step."""
        self.counts.update(result.counts)
        self.saved = result.saved
        self.notes.extend(result.notes)
        self.over_budget = result.over_budget
        self.large_uncompacted.update(result.large_uncompacted)
        if result.cut is not None:
            self.cut = result.cut
        return result.messages


class Memo:
    """Per-request caches of what steps compute again and again. Keyed by object identity, which
    is safe because the memo keeps the objects alive; a cache hit never changes a decision."""

    __slots__ = (
        "alive",
        "breakpoint",
        "calls",
        "catalogue",
        "conversation",
        "counts",
        "kept",
        "oversized",
        "pairing",
    )

    def __init__(self) -> None:
        #: id(message) -> its tokens; `alive` holds every message counted, so while the memo lives
        #: no other object can take one of these ids (a plain int dict: `Context.total` sums it in C).
        self.counts: dict[int, int] = {}
        self.alive: list[Mapping[str, Any]] = []
        self.pairing: tuple[object, Pairing] | None = None
        self.breakpoint: tuple[object, int] | None = None
        self.calls: tuple[object, Mapping[str, CallInfo]] | None = None
        self.oversized: tuple[object, tuple[int, int], int] | None = None
        self.catalogue: tuple[object, tuple[object, ...], Catalogue] | None = None
        #: The list whose walks the conversation's requests share (`_conversations`), how many of
        #: its messages this request keeps for the next one, and the walks the previous request kept
        #: (by name, each over as many messages as this request begins with): `Context.conversation`.
        self.conversation: tuple[object, int, Mapping[str, object]] | None = None
        #: The walks this request keeps for the next one (by name), each over those first messages.
        self.kept: dict[str, object] = {}


@dataclass(frozen=True)
class Context:
    """What every step of one `govern()` call may read: its inputs, frozen (`with_` makes the
    settings of one shrinking attempt), and the request's `Memo`."""

    config: GovernanceConfig
    profile: Profile
    counter: TokenCounter
    #: Input budget in the counter's units (the profile's token ratio already applied); None = no snipping.
    budget: int | None = None
    #: Tokens of the request's tool schemas.
    tools_tokens: int = 0
    #: Trailing assistant messages (prefill) are accepted by this model.
    allow_prefill: bool = False
    #: Ignore cache_control breakpoints (the budget forced a rewrite before one).
    ignore_breakpoints: bool = False
    #: Type of the text parts merged string content becomes (``input_text`` for Responses).
    text_type: str = "text"
    #: The request format (``chat``, ``anthropic``, ``responses``): a few rules are about one.
    format: str = "chat"
    #: Shrink with ``cache_stable`` (the config's choice, or "auto" decided from the window).
    stable: bool = False
    #: The repaired request before compaction: what notes for cut turns read outcomes from.
    original: Sequence[Message] | None = None
    #: Summaries of cut turns a summary model wrote, by `CutTurns.key`: one stands in for the
    #: note when its cut point comes again (``summary_model``; a mapping given, never fetched).
    summaries: Mapping[str, str] = field(default_factory=dict)
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)

    def with_(self, **changes: Any) -> Context:
        """A copy with some inputs changed (the same memo)."""
        return dataclasses.replace(self, **changes)

    def pairing(self, messages: list[Message]) -> Pairing:
        """`pair(messages)`, computed once per list object (repairs that change nothing reuse it)."""
        memo = self.memo
        if memo.pairing is None or memo.pairing[0] is not messages:
            shared = self.conversation(messages)
            if shared is None:
                memo.pairing = (messages, pair(messages))
            else:  # resumed where the previous request of the conversation left it, and kept for the next
                before = shared[1].get("pairing")
                if isinstance(before, PairingWalk) and before.end <= len(messages):
                    walk = before.copy()
                else:
                    walk = PairingWalk()
                if walk.end <= shared[0]:
                    walk.walk(messages, shared[0])
                    self.keep("pairing", walk.copy())
                walk.walk(messages, len(messages))
                memo.pairing = (messages, walk.pairing())
        return memo.pairing[1]

    def calls_by_id(self, messages: Sequence[Message]) -> Mapping[str, CallInfo]:
        """`_calls.calls_by_id(messages)`, once per list object: the repaired request is catalogued
        by each shrinking attempt and read again for the note of cut turns (its calls named each time;
        a Claude Code call's arguments are an object, parsed anew on every call)."""
        memo = self.memo
        if memo.calls is None or memo.calls[0] is not messages:
            from ._calls import calls_by_id  # not at the top: _calls imports _backfill, which imports this module

            memo.calls = (messages, calls_by_id(messages))
        return memo.calls[1]

    def last_breakpoint(self, messages: list[Message]) -> int:
        """Index of the last conversation message with a cache_control breakpoint (-1: none), once per
        list. A system or developer message's breakpoint marks the system prompt, which providers that
        honour breakpoints cache ahead of every message wherever the message stood (and which the
        profile may move up): it protects no result (else governing twice would differ)."""
        memo = self.memo
        if memo.breakpoint is None or memo.breakpoint[0] is not messages:
            shared = self.conversation(messages)
            if shared is None:
                memo.breakpoint = (messages, _last_breakpoint(messages, len(messages), 0, -1))
            else:  # the previous request of the conversation found the last one in the messages it kept
                mark, walks = shared
                end, found = stood(walks, "breakpoint", mark, (0, -1))
                kept = _last_breakpoint(messages, mark, end, found)
                self.keep("breakpoint", (mark, kept))
                memo.breakpoint = (messages, _last_breakpoint(messages, len(messages), mark, kept))
        return memo.breakpoint[1]

    def tokens(self, message: Mapping[str, Any]) -> int:
        """Tokens of one message, computed once per message object in this call."""
        memo = self.memo
        count = memo.counts.get(id(message))
        if count is None:
            count = self.counter.message(message)
            memo.counts[id(message)] = count
            memo.alive.append(message)
        return count

    def total(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The tokens of all `messages` (each as `tokens` counts it): summed without a Python call
        per message when every one was counted already, as after most steps. Those not counted yet
        are counted together (`TokenCounter.messages`: each distinct new text tokenized once)."""
        memo = self.memo
        counts = memo.counts
        try:
            return sum(map(counts.__getitem__, map(id, messages)))
        except KeyError:
            new = list({id(m): m for m in messages if id(m) not in counts}.values())
            counts.update(zip(map(id, new), self.counter.messages(new), strict=True))
            memo.alive.extend(new)  # (see `Memo.counts`)
            return sum(map(counts.__getitem__, map(id, messages)))

    def seed(self, message: Mapping[str, Any], count: int) -> None:
        """Record the tokens of a message made here from one already counted (a stub: the result's
        tokens less what replacing its content saves, which is exactly what counting it gives)."""
        self.memo.counts[id(message)] = count
        self.memo.alive.append(message)

    def conversation(self, messages: Sequence[Message]) -> tuple[int, Mapping[str, object]] | None:
        """For the list the conversation's requests share (the request as read, when the repairs
        left it so): how many of its first messages this request keeps for the next one, and the
        walks the previous request kept over the messages it begins with (`_conversations`)."""
        found = self.memo.conversation
        return (found[1], found[2]) if found is not None and found[0] is messages else None

    def keep(self, name: str, walk: object) -> None:
        """Keep a walk over the first messages `conversation` names, for the next request."""
        self.memo.kept[name] = walk

    def seed_all(self, messages: Sequence[Mapping[str, Any]], counts: Sequence[int]) -> None:
        """Record the tokens of `messages`, counted before (the same messages of the conversation's
        previous request, `_conversations`): as counting them again would give."""
        memo = self.memo
        memo.counts.update(zip(map(id, messages), counts, strict=True))
        memo.alive.extend(messages)

    def oversized(self, messages: Sequence[Mapping[str, Any]]) -> int | None:
        """Size above which a single result is compacted whatever its age: half the room the
        budget leaves for history (None without a budget). It cannot share the request with
        anything else, and cutting everything else for it would lose the task."""
        if self.budget is None:
            return None
        memo, key = self.memo, (self.budget, self.tools_tokens)  # once per list: each shrinking attempt asks
        if memo.oversized is None or memo.oversized[0] is not messages or memo.oversized[1] != key:
            fixed = self.tools_tokens + self._instructions(messages)
            memo.oversized = (messages, key, max(0, self.budget - fixed) // 2)
        return memo.oversized[2]

    def _instructions(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the instructions among `messages` (`is_instruction`); those in the messages the
        previous request of the conversation kept are taken from what it kept."""
        shared = self.conversation(messages)  # type: ignore[arg-type]
        if shared is None:
            return sum(self.tokens(m) for m in messages if is_instruction(m))
        mark, walks = shared
        end, before = stood(walks, "instructions", mark, (0, 0))
        total: int = before + sum(self.tokens(m) for m in messages[end:mark] if is_instruction(m))
        self.keep("instructions", (mark, total))
        return total + sum(self.tokens(m) for m in messages[mark:] if is_instruction(m))

    def drops_trailing_assistant(self) -> bool:
        """Whether the role rules drop assistant messages that end the request (no prefill)."""
        from ._profiles import TrailingAssistant

        rule = self.profile.trailing_assistant
        return rule is TrailingAssistant.DROP or (rule is TrailingAssistant.IF_PREFILL and not self.allow_prefill)

    def ends_turns(self, message: Mapping[str, Any]) -> bool:
        """Whether `message`, after an assistant message, keeps it from being trailing: anything
        but what the rules take out of the conversation — a system message they move up (Gemini's,
        hoisted), a blank user message they drop (profiles that refuse empty text)."""
        from ._profiles import MidSystem

        role = message.get("role")
        if role == "user":
            return not (self.profile.no_empty_text and is_empty_content(message.get("content")))
        return not (role in ("system", "developer") and self.profile.mid_system is MidSystem.HOIST)

    def synthetic_user_tokens(self) -> int:
        return self.tokens(_SYNTHETIC_USER)

    def rule_overheads(self) -> tuple[int, int, int]:
        """Tokens the role rules may add: (a bridge turn after tool results, the label of a
        converted system message, reasoning filled into an assistant message)."""
        from ._profiles import MidSystem, Reasoning

        profile = self.profile
        bridge = self.tokens(_BRIDGE) if profile.assistant_after_tool else 0
        note = (
            self.counter.text(f"{SYSTEM_NOTE_LABEL}\n\n{SYSTEM_NOTE_END}") + 2
            if profile.mid_system is MidSystem.TO_USER
            else 0
        )
        reasoning = 2 if profile.reasoning is not Reasoning.NONE and self.format == "chat" else 0
        return bridge, note, reasoning


def stood(walks: Mapping[str, object], name: str, mark: int, start: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the previous request kept under `name` for a walk that ends in a tuple — where it stood,
    then what it found there — if it stood no later than `mark`; else `start` (nothing walked)."""
    before = walks.get(name)
    return before if isinstance(before, tuple) and len(before) == len(start) and before[0] <= mark else start


def _last_breakpoint(messages: Sequence[Message], end: int, start: int, before: int) -> int:
    """`Context.last_breakpoint` of `messages[:end]`, the last one before `start` being `before`."""
    index = end - 1
    while index >= start and (
        not has_cache_control(messages[index]) or messages[index].get("role") in ("system", "developer")
    ):
        index -= 1
    return index if index >= start else before


_SYNTHETIC_USER: Final = {"role": "user", "content": SYNTHETIC_USER_CONTENT}
_BRIDGE: Final = {"role": "assistant", "content": BRIDGE_CONTENT}


def synthetic_user() -> dict[str, Any]:
    """A fresh synthetic user message."""
    return {"role": "user", "content": SYNTHETIC_USER_CONTENT}


def is_turn(message: Message) -> bool:
    """Whether an assistant message is a turn of the model's: not the bridge a provider's rules put
    after results, nor one with nothing in it (the rules drop it everywhere)."""
    if message.get("tool_calls"):
        return True
    content = message.get("content")
    return content != BRIDGE_CONTENT and not is_empty_content(content)
