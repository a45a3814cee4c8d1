"""The contract between the pipeline and its steps.

A step is a callable ``step(messages, ctx) -> StepResult``:

* `Context` is what the step may read — the request's inputs, frozen: the config, the provider's
  profile, the budget, the token counter, the settings of one shrinking attempt — and a `Memo` of
  what was already computed for this request (token counts, the tool-call pairing of a list), a
  cache that never changes what a step decides and lives only as long as the request;
* `StepResult` is what the step did — the messages (the input list itself when nothing changed),
  each message's fate (`Fate`: which step made, changed or dropped which message, and how much it
  counts in the report), notes, and whether the request is still over budget — returned, never
  written into shared state. The pipeline adds the results up (`Tally`); the report's counts,
  ``explain`` and the HTML page all read the fates.

Steps never mutate their input messages either: a changed message is a new dict.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
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
from ._pairing import Pairing, pair
from ._profiles import MidSystem, Profile, Reasoning, TrailingAssistant
from ._tokens import REPLY_PRIMING, TokenCounter

if TYPE_CHECKING:
    from ._calls import CallInfo
    from ._cut_turns import CutTurns

__all__ = [
    "BRIDGE_CONTENT",
    "SYNTHETIC_USER_CONTENT",
    "Context",
    "Fate",
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


@dataclass(frozen=True, slots=True)
class Fate:
    """What a step did to one message: `step` (a name of `_steps.STEPS`) made, changed or moved
    `message` (the message as it now is), or dropped it (the message that went); `count` is what it
    adds to the report's count of `step` (a message with several renamed calls counts each)."""

    step: str
    message: Message | None
    count: int = 1


@dataclass(frozen=True)
class StepResult:
    """What one step did: its output messages and each message's fate."""

    messages: list[Message]
    fates: tuple[Fate, ...] = ()
    #: Notes for the report (never message content).
    notes: tuple[str, ...] = ()
    #: The request is still over budget after this step (shrinking steps only).
    over_budget: bool = False
    #: index -> tool name of large results no rule may compact (for the report).
    large_uncompacted: Mapping[int, str] = field(default_factory=dict)
    #: The turns a cut removed (shrinking steps), for a summary model.
    cut: CutTurns | None = None


