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
   unless it holds the compaction the provider reads the history from (`_compaction`).
7. Where the provider needs an assistant turn between tool results and the next user message
   (Mistral, Bedrock Converse), insert a short one.
8. Thinking-mode providers that need ``reasoning_content`` sent back (DeepSeek, Kimi) get it on
   the assistant messages that lack it: the message's own thinking text where LiteLLM kept it,
   else a single space (chat requests only: the field exists only there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import compress
from operator import is_not
from typing import Final, cast

from ._context import BRIDGE_CONTENT, Context, StepResult, synthetic_user
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

__all__ = ["EnforceRoles"]

_NULL_TO_EMPTY = frozenset({"user", "system", "developer", "tool"})
#: What an empty user message says where the provider rejects empty text and it is the only turn.
EMPTY_USER_CONTENT: Final = "(empty message)"


class EnforceRoles:
    name = "roles"

    def __call__(self, messages: list[Message], ctx: Context) -> StepResult:
        profile = ctx.profile
        counts: Counter[str] = Counter()
        walk = _RulesWalk(messages, ctx)
        out = walk.apply("empty", _normalize_empty, messages, counts)
        if profile.mid_system is not MidSystem.KEEP:
            out = walk.apply("system", _mid_conversation_system, out, counts)
        if profile.merge_consecutive:
            out = walk.apply("merge", _merge_consecutive, out, counts)
        if ctx.drops_trailing_assistant():
            out = _drop_trailing_assistant(out, ctx, counts)
        if profile.first_must_be_user:
            out = _user_first(out, ctx, counts)
        if profile.assistant_after_tool:
            out = walk.apply("bridge", _assistant_after_tool, out, counts)
        if profile.reasoning is not Reasoning.NONE and ctx.format == "chat":
            out = walk.apply("reasoning", _reasoning_content, out, counts)
        walk.keep()
        return StepResult(out, counts)


Rule = Callable[[list[Message], Context, Counter[str], int], list[Message]]


class _RulesWalk:
    """Which first messages each rule may skip, from what the conversation's previous request kept.

    A rule decides each message from it and the one before it (a mid-conversation system message: also
    from where the first message that is not one stands, which the rule finds again each time). So
    where a rule changed nothing in some first messages of what it was given, it changes nothing
    there whatever comes after them. A request of a conversation keeps, for each rule, how many first
    messages of the request as read (`Context.conversation`) the rule was given as they were and left
    so; the next request's rule starts after as many of its own as are those messages again: the very
    objects, or what the rules take for them (`_alike`).
    """

    __slots__ = ("_ctx", "_found", "_kept", "_messages", "_rules", "_starts", "_upto")

    def __init__(self, messages: list[Message], ctx: Context) -> None:
        self._ctx, self._messages = ctx, messages
        self._rules = (ctx.profile, ctx.text_type, ctx.format)
        self._starts: dict[str, int] = {}
        self._kept: dict[str, int] = {}
        self._found = found = ctx.memo.conversation
        self._upto = 0  # how many first messages are those of the request as read (`_alike`)
        if found is None:
            return
        original, mark, walks = cast("list[Message]", found[0]), found[1], found[2]
        kept = walks.get("roles")
        if isinstance(kept, tuple) and len(kept) == 3 and kept[0] <= mark and kept[1] == self._rules:
            self._kept = dict(kept[2])
        self._upto = mark if messages is original else _alike(messages, original, mark)

    def apply(self, name: str, rule: Rule, given: list[Message], counts: Counter[str]) -> list[Message]:
        """`rule` over `given` (what the rules before it made of the messages), skipping what it may."""
        same = _same_start(given, self._messages, self._upto)
        out = rule(given, self._ctx, counts, min(self._kept.get(name, 0), same))
        self._starts[name] = _same_start(out, given, same)
        return out

    def keep(self) -> None:
        """Keep each rule's start for the next request of the conversation."""
        found = self._found
        if found is not None and found[1] > 0:
            self._ctx.keep("roles", (found[1], self._rules, tuple(self._starts.items())))


def _alike(messages: list[Message], original: list[Message], upto: int) -> int:
    """How many of the first `upto` messages of `messages` the rules take for those of `original` at the
    same place: the very objects, or tool results both with content (compaction's stubs: what the rules
    decide of a result is from its role and whether it has content only)."""
    upto = min(upto, len(messages), len(original))
    for index in compress(range(upto), map(is_not, messages[:upto], original[:upto])):
        message, before = messages[index], original[index]
        if not (
            message.get("role") == "tool" == before.get("role")
            and message.get("content") is not None
            and before.get("content") is not None
        ):
            return index
    return upto


def _same_start(out: list[Message], messages: list[Message], upto: int) -> int:
    """How many of the first `upto` messages of `messages` start `out` as the very objects."""
    if out is messages:
        return upto
    upto = min(upto, len(out), len(messages))
    return next(compress(range(upto), map(is_not, out[:upto], messages[:upto])), upto)


def _without_blank_parts(content: object) -> object:
    if isinstance(content, list):
        for part in content:  # a plain loop, the common blocks decided inline: it runs on every message
            if type(part) is dict:
                if part.get("type") not in TEXT_PARTS:
                    continue
                text = part.get("text")
                if type(text) is str and text and not text.isspace():
                    continue
            if is_blank_part(part):
                return [part for part in content if not is_blank_part(part)]
    return content


def _normalize_empty(messages: list[Message], ctx: Context, counts: Counter[str], clean: int = 0) -> list[Message]:
    strict_text = ctx.profile.no_empty_text
    out: list[Message] | None = None
    dropped_user: Message | None = None
    for index in range(clean, len(messages)):
        message = messages[index]
        role = message.get("role")
        content = message.get("content")
        replacement: Message | None = message
        if ((role == "assistant" and not message.get("tool_calls")) or (strict_text and role == "user")) and (
            is_empty_content(content)
        ):
            replacement = None
            counts["empty_messages_dropped"] += 1
            if role == "user":
                dropped_user = message
        elif isinstance(role, str) and role in _NULL_TO_EMPTY and content is None:
            replacement = {**message, "content": ""}
            counts["null_content_filled"] += 1
        elif strict_text and role in ("user", "assistant", "system", "developer"):
            cleaned = _without_blank_parts(content)
            if role == "assistant" and message.get("tool_calls") and isinstance(cleaned, str) and not cleaned.strip():
                cleaned = None  # blank text beside tool calls: no text at all (Gemini rejects an empty part)
            if cleaned is not content:
                replacement = {**message, "content": cleaned}
                counts["blank_text_dropped"] += 1
        if replacement is not message and out is None:
            out = messages[:index]
        if out is not None and replacement is not None:
            out.append(replacement)
    if out is not None and dropped_user is not None and all(is_system(m) for m in out):
        # Nothing but system messages would be left (GLM: error 1214; Anthropic: no message at all):
        # the user's turn stays, saying it was empty.
        counts["empty_messages_dropped"] -= 1
        counts["empty_user_kept"] += 1
        out.append({**dropped_user, "content": EMPTY_USER_CONTENT})
    return messages if out is None else out


def _mid_conversation_system(
    messages: list[Message], ctx: Context, counts: Counter[str], clean: int = 0
) -> list[Message]:
    first = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    mids = [i for i in range(max(first, clean), len(messages)) if is_system(messages[i])]
    if not mids:
        return messages
    if ctx.profile.mid_system is MidSystem.HOIST:
        counts["system_hoisted"] += len(mids)
        moved = set(mids)
        return (
            messages[:first]
            + [messages[i] for i in mids]
            + [m for i, m in enumerate(messages[first:], first) if i not in moved]
        )
    counts["system_converted"] += len(mids)
    out = list(messages)
    for index in mids:
        message = messages[index]
        out[index] = {**message, "role": "user", "content": system_note(message.get("content"), ctx.text_type)}
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
    # (two texts counted from both texts' counts where that is exact: a turn the note for cut turns is
    # merged into is new whenever the note is)
    merged["content"] = merge_content(
        previous.get("content"), current.get("content"), ctx.text_type, join=ctx.counter.compose
    )
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


def _merge_consecutive(messages: list[Message], ctx: Context, counts: Counter[str], clean: int = 0) -> list[Message]:
    out: list[Message] | None = None
    for index in range(max(1, clean), len(messages)):
        message = messages[index]
        previous = messages[index - 1] if out is None else out[-1]
        if _mergeable(previous, message):
            if out is None:
                out = messages[:index]
            out[-1] = _merge(out[-1], message, ctx)
            counts["merged"] += 1
        elif out is not None:
            out.append(message)
    return messages if out is None else out


def _drop_trailing_assistant(messages: list[Message], ctx: Context, counts: Counter[str]) -> list[Message]:
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
        counts["trailing_assistant_dropped"] += len(trailing)
        return out
    # Nothing but system messages would remain: keep the last assistant turn, as the user's.
    last = trailing[0]
    recovered = {k: v for k, v in messages[last].items() if k != "tool_calls"}
    recovered["role"] = "user"
    counts["trailing_assistant_dropped"] += len(trailing) - 1
    counts["recovered_as_user"] += 1
    return [recovered if i == last else m for i, m in enumerate(messages) if i not in dropped or i == last]


def _user_first(messages: list[Message], ctx: Context, counts: Counter[str]) -> list[Message]:
    for index, message in enumerate(messages):
        if is_system(message):
            continue
        if message.get("role") != "assistant" or is_opener(message):
            return messages  # the provider reads the history from its compaction on: it may open it
        counts["synthetic_user_inserted"] += 1
        return [*messages[:index], synthetic_user(), *messages[index:]]
    return messages


def _assistant_after_tool(messages: list[Message], ctx: Context, counts: Counter[str], clean: int = 0) -> list[Message]:
    out: list[Message] | None = None
    for index in range(max(1, clean), len(messages)):
        if messages[index].get("role") == "user" and messages[index - 1].get("role") == "tool":
            if out is None:
                out = messages[:index]
            out.append({"role": "assistant", "content": BRIDGE_CONTENT})
            counts["assistant_bridge_inserted"] += 1
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


def _reasoning_content(messages: list[Message], ctx: Context, counts: Counter[str], clean: int = 0) -> list[Message]:
    only_calls = ctx.profile.reasoning is Reasoning.TOOL_CALLS
    out: list[Message] | None = None
    for index in range(clean, len(messages)):
        message = messages[index]
        replacement = message
        if message.get("role") == "assistant" and (not only_calls or message.get("tool_calls")):
            existing = message.get("reasoning_content")
            if not (isinstance(existing, str) and existing):
                replacement = {**message, "reasoning_content": _reasoning_text(message)}
                counts["reasoning_content_filled"] += 1
        if replacement is not message and out is None:
            out = messages[:index]
        if out is not None:
            out.append(replacement)
    return messages if out is None else out
