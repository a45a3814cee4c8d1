"""Anthropic's context editing (``context_management.edits``), applied by the gateway for providers
that do not have it, as Anthropic documents it
(https://docs.claude.com/en/docs/build-with-claude/context-editing), in the client's order:
``clear_tool_uses_20250919`` (``trigger``, ``keep``, ``exclude_tools``, ``clear_tool_inputs``,
``clear_at_least``) and ``clear_thinking_20251015`` (``keep``). Other edit types are left in
``context_management`` for whoever comes next; what was applied is reported as Anthropic reports it.
Pure: the client's objects are never changed, untouched ones are returned as they are."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._errors import InvalidRequestError
from ._tokens import REPLY_PRIMING, TokenCounter, encoding_for_model, token_cache

CLEAR_TOOL_USES: Final = "clear_tool_uses_20250919"
CLEAR_THINKING: Final = "clear_thinking_20251015"
#: The edit types the gateway applies itself.
APPLIED_HERE: Final = frozenset({CLEAR_TOOL_USES, CLEAR_THINKING})
#: What a cleared tool result holds instead of its content (Anthropic's own text is not published).
CLEARED_TOOL_RESULT: Final = "[Tool result cleared by context editing]"
_DEFAULT_TRIGGER_TOKENS: Final = 100_000
_DEFAULT_KEEP_TOOL_USES: Final = 3
_DEFAULT_KEEP_THINKING_TURNS: Final = 1
_THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
_TRIGGERS: Final = ("input_tokens", "tool_uses")

#: Counts the tokens of the prompt the messages make (system and tools included).
PromptTokens = Callable[[Sequence[Any]], int]


class ContextEditError(InvalidRequestError):
    """A ``context_management`` edit Anthropic would refuse (the message is the reason)."""


@dataclass(frozen=True)
class EditOutcome:
    """The edited messages, what each applied edit cleared, and the ``context_management`` left
    for the provider (None: nothing left, the field goes)."""

    messages: list[Any]
    applied_edits: tuple[dict[str, Any], ...]
    remaining: dict[str, Any] | None


def requested_edits(context_management: object) -> list[Mapping[str, Any]]:
    """The edits a ``context_management`` value asks for ([] when it asks for none)."""
    edits = context_management.get("edits") if isinstance(context_management, Mapping) else None
    return [e for e in edits if isinstance(e, Mapping)] if isinstance(edits, list) else []


def prompt_counter(
    model: str, *, system: object = None, tools: object = None, token_ratio: float = 1.0, cache_size: int = 65_536
) -> PromptTokens:
    """A `PromptTokens` for `model`'s requests with this `system` and `tools`: tiktoken (offline,
    cached) times `token_ratio` (provider tokens per tiktoken token)."""
    counter = TokenCounter(encoding_for_model(model), token_cache(cache_size))
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
    for edit in edits:
        if edit.get("type") not in types:
            continue
        before = count(current)
        if edit.get("type") == CLEAR_THINKING:
            current, cleared = _clear_thinking(current, edit)
            entry = {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared}
        else:
            current, cleared = _clear_tool_uses(current, edit, before, count)
            entry = {"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared}
        if cleared:
            applied.append({**entry, "cleared_input_tokens": max(0, before - count(current))})
    left = [edit for edit in edits if edit.get("type") not in types]
    return EditOutcome(current, tuple(applied), {**context_management, "edits": left} if left else None)


def _validate(edits: Sequence[Mapping[str, Any]], thinking: object, types: frozenset[str]) -> None:
    """Raise `ContextEditError` for what Anthropic refuses."""
    kinds = [edit.get("type") for edit in edits]
    if CLEAR_THINKING in kinds and kinds.index(CLEAR_THINKING) != 0:
        raise ContextEditError(f"`{CLEAR_THINKING}` must be the first edit in context_management.edits")
    for edit in (e for e in edits if e.get("type") in types):
        if edit.get("type") == CLEAR_THINKING:
            if not (isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")):
                raise ContextEditError(f"`{CLEAR_THINKING}` strategy requires `thinking` to be enabled")
            _thinking_keep(edit)
            continue
        _threshold(edit, "trigger", _TRIGGERS)
        _threshold(edit, "keep", ("tool_uses",))
        _threshold(edit, "clear_at_least", ("input_tokens",))
        if edit.get("exclude_tools") is not None and not _names(edit.get("exclude_tools")):
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
    number = keep.get("value") if isinstance(keep, Mapping) and keep.get("type") == "thinking_turns" else None
    if not isinstance(number, bool) and isinstance(number, int) and number >= 0:
        return number
    raise ContextEditError(f'{CLEAR_THINKING}.keep must be "all" or {{"type": "thinking_turns", "value": N}}')


def _blocks(message: object) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list) else []


def _is_thinking(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") in _THINKING_BLOCKS


def _clear_thinking(messages: list[Any], edit: Mapping[str, Any]) -> tuple[list[Any], int]:
    keep = _thinking_keep(edit)
    if keep is None:
        return messages, 0
    turns = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, Mapping) and m.get("role") == "assistant" and any(map(_is_thinking, _blocks(m)))
    ]
    cleared = 0
    out = list(messages)
    for index in turns[: max(0, len(turns) - keep)]:
        rest = [b for b in _blocks(out[index]) if not _is_thinking(b)]
        if rest:  # a turn of thinking alone keeps it: an empty assistant message is refused
            out[index] = {**out[index], "content": rest}
            cleared += 1
    return (out, cleared) if cleared else (messages, 0)


#: A block where it sits: (message index, block index, the block).
_At = tuple[int, int, Mapping[str, Any]]


def _tool_uses(messages: Sequence[Any]) -> list[tuple[str, _At, _At | None]]:
    """Each tool use: its tool's name, its ``tool_use`` block and its ``tool_result`` block (None: none)."""

    def blocks(role: str, kind: str) -> list[_At]:
        return [
            (i, j, block)
            for i, message in enumerate(messages)
            if isinstance(message, Mapping) and message.get("role") == role
            for j, block in enumerate(_blocks(message))
            if isinstance(block, Mapping) and block.get("type") == kind
        ]

    results: dict[str, _At] = {}
    for result in blocks("user", "tool_result"):
        results.setdefault(str(result[2].get("tool_use_id")), result)
    return [
        (call[2]["name"] if isinstance(call[2].get("name"), str) else "", call, results.get(str(call[2].get("id"))))
        for call in blocks("assistant", "tool_use")
    ]