@dataclass
class Tally:
    """The results of the steps run so far, added up (the pipeline's running total)."""

    fates: list[Fate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    over_budget: bool = False
    large_uncompacted: dict[int, str] = field(default_factory=dict)
    cut: CutTurns | None = None

    def add(self, result: StepResult) -> list[Message]:
        """Count `result` in; its messages, for the next step."""
        self.fates.extend(result.fates)
        self.notes.extend(result.notes)
        self.over_budget = result.over_budget
        self.large_uncompacted.update(result.large_uncompacted)
        if result.cut is not None:
            self.cut = result.cut
        return result.messages

    @property
    def counts(self) -> Counter[str]:
        """How many times each step acted (the report's ``steps``)."""
        counts: Counter[str] = Counter()
        for fate in self.fates:
            counts[fate.step] += fate.count
        return counts


class Memo:
    """Per-request caches of what steps compute again and again, keyed by object identity (safe:
    the memo keeps the objects alive). A cache hit never changes a decision."""

    __slots__ = ("alive", "calls", "counts", "overheads", "pairing")

    def __init__(self) -> None:
        #: id(message) -> its tokens; `alive` holds every message counted, so no other object can
        #: take one of these ids while the memo lives.
        self.counts: dict[int, int] = {}
        self.alive: list[Mapping[str, Any]] = []
        self.pairing: tuple[object, Pairing] | None = None
        self.calls: tuple[object, Mapping[str, CallInfo]] | None = None
        self.overheads: tuple[int, int, int] | None = None


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
    #: The request format has chat's ``reasoning_content`` field (`_formats.FormatSpec`).
    reasoning_field: bool = True
    #: The format needs tool-call ids unique in the whole request (`_formats.FormatSpec`).
    unique_call_ids: bool = False
    #: How the outline holds text an assistant turn gains (`_formats.FormatSpec.said`).
    said: Callable[[str], Any] = str
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
            memo.pairing = (messages, pair(messages))
        return memo.pairing[1]

    def calls_by_id(self, messages: Sequence[Message]) -> Mapping[str, CallInfo]:
        """`_calls.calls_by_id(messages)`, once per list object (compaction and the note both read it)."""
        memo = self.memo
        if memo.calls is None or memo.calls[0] is not messages:
            from ._calls import calls_by_id  # not at the top: _calls imports _backfill, which imports this module

            memo.calls = (messages, calls_by_id(messages))
        return memo.calls[1]

    def last_breakpoint(self, messages: Sequence[Message]) -> int:
        """Index of the last conversation message with a cache_control breakpoint (-1: none). A
        system or developer message's breakpoint marks the system prompt, which providers cache ahead
        of every message wherever it stood: it protects no result (else governing twice would differ);
        nor does an empty message the role rules drop (its breakpoint goes with it)."""
        for index in range(len(messages) - 1, -1, -1):
            if has_cache_control(messages[index]) and not self._protects_nothing(messages[index]):
                return index
        return -1

    def _protects_nothing(self, message: Message) -> bool:
        """A system message (its breakpoint marks the system prompt), or a message the rules drop."""
        role = message.get("role")
        if role == "user":
            return not self.ends_turns(message)  # empty, where the provider refuses empty text
        if role == "assistant":
            return not message.get("tool_calls") and is_empty_content(message.get("content"))
        return role in ("system", "developer")

    def tokens(self, message: Mapping[str, Any]) -> int:
        """Tokens of one message, computed once per message object in this call."""
        counts = self.memo.counts
        count = counts.get(id(message))
        if count is None:
            count = counts[id(message)] = self.counter.message(message)
            self.memo.alive.append(message)
        return count

    def total(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The tokens of all `messages` (each as `tokens` counts it)."""
        return sum(map(self.tokens, messages))

    def request_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The tokens of a request holding `messages`: with its tool schemas and the reply priming."""
        return self.tools_tokens + REPLY_PRIMING + self.total(messages)

    def oversized(self, messages: Sequence[Mapping[str, Any]]) -> int | None:
        """Size above which a single result is compacted whatever its age: half the room the
        budget leaves for history (None without a budget). It cannot share the request with
        anything else, and cutting everything else for it would lose the task."""
        if self.budget is None:
            return None
        fixed = self.tools_tokens + sum(self.tokens(m) for m in messages if is_instruction(m))
        return max(0, self.budget - fixed) // 2

    def drops_trailing_assistant(self) -> bool:
        """Whether the role rules drop assistant messages that end the request (no prefill)."""
        rule = self.profile.trailing_assistant
        return rule is TrailingAssistant.DROP or (rule is TrailingAssistant.IF_PREFILL and not self.allow_prefill)

    def ends_turns(self, message: Mapping[str, Any]) -> bool:
        """Whether `message`, after an assistant message, keeps it from being trailing: anything
        but what the rules take out of the conversation — a system message they move up (Gemini's,
        hoisted), a blank user message they drop (profiles that refuse empty text)."""
        role = message.get("role")
        if role == "user":
            return not (self.profile.no_empty_text and is_empty_content(message.get("content")))
        return not (role in ("system", "developer") and self.profile.mid_system is MidSystem.HOIST)

    def bridge(self) -> Message:
        """A new bridge turn: the assistant message some providers need between results and a user turn."""
        return {"role": "assistant", "content": self.said(BRIDGE_CONTENT)}

    def synthetic_user_tokens(self) -> int:
        return self.tokens(_SYNTHETIC_USER)

    def rule_overheads(self) -> tuple[int, int, int]:
        """Tokens the role rules may add: (a bridge turn after tool results, the label of a
        converted system message, reasoning filled into an assistant message)."""
        if self.memo.overheads is None:
            profile = self.profile
            bridge = self.tokens(self.bridge()) if profile.assistant_after_tool else 0
            note = 0
            if profile.mid_system is MidSystem.TO_USER:
                note = self.counter.text(f"{SYSTEM_NOTE_LABEL}\n\n{SYSTEM_NOTE_END}") + 2
            reasoning = 2 if profile.reasoning is not Reasoning.NONE and self.reasoning_field else 0
            self.memo.overheads = (bridge, note, reasoning)
        return self.memo.overheads


_SYNTHETIC_USER: Final = {"role": "user", "content": SYNTHETIC_USER_CONTENT}


def synthetic_user() -> dict[str, Any]:
    """A fresh synthetic user message."""
    return dict(_SYNTHETIC_USER)


def is_turn(message: Message) -> bool:
    """Whether an assistant message is a turn of the model's: not the bridge a provider's rules put
    after results, nor one with nothing in it (the rules drop it everywhere)."""
    if message.get("tool_calls"):
        return True
    content = message.get("content")
    return not is_bridge_content(content) and not is_empty_content(content)


def is_bridge_content(content: object) -> bool:
    """Whether `content` is the bridge turn's text: as the rules write it, or as a Responses body
    carries it (one message item of one text part)."""
    while isinstance(content, list) and len(content) == 1 and isinstance(content[0], Mapping):
        part = content[0]
        content = part.get("text") if "text" in part else part.get("content") if part.get("type") == "message" else None
    return content == BRIDGE_CONTENT
