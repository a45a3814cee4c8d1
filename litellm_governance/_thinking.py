"""Request rule: with thinking on, Claude needs the last assistant turn of an open tool loop to start
with its (signed) thinking block, or thinking off (Anthropic's 400, PROVIDERS.md
``anthropic.thinking_first``). A gateway cannot make up a block signed by the provider, so where the
client or a bridge lost it (LiteLLM's Responses-to-Anthropic bridge returns Claude's thinking to Codex
unsigned) the request goes with thinking off and the report says so. Requests that keep their
thinking blocks (Claude Code) are never touched. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

__all__ = ["THINKING_OFF_NOTE", "lost_thinking_fields"]

_THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
#: What the report says when thinking was turned off.
THINKING_OFF_NOTE: Final = (
    "thinking turned off: the last assistant turn of the tool loop has no thinking block (lost by the "
    "client or a bridge), which the provider requires while thinking is on"
)


#: How a format carries thinking (`_formats.FormatSpec.thinking`): as the assistant turn's leading
#: content ``blocks`` (Anthropic), or as ``fields`` LiteLLM adds to a chat message (``thinking_blocks``;
#: turned on by ``thinking`` or ``reasoning_effort``).
Shape: TypeAlias = Literal["blocks", "fields"]


def _blocks(message: object, key: str) -> list[Any]:
    value = message.get(key) if isinstance(message, Mapping) else None
    return value if isinstance(value, list) else []


def _has(message: object, kind: str) -> bool:
    """`message` holds a content block of type `kind`."""
    return any(isinstance(b, Mapping) and b.get("type") == kind for b in _blocks(message, "content"))


def _open_loop_turn(history: Sequence[Any], shape: Shape) -> Mapping[str, Any] | None:
    """The last assistant turn when the history ends with its tool results, else None."""
    if not history or not isinstance(history[-1], Mapping):
        return None
    if shape == "blocks":
        turn = history[-2] if len(history) > 1 else None
        return turn if _has(history[-1], "tool_result") and _has(turn, "tool_use") else None
    index = len(history) - 1
    while index >= 0 and isinstance(history[index], Mapping) and history[index].get("role") == "tool":
        index -= 1
    turn = history[index] if 0 <= index < len(history) - 1 else None
    return turn if isinstance(turn, Mapping) and turn.get("role") == "assistant" and turn.get("tool_calls") else None


def lost_thinking_fields(request: Mapping[str, Any], history: Sequence[Any], shape: Shape | None) -> tuple[str, ...]:
    """The request fields that turn thinking on (``thinking``; chat: ``reasoning_effort`` too), when
    the tool loop's last assistant turn in `history` lacks the thinking block it must start with;
    () when thinking is off, the format carries none (`shape` None), or the block is there."""
    thinking, effort = request.get("thinking"), request.get("reasoning_effort")
    on = (isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")) or (
        shape == "fields" and isinstance(effort, str) and effort not in ("none", "disable")
    )
    turn = _open_loop_turn(history, shape) if shape is not None and on else None
    if turn is None:
        return ()
    # Blocks: the turn's first block. Chat (LiteLLM's shape): the blocks LiteLLM sends back come from
    # `thinking_blocks`.
    leading = _blocks(turn, "content")[:1] if shape == "blocks" else _blocks(turn, "thinking_blocks")
    if any(isinstance(b, Mapping) and b.get("type") in _THINKING_BLOCKS for b in leading):
        return ()
    return tuple(key for key in ("thinking", "reasoning_effort") if key in request)