def _clear_tool_uses(
    messages: list[Any], edit: Mapping[str, Any], tokens: int, count: PromptTokens
) -> tuple[list[Any], int]:
    uses = _tool_uses(messages)
    trigger, limit = _threshold(edit, "trigger", _TRIGGERS) or ("input_tokens", _DEFAULT_TRIGGER_TOKENS)
    if (tokens if trigger == "input_tokens" else len(uses)) <= limit:
        return messages, 0
    keep = (_threshold(edit, "keep", ("tool_uses",)) or ("tool_uses", _DEFAULT_KEEP_TOOL_USES))[1]
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs")
    changes: dict[tuple[int, int], dict[str, Any]] = {}
    cleared = 0
    for name, (i, j, call), result in (u for u in uses[: max(0, len(uses) - keep)] if u[0] not in excluded):
        changed = False
        if result is not None and result[2].get("content") != CLEARED_TOOL_RESULT:
            changes[result[:2]] = {**result[2], "content": CLEARED_TOOL_RESULT}
            changed = True
        if (inputs is True or (isinstance(inputs, list) and name in inputs)) and call.get("input") != {}:
            changes[(i, j)] = {**call, "input": {}}  # (an empty object: still valid)
            changed = True
        cleared += changed
    if not cleared:
        return messages, 0
    edited = list(messages)
    for (i, j), block in changes.items():
        edited[i] = {**edited[i], "content": [block if k == j else b for k, b in enumerate(_blocks(edited[i]))]}
    minimum = _threshold(edit, "clear_at_least", ("input_tokens",))
    if minimum is not None and tokens - count(edited) < minimum[1]:
        return messages, 0  # "Context will only be modified if at least this many tokens can be removed"
    return edited, cleared
