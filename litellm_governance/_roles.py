"""Step: make the roles follow the provider's rules (its profile).

In order, each rule as the profile asks:

1. Empty content: missing or ``null`` content becomes ``""`` on user, system and tool messages; an
   assistant message with no content and no tool calls carries nothing and is dropped. Where the
   provider rejects blank text (every profile but ``permissive``), blank text parts are dropped,
   a user message with nothing in it is dropped, and blank content next to tool calls goes — but
   a request whose only turn was an empty user message keeps it, saying ``(empty message)``
   (dropped, the request would hold system messages only: GLM's error 1214).
2. Mid-conversation system (and developer) messages: kept (``permissive``), moved up to the
   system prompt (``gemini``), or turned into a user message in place, labelled as a system note
   (everyone else: GLM and vLLM chat templates reject them, Mistral accepts them only after a
   user message, Bedrock and Claude get them converted by LiteLLM anyway).
3. Merge consecutive user→user and assistant→assistant messages, losing nothing: strings are
   joined by a blank line, multimodal parts concatenated, tool calls kept (Nanobot keeps only one
   side when either is a list, and drops plain assistant text before a tool-calling message).
4. Drop trailing assistant messages where the provider rejects prefill.
5. If that leaves no user or tool message, the last dropped assistant message becomes a user
   message instead (GLM rejects a request with system messages only: error 1214).
6. If the first non-system message is an assistant message, insert a synthetic user message
   before it (GLM, DeepSeek, Bedrock and Gemini need the conversation to start with the user) —
   unless it holds the compaction the provider reads the history from (`_compaction`); after
   system messages alone, an ``(empty message)`` user turn.
7. Where the provider needs an assistant turn between tool results and the next user message
   (Mistral, Bedrock Converse), insert a short one.
8. Thinking-mode providers that need ``reasoning_content`` sent back (DeepSeek, Kimi) get it on
   the assistant messages that lack it: the message's own thinking text where LiteLLM kept it,
   else a single space (chat requests only: the field exists only there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._context import Context, Fate, StepResult, synthetic_user
from ._messages import (
    ORIGIN,
    TEXT_PARTS,
    TRACE,
    Message,
    is_blank_part,
    is_empty_content,
    is_opener,
    is_system,
    merge_content,
    origin,
    system_note,
    tool_calls,
)
from ._profiles import MidSystem, Reasoning
from ._steps import (
    ASSISTANT_BRIDGE_INSERTED,
    BLANK_TEXT_DROPPED,
    EMPTY_MESSAGES_DROPPED,
    EMPTY_USER_KEPT,
    MERGED,
    NULL_CONTENT_FILLED,
    REASONING_CONTENT_FILLED,
    RECOVERED_AS_USER,
    SYNTHETIC_USER_INSERTED,
    SYSTEM_CONVERTED,
    SYSTEM_HOISTED,
    TRAILING_ASSISTANT_DROPPED,
)

__all__ = ["enforce_roles"]

_NULL_TO_EMPTY = frozenset({"user", "system", "developer", "tool"})
#: What an empty user message says where the provider rejects empty text and it is the only turn.
EMPTY_USER_CONTENT: Final = "(empty message)"


def enforce_roles(messages: list[Message], ctx: Context) -> StepResult:
    profile = ctx.profile
    fates: list[Fate] = []
    out = _normalize_empty(messages, ctx, fates)
    if profile.mid_system is not MidSystem.KEEP:
        out = _mid_conversation_system(out, ctx, fates)
    if profile.merge_consecutive:
        out = _merge_consecutive(out, ctx, fates)
    if ctx.drops_trailing_assistant():
        out = _drop_trailing_assistant(out, fates)
    if profile.first_must_be_user:
        out = _user_first(out, fates)
    if profile.assistant_after_tool:
        out = _assistant_after_tool(out, fates, ctx.bridge)
    if profile.reasoning is not Reasoning.NONE and ctx.reasoning_field:
        out = _reasoning_content(out, ctx, fates)
    return StepResult(out, tuple(fates))


def _without_blank_parts(content: object) -> object:
    if isinstance(content, list):
        for part in content:  # a plain loop, the common blocks decided inline: it runs on every message
            if type(part) is dict:
                if part.get("type") not in TEXT_PARTS and part.get("type") != "message":
                    continue
                text = part.get("text")
                if type(text) is str and text and not text.isspace():
                    continue
            if is_blank_part(part):
                return [part for part in content if not is_blank_part(part)]
    return content


def _normalize_empty(messages: list[Message], ctx: Context, fates: list[Fate]) -> list[Message]:
    out: list[Message] = []
    dropped_user: Message | None = None
    for message in messages:
        replacement = _empty_rule(message, ctx.profile.no_empty_text, fates)
        if replacement is None and message.get("role") == "user":
            dropped_user = message
        if replacement is not None:
            out.append(replacement)
    if dropped_user is not None and all(is_system(m) for m in out):
        # Nothing but system messages would be left (GLM: error 1214; Anthropic: no message at all):
        # the user's turn stays, saying it was empty.
        fates.remove(next(f for f in fates if f.message is dropped_user))
        out.append({**dropped_user, "content": EMPTY_USER_CONTENT})
        fates.append(Fate(EMPTY_USER_KEPT, out[-1]))
    unchanged = len(out) == len(messages) and all(a is b for a, b in zip(out, messages, strict=True))
    return messages if unchanged else out


def _empty_rule(message: Message, strict_text: bool, fates: list[Fate]) -> Message | None:
    """`message` as the empty-content rules leave it (None: dropped), its fate recorded."""
    role = message.get("role")
    content = message.get("content")
    if ((role == "assistant" and not message.get("tool_calls")) or (strict_text and role == "user")) and (
        is_empty_content(content)
    ):
        fates.append(Fate(EMPTY_MESSAGES_DROPPED, message))
        return None
    if isinstance(role, str) and role in _NULL_TO_EMPTY and content is None:
        replacement = {**message, "content": ""}
        fates.append(Fate(NULL_CONTENT_FILLED, replacement))
        return replacement
    if strict_text and role in ("user", "assistant", "system", "developer"):
        cleaned = _without_blank_parts(content)
        if role == "assistant" and message.get("tool_calls") and isinstance(cleaned, str) and not cleaned.strip():
            cleaned = None  # blank text beside tool calls: no text at all (Gemini rejects an empty part)
        if cleaned is not content:
            replacement = {**message, "content": cleaned}
            fates.append(Fate(BLANK_TEXT_DROPPED, replacement))
            return replacement
    return message


def _mid_conversation_system(messages: list[Message], ctx: Context, fates: list[Fate]) -> list[Message]:
    first = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    mids = [i for i in range(first, len(messages)) if is_system(messages[i])]
    if not mids:
        return messages
    if ctx.profile.mid_system is MidSystem.HOIST:
        fates.extend(Fate(SYSTEM_HOISTED, messages[i]) for i in mids)
        moved = set(mids)
        return (
            messages[:first]
            + [messages[i] for i in mids]
            + [m for i, m in enumerate(messages[first:], first) if i not in moved]
        )
    out = list(messages)
    for index in mids:
        message = messages[index]
        out[index] = {**message, "role": "user", "content": system_note(message.get("content"), ctx.text_type)}
        fates.append(Fate(SYSTEM_CONVERTED, out[index]))
    return out


def _mergeable(previous: Message, current: Message) -> bool:
    # An assistant message whose calls are answered is followed by its results, never by another
    # assistant message, so merging two assistant messages can never split calls from results.
    role = current.get("role")
    if role != previous.get("role") or role not in ("user", "assistant"):
        return False
    return not any((found := origin(m)) is not None and found.virtual for m in (previous, current))


def _merge(previous: Message, current: Message, ctx: Context) -> Message:
    merged: Message = {**previous, **current}
    merged["content"] = merge_content(previous.get("content"), current.get("content"), ctx.text_type)
    calls = tool_calls(previous) + tool_calls(current)
    if calls:
        merged["tool_calls"] = calls
    for key in ("reasoning_content", "thinking_blocks"):
        first, second = previous.get(key), current.get(key)
        if first and second:
            merged[key] = merge_content(first, second)
    first_origin, later_origin = origin(previous), origin(current)
    if first_origin is not None:
        merged[ORIGIN] = first_origin.merged(later_origin) if later_origin is not None else first_origin
    if TRACE in previous or TRACE in current:  # explain: the merged message stands for both
        merged[TRACE] = (*previous.get(TRACE, ()), *current.get(TRACE, ()))
    return merged


def _merge_consecutive(messages: list[Message], ctx: Context, fates: list[Fate]) -> list[Message]:
    out: list[Message] | None = None
    for index in range(1, len(messages)):
        message = messages[index]
        previous = messages[index - 1] if out is None else out[-1]
        if _mergeable(previous, message):
            if out is None:
                out = messages[:index]
            out[-1] = _merge(out[-1], message, ctx)
            fates.append(Fate(MERGED, out[-1]))
        elif out is not None:
            out.append(message)
    return messages if out is None else out


def _drop_trailing_assistant(messages: list[Message], fates: list[Fate]) -> list[Message]:
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
    if not any(m.get("role") in ("user", "tool") for m in out):
        # Nothing but system messages would remain: keep the last assistant turn, as the user's.
        last = trailing[0]
        dropped.discard(last)
        recovered = {k: v for k, v in messages[last].items() if k != "tool_calls"}
        recovered["role"] = "user"
        fates.append(Fate(RECOVERED_AS_USER, recovered))
        out = [recovered if i == last else m for i, m in enumerate(messages) if i not in dropped]
    fates.extend(Fate(TRAILING_ASSISTANT_DROPPED, messages[i]) for i in sorted(dropped))
    return out


def _user_first(messages: list[Message], fates: list[Fate]) -> list[Message]:
    for index, message in enumerate(messages):
        if is_system(message):
            continue
        if message.get("role") != "assistant" or is_opener(message):
            return messages  # the provider reads the history from its compaction on: it may open it
        inserted = synthetic_user()
        fates.append(Fate(SYNTHETIC_USER_INSERTED, inserted))
        return [*messages[:index], inserted, *messages[index:]]
    if messages:  # system messages alone, which these providers refuse (GLM: error 1214): a user turn
        inserted = {"role": "user", "content": EMPTY_USER_CONTENT}
        fates.append(Fate(SYNTHETIC_USER_INSERTED, inserted))
        return [*messages, inserted]
    return messages


def _assistant_after_tool(messages: list[Message], fates: list[Fate], bridge: Callable[[], Message]) -> list[Message]:
    out: list[Message] | None = None
    for index in range(1, len(messages)):
        if messages[index].get("role") == "user" and messages[index - 1].get("role") == "tool":
            if out is None:
                out = messages[:index]
            out.append(bridge())
            fates.append(Fate(ASSISTANT_BRIDGE_INSERTED, out[-1]))
        if out is not None:
            out.append(messages[index])
    return messages if out is None else out


def _reasoning_text(message: Message) -> str:
    """The message's own thinking, where LiteLLM kept it, else a single space (what DeepSeek and
    Kimi accept when the original reasoning is gone)."""
    fields = message.get("provider_specific_fields")
    if isinstance(fields, dict) and isinstance(fields.get("reasoning_content"), str) and fields["reasoning_content"]:
        return str(fields["reasoning_content"])
    blocks = message.get("thinking_blocks")
    if isinstance(blocks, list):
        text = "\n".join(b["thinking"] for b in blocks if isinstance(b, dict) and isinstance(b.get("thinking"), str))
        if text.strip():
            return text
    return " "


def _reasoning_content(messages: list[Message], ctx: Context, fates: list[Fate]) -> list[Message]:
    only_calls = ctx.profile.reasoning is Reasoning.TOOL_CALLS
    out = list(messages)
    for index, message in enumerate(messages):
        existing = message.get("reasoning_content")
        if (
            message.get("role") == "assistant"
            and (not only_calls or message.get("tool_calls"))
            and not (isinstance(existing, str) and existing)
        ):
            out[index] = {**message, "reasoning_content": _reasoning_text(message)}
            fates.append(Fate(REASONING_CONTENT_FILLED, out[index]))
    return out if any(a is not b for a, b in zip(out, messages, strict=True)) else messages
