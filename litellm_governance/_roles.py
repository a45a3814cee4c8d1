"""Step: make the roles follow the provider's rules (its profile).

In order, each rule as the profile asks:

1. Empty content: missing or ``null`` content becomes ``""`` on user, system and tool messages; an
   assistant message with no content and no tool calls carries nothing and is dropped.
2. Merge consecutive user→user and assistant→assistant messages, losing nothing: strings are
   joined by a blank line, multimodal parts concatenated, tool calls kept (Nanobot keeps only one
   side when either is a list, and drops plain assistant text before a tool-calling message).
3. Drop trailing assistant messages where the provider rejects prefill.
4. If that leaves no user or tool message, the last dropped assistant message becomes a user
   message instead (GLM rejects a request with system messages only: error 1214).
5. If the first non-system message is an assistant message, insert a synthetic user message
   before it (GLM, DeepSeek, Bedrock and Gemini need the conversation to start with the user).
"""

from __future__ import annotations

from typing import Any

from ._context import Context, synthetic_user
from ._messages import Message, is_empty_content, is_system, merge_content, tool_calls
from ._profiles import TrailingAssistant

__all__ = ["EnforceRoles"]

_NULL_TO_EMPTY = frozenset({"user", "system", "developer", "tool"})


class EnforceRoles:
    name = "roles"

    def __call__(self, messages: list[Message], ctx: Context) -> list[Message]:
        profile = ctx.profile
        out = _normalize_empty(messages, ctx)
        if profile.merge_consecutive:
            out = _merge_consecutive(out, ctx)
        drop_trailing = profile.trailing_assistant is TrailingAssistant.DROP or (
            profile.trailing_assistant is TrailingAssistant.IF_PREFILL and not ctx.allow_prefill
        )
        if drop_trailing:
            out = _drop_trailing_assistant(out, ctx)
        if profile.first_must_be_user:
            out = _user_first(out, ctx)
        return out


def _normalize_empty(messages: list[Message], ctx: Context) -> list[Message]:
    out: list[Message] | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        replacement: Message | None = message
        if isinstance(role, str) and role in _NULL_TO_EMPTY and message.get("content") is None:
            replacement = {**message, "content": ""}
            ctx.counts["null_content_filled"] += 1
        elif role == "assistant" and not message.get("tool_calls") and is_empty_content(message.get("content")):
            replacement = None
            ctx.counts["empty_messages_dropped"] += 1
        if replacement is not message and out is None:
            out = messages[:index]
        if out is not None and replacement is not None:
            out.append(replacement)
    return messages if out is None else out


def _mergeable(previous: Message, current: Message) -> bool:
    # An assistant message whose calls are answered is followed by its results, never by another
    # assistant message, so merging two assistant messages can never split calls from results.
    role = current.get("role")
    return role == previous.get("role") and role in ("user", "assistant")


def _merge(previous: Message, current: Message) -> Message:
    merged: dict[str, Any] = {**previous, **current}
    merged["content"] = merge_content(previous.get("content"), current.get("content"))
    calls = tool_calls(previous) + tool_calls(current)
    if calls:
        merged["tool_calls"] = calls
    for key in ("reasoning_content", "thinking_blocks"):
        first, second = previous.get(key), current.get(key)
        if first and second:
            merged[key] = merge_content(first, second)
    return merged


def _merge_consecutive(messages: list[Message], ctx: Context) -> list[Message]:
    out: list[Message] | None = None
    for index in range(1, len(messages)):
        message = messages[index]
        previous = messages[index - 1] if out is None else out[-1]
        if _mergeable(previous, message):
            if out is None:
                out = messages[:index]
            out[-1] = _merge(out[-1], message)
            ctx.counts["merged"] += 1
        elif out is not None:
            out.append(message)
    return messages if out is None else out


def _drop_trailing_assistant(messages: list[Message], ctx: Context) -> list[Message]:
    # Trailing = after the last non-assistant, non-system message (LiteLLM moves system messages
    # out of the conversation for Anthropic and Gemini, so they do not end it).
    trailing: list[int] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if is_system(message):
            continue
        if message.get("role") != "assistant":
            break
        trailing.append(index)
    if not trailing:
        return messages
    dropped = set(trailing)
    out = [m for i, m in enumerate(messages) if i not in dropped]
    if any(m.get("role") in ("user", "tool") for m in out):
        ctx.counts["trailing_assistant_dropped"] += len(trailing)
        return out
    # Nothing but system messages would remain: keep the last assistant turn, as the user's.
    last = trailing[0]
    recovered = {k: v for k, v in messages[last].items() if k != "tool_calls"}
    recovered["role"] = "user"
    ctx.counts["trailing_assistant_dropped"] += len(trailing) - 1
    ctx.counts["recovered_as_user"] += 1
    return [recovered if i == last else m for i, m in enumerate(messages) if i not in dropped or i == last]


def _user_first(messages: list[Message], ctx: Context) -> list[Message]:
    for index, message in enumerate(messages):
        if is_system(message):
            continue
        if message.get("role") != "assistant":
            return messages
        ctx.counts["synthetic_user_inserted"] += 1
        return [*messages[:index], synthetic_user(), *messages[index:]]
    return messages
