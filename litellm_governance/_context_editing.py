"""Anthropic's context editing (``context_management.edits``), applied by the gateway for providers
that do not have it. Pure: the client's objects are never changed, untouched ones are returned as
they are.

Anthropic applies the edits server-side, before the prompt reaches the model, to a history the
client keeps whole (https://docs.claude.com/en/docs/build-with-claude/context-editing). Where a
deployment's provider has no such feature — any provider LiteLLM translates ``/v1/messages`` for,
and Claude models on Bedrock or Vertex that refuse the field — the gateway does what Anthropic
documents, in the order the client listed the edits:

* ``clear_tool_uses_20250919``: once the prompt passes ``trigger`` (``input_tokens``, default
  100,000; or ``tool_uses``), the results of the oldest tool uses are replaced by a placeholder,
  all but the newest ``keep`` (``tool_uses``, default 3); uses of ``exclude_tools`` are never
  cleared; ``clear_tool_inputs`` (true, or a list of tool names) clears the calls' inputs too; with
  ``clear_at_least`` (``input_tokens``) nothing is cleared unless at least that much would be.
* ``clear_thinking_20251015`` (needs ``thinking`` enabled): thinking blocks are removed from all
  but the newest ``keep`` assistant turns (``thinking_turns``, default 1); ``"all"`` keeps all.

Other edit types (``compact_20260112``, which needs a model to write the summary, and types not
known here) are left in ``context_management`` for whoever comes next. What was applied is
reported as Anthropic reports it: ``{"type", "cleared_tool_uses" | "cleared_thinking_turns",
"cleared_input_tokens"}`` per edit that cleared something.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._errors import InvalidRequestError
from ._tokens import REPLY_PRIMING, TokenCounter, encoding_for_model, token_cache

__all__ = [
    "APPLIED_HERE",
    "CLEARED_TOOL_INPUT",
    "CLEARED_TOOL_RESULT",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "ContextEditError",
    "EditOutcome",
    "apply_context_edits",
    "prompt_counter",
    "requested_edits",
]

CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
CLEAR_THINKING: Final = "clear_thinking_20251015"
#: The edit types the gateway applies itself.
APPLIED_HERE: Final = frozenset({CLEAR_TOOL_USES, CLEAR_THINKING})
#: What a cleared tool result holds instead of its content (Anthropic's own text is not published).
CLEARED_TOOL_RESULT: Final = "[Tool result cleared by context editing]"
#: What a cleared tool use's input becomes (``clear_tool_inputs``): an empty object, still valid.
CLEARED_TOOL_INPUT: Final[Mapping[str, Any]] = {}
_DEFAULT_TRIGGER_TOKENS: Final = 100_000
_DEFAULT_KEEP_TOOL_USES: Final = 3
_DEFAULT_KEEP_THINKING_TURNS: Final = 1
_THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})


class ContextEditError(InvalidRequestError):
    """A ``context_management`` edit Anthropic would refuse (the message is the reason)."""


@dataclass(frozen=True)
class EditOutcome:
    """The edited messages, what each applied edit cleared, and the ``context_management`` left
    for the provider (None: nothing left, the field goes)."""

    messages: list[Any]
    applied_edits: tuple[dict[str, Any], ...]
    remaining: dict[str, Any] | None

    @property
    def changed(self) -> bool:
        return bool(self.applied_edits)


def requested_edits(context_management: object) -> list[Mapping[str, Any]]:
    """The edits a ``context_management`` value asks for ([] when it asks for none)."""
    if not isinstance(context_management, Mapping):
        return []
    edits = context_management.get("edits")
    return [e for e in edits if isinstance(e, Mapping)] if isinstance(edits, list) else []


#: Counts the tokens of the prompt the messages make (system and tools included).
PromptTokens = Callable[[Sequence[Any]], int]


def prompt_counter(
    model: str, *, system: object = None, tools: object = None, token_ratio: float = 1.0
) -> PromptTokens:
    """A `PromptTokens` for `model`'s requests with this `system` and `tools`: tiktoken (offline,
    cached) times `token_ratio` (provider tokens per tiktoken token)."""
    counter = TokenCounter(encoding_for_model(model), token_cache())
    fixed = REPLY_PRIMING + counter.tools(tools if isinstance(tools, list) else None)
    if system is not None:
        fixed += counter.content(system)

    def count(messages: Sequence[Any]) -> int:
        return math.ceil((fixed + sum(counter.message(m) for m in messages if isinstance(m, Mapping))) * token_ratio)

    return count


def apply_context_edits(
    messages: Sequence[Any],
    context_management: Mapping[str, Any],
    *,
    count: PromptTokens,
    thinking: object = None,
    types: frozenset[str] = APPLIED_HERE,
) -> EditOutcome:
    """Apply the edits of `context_management` whose type is in `types` to Anthropic `messages`,
    in the client's order; `count` gives a prompt's size, `thinking` is the request's ``thinking``.
    Raises `ContextEditError` for an edit Anthropic would refuse."""
    edits = requested_edits(context_management)
    _validate(edits, thinking, types)
    current: list[Any] = list(messages)
    applied: list[dict[str, Any]] = []
    left: list[Any] = []
    for edit in edits:
        kind = edit.get("type")
        if kind not in types:
            left.append(edit)
            continue
        before = count(current)
        if kind == CLEAR_THINKING:
            current, cleared = _clear_thinking(current, edit)
            entry = {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared}
        else:
            current, cleared = _clear_tool_uses(current, edit, before, count)
            entry = {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared}
        if cleared:
            entry["cleared_input_tokens"] = max(0, before - count(current))
            applied.append(entry)
    remaining = {**context_management, "edits": left} if left else None
    return EditOutcome(current, tuple(applied), remaining)


# ---- validation (what Anthropic refuses) -----------------------------------------------------------


def _validate(edits: Sequence[Mapping[str, Any]], thinking: object, types: frozenset[str]) -> None:
    kinds = [edit.get("type") for edit in edits]
    if CLEAR_THINKING in kinds and kinds.index(CLEAR_THINKING) != 0:
        raise ContextEditError(f"`{CLEAR_THINKING}` must be the first edit in context_management.edits")
    for edit in edits:
        kind = edit.get("type")
        if kind not in types:
            continue
        if kind == CLEAR_THINKING:
            enabled = isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")
            if not enabled:
                raise ContextEditError(f"`{CLEAR_THINKING}` strategy requires `thinking` to be enabled")
            _thinking_keep(edit)
        else:
            _threshold(edit, "trigger", ("input_tokens", "tool_uses"))
            _threshold(edit, "keep", ("tool_uses",))
            _threshold(edit, "clear_at_least", ("input_tokens",))
            excluded = edit.get("exclude_tools")
            if excluded is not None and not _names(excluded):
                raise ContextEditError(f"{CLEAR_TOOL_USES}.exclude_tools must be a list of tool names")
            inputs = edit.get("clear_tool_inputs")
            if inputs is not None and not isinstance(inputs, bool) and not _names(inputs):
                raise ContextEditError(f"{CLEAR_TOOL_USES}.clear_tool_inputs must be a boolean or a list of tool names")


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _threshold(edit: Mapping[str, Any], key: str, kinds: tuple[str, ...]) -> tuple[str, int] | None:
    value = edit.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type") not in kinds:
        raise ContextEditError(f"{edit.get('type')}.{key} must be an object with type {' or '.join(kinds)}")
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise ContextEditError(f"{edit.get('type')}.{key}.value must be a non-negative integer")
    return str(value["type"]), number


def _thinking_keep(edit: Mapping[str, Any]) -> int | None:
    """Assistant turns whose thinking is kept (None: all)."""
    keep = edit.get("keep")
    if keep is None:
        return _DEFAULT_KEEP_THINKING_TURNS
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return None
    if isinstance(keep, Mapping) and keep.get("type") == "thinking_turns":
        number = keep.get("value")
        if not isinstance(number, bool) and isinstance(number, int) and number >= 0:
            return number
    raise ContextEditError(f'{CLEAR_THINKING}.keep must be "all" or {{"type": "thinking_turns", "value": N}}')


# ---- the edits ---------------------------------------------------------------------------------------


def _blocks(message: object) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list) else []


def _clear_thinking(messages: list[Any], edit: Mapping[str, Any]) -> tuple[list[Any], int]:
    keep = _thinking_keep(edit)
    if keep is None:
        return messages, 0
    turns = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, Mapping)
        and m.get("role") == "assistant"
        and any(isinstance(b, Mapping) and b.get("type") in _THINKING_BLOCKS for b in _blocks(m))
    ]
    cleared = 0
    out = list(messages)
    for index in turns[: max(0, len(turns) - keep)]:
        message = out[index]
        rest = [b for b in _blocks(message) if not (isinstance(b, Mapping) and b.get("type") in _THINKING_BLOCKS)]
        if rest:  # a turn of thinking alone keeps it: an empty assistant message is refused
            out[index] = {**message, "content": rest}
            cleared += 1
    return (out, cleared) if cleared else (messages, 0)


@dataclass(frozen=True)
class _Use:
    """One tool use: where its ``tool_use`` block and its ``tool_result`` block sit."""

    name: str
    call: tuple[int, int]  # (message, block)
    result: tuple[int, int] | None


def _tool_uses(messages: Sequence[Any]) -> list[_Use]:
    results: dict[str, tuple[int, int]] = {}
    for i, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            for j, block in enumerate(_blocks(message)):
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    results.setdefault(str(block.get("tool_use_id")), (i, j))
    uses = []
    for i, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            for j, block in enumerate(_blocks(message)):
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    name = block.get("name")
                    uses.append(_Use(name if isinstance(name, str) else "", (i, j), results.get(str(block.get("id")))))
    return uses


def _clear_tool_uses(
    messages: list[Any], edit: Mapping[str, Any], tokens: int, count: PromptTokens
) -> tuple[list[Any], int]:
    uses = _tool_uses(messages)
    trigger = _threshold(edit, "trigger", ("input_tokens", "tool_uses")) or ("input_tokens", _DEFAULT_TRIGGER_TOKENS)
    if (tokens if trigger[0] == "input_tokens" else len(uses)) <= trigger[1]:
        return messages, 0
    keep = (_threshold(edit, "keep", ("tool_uses",)) or ("tool_uses", _DEFAULT_KEEP_TOOL_USES))[1]
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs")
    clear_inputs: Callable[[str], bool] = (
        (lambda name: name in inputs) if isinstance(inputs, list) else (lambda _name: inputs is True)
    )
    candidates = [u for u in uses[: max(0, len(uses) - keep)] if u.name not in excluded]
    edits: dict[tuple[int, int], Callable[[Mapping[str, Any]], dict[str, Any]]] = {}
    cleared = 0
    for use in candidates:
        changed = False
        if use.result is not None and not _already_cleared(messages, use.result):
            edits[use.result] = _clear_result
            changed = True
        if clear_inputs(use.name) and _block(messages, use.call).get("input") != CLEARED_TOOL_INPUT:
            edits[use.call] = _clear_input
            changed = True
        cleared += changed
    if not cleared:
        return messages, 0
    edited = _apply(messages, edits)
    minimum = _threshold(edit, "clear_at_least", ("input_tokens",))
    if minimum is not None and tokens - count(edited) < minimum[1]:
        return messages, 0  # "Context will only be modified if at least this many tokens can be removed"
    return edited, cleared


def _block(messages: Sequence[Any], at: tuple[int, int]) -> Mapping[str, Any]:
    block = _blocks(messages[at[0]])[at[1]]
    return block if isinstance(block, Mapping) else {}


def _already_cleared(messages: Sequence[Any], at: tuple[int, int]) -> bool:
    return _block(messages, at).get("content") == CLEARED_TOOL_RESULT


def _clear_result(block: Mapping[str, Any]) -> dict[str, Any]:
    return {**block, "content": CLEARED_TOOL_RESULT}


def _clear_input(block: Mapping[str, Any]) -> dict[str, Any]:
    return {**block, "input": dict(CLEARED_TOOL_INPUT)}


def _apply(
    messages: list[Any], edits: Mapping[tuple[int, int], Callable[[Mapping[str, Any]], dict[str, Any]]]
) -> list[Any]:
    out = list(messages)
    by_message: dict[int, list[tuple[int, Callable[[Mapping[str, Any]], dict[str, Any]]]]] = {}
    for (i, j), change in edits.items():
        by_message.setdefault(i, []).append((j, change))
    for i, changes in by_message.items():
        blocks = list(_blocks(out[i]))
        for j, change in changes:
            blocks[j] = change(blocks[j])
        out[i] = {**out[i], "content": blocks}
    return out
