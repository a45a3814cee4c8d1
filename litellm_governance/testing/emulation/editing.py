"""Anthropic's context management as the Messages API applies it, written from Anthropic's
documentation (https://docs.claude.com/en/docs/build-with-claude/context-editing, the compaction
guide, and the SDK types of ``context_management``), never from litellm-governance's code: what the
emulated Anthropic reads of a request (`effective_request`), and the ``applied_edits`` it answers.

* A ``compaction`` block with content ends the history the model reads: everything before the
  newest one (earlier turns, and earlier blocks of its own turn) is dropped; a block whose content
  is null is a failed compaction and a no-op.
* ``clear_thinking_20251015`` (listed first, ``thinking`` on): thinking blocks are removed from all
  but the newest ``keep`` assistant turns (``{"type": "thinking_turns", "value": N}``, default 1;
  ``"all"`` keeps every one).
* ``clear_tool_uses_20250919``: when the input passes ``trigger`` (``input_tokens``, default
  100,000, or ``tool_uses``), the oldest tool results are replaced with placeholder text, all but
  the newest ``keep`` tool uses (default 3), never those of ``exclude_tools``; ``clear_tool_inputs``
  (true, or tool names) clears the calls' inputs too; ``clear_at_least`` (``input_tokens``): only if
  at least that much goes.

The applied edits are reported per edit that cleared something: ``{"type", "cleared_tool_uses" |
"cleared_thinking_turns", "cleared_input_tokens"}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["EDITING_BETA", "PLACEHOLDER", "effective_request"]

#: The beta a request with ``context_management`` needs (header ``anthropic-beta``).
EDITING_BETA: Final = "context-management-2025-06-27"
#: What the emulated API puts in place of a cleared tool result (Anthropic does not publish its text).
PLACEHOLDER: Final = "[cleared by the emulated API]"

_Count = Callable[[Mapping[str, Any]], int]


def _content(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return list(content) if isinstance(content, list) else []


def _after_compaction(messages: list[Any]) -> list[Any]:
    for index in range(len(messages) - 1, -1, -1):
        blocks = _content(messages[index])
        for position in range(len(blocks) - 1, -1, -1):
            block = blocks[position]
            if isinstance(block, Mapping) and block.get("type") == "compaction" and block.get("content") is not None:
                return [{**messages[index], "content": blocks[position:]}, *messages[index + 1 :]]
    return messages


def _threshold(spec: Mapping[str, Any], key: str, default: int) -> tuple[str, int]:
    value = spec.get(key)
    if isinstance(value, Mapping) and isinstance(value.get("value"), int):
        return str(value.get("type")), int(value["value"])
    return "", default


def _clear_thinking(body: dict[str, Any], spec: Mapping[str, Any]) -> int:
    keep = spec.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return 0
    turns = keep.get("value", 1) if isinstance(keep, Mapping) else 1
    thinking = {"thinking", "redacted_thinking"}
    holding = [
        i
        for i, m in enumerate(body["messages"])
        if m.get("role") == "assistant"
        and any(isinstance(b, Mapping) and b.get("type") in thinking for b in _content(m))
    ]
    cleared = 0
    for index in holding[: max(0, len(holding) - turns)]:
        rest = [
            b for b in _content(body["messages"][index]) if not (isinstance(b, Mapping) and b.get("type") in thinking)
        ]
        if rest:
            body["messages"][index] = {**body["messages"][index], "content": rest}
            cleared += 1
    return cleared


def _clear_tool_uses(body: dict[str, Any], spec: Mapping[str, Any], count: _Count) -> int:
    messages = body["messages"]
    uses = [
        (i, j, block)
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        for j, block in enumerate(_content(m))
        if isinstance(block, Mapping) and block.get("type") == "tool_use"
    ]
    kind, limit = _threshold(spec, "trigger", 100_000)
    if (len(uses) if kind == "tool_uses" else count(body)) <= limit:
        return 0
    _, keep = _threshold(spec, "keep", 3)
    excluded = set(spec.get("exclude_tools") or ())
    inputs = spec.get("clear_tool_inputs")
    older = [use for use in uses[: max(0, len(uses) - keep)] if use[2].get("name") not in excluded]
    cleared_ids = {str(block.get("id")) for _, _, block in older}
    edited = [dict(m, content=list(m["content"])) if isinstance(m.get("content"), list) else m for m in messages]
    cleared = 0
    for i, j, block in older:
        if inputs is True or (isinstance(inputs, list) and block.get("name") in inputs):
            edited[i]["content"][j] = {**block, "input": {}}
    for message in edited:
        if message.get("role") != "user" or not isinstance(message.get("content"), list):
            continue
        for j, block in enumerate(message["content"]):
            if (
                isinstance(block, Mapping)
                and block.get("type") == "tool_result"
                and str(block.get("tool_use_id")) in cleared_ids
            ):
                message["content"][j] = {**block, "content": PLACEHOLDER}
                cleared += 1
    minimum = spec.get("clear_at_least")
    if (
        cleared
        and isinstance(minimum, Mapping)
        and count(body) - count({**body, "messages": edited}) < int(minimum.get("value", 0))
    ):
        return 0
    body["messages"] = edited
    return cleared


def effective_request(body: Mapping[str, Any], count: _Count) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the emulated Anthropic reads of `body` (the history from the newest compaction on, with
    the requested edits applied, in their order) and the applied edits it reports."""
    messages = body.get("messages")
    effective: dict[str, Any] = {
        **body,
        "messages": _after_compaction(list(messages) if isinstance(messages, list) else []),
    }
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    applied: list[dict[str, Any]] = []
    for spec in edits if isinstance(edits, list) else ():
        if not isinstance(spec, Mapping):
            continue
        before = count(effective)
        if spec.get("type") == "clear_thinking_20251015":
            cleared = _clear_thinking(effective, spec)
            entry: dict[str, Any] = {"type": "clear_thinking_20251015", "cleared_thinking_turns": cleared}
        elif spec.get("type") == "clear_tool_uses_20250919":
            cleared = _clear_tool_uses(effective, spec, count)
            entry = {"type": "clear_tool_uses_20250919", "cleared_tool_uses": cleared}
        else:
            continue
        if cleared:
            entry["cleared_input_tokens"] = max(0, before - count(effective))
            applied.append(entry)
    return effective, applied
