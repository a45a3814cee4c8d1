"""Step: make tool-call ids unique in the request, for providers that require it (Anthropic).

Real transcripts repeat ids (replayed or merged sessions; some agent frameworks reuse them).
A repeat is renamed ``<id>_<n>`` with the smallest ``n`` no other call uses, on the call and on
the result that answers it alike. Ids are numbered from the start of the conversation, before
any snipping, so the same call keeps the same id on every request and the prompt cache survives.
Never used for Gemini: LiteLLM keeps Gemini's thought signatures inside the ids.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ._context import Context
from ._messages import Message, call_id, tool_calls

__all__ = ["UniqueToolCallIds"]


class UniqueToolCallIds:
    name = "unique_ids"

    def __call__(self, messages: list[Message], ctx: Context) -> list[Message]:
        if not ctx.profile.unique_tool_call_ids:
            return messages
        return _unique_tool_call_ids(messages, ctx)


def _unique_tool_call_ids(messages: list[Message], ctx: Context) -> list[Message]:
    taken = {ident for m in messages for c in tool_calls(m) if (ident := call_id(c)) is not None}
    seen: set[str] = set()
    out: list[Message] | None = None
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        calls = tool_calls(message) if message.get("role") == "assistant" else []
        # Per original id, the ids its calls end up with, in call order: results answer the
        # first unanswered call with their id, so the n-th result with an id takes the n-th.
        slots: dict[str, deque[str]] = {}
        new_calls: list[Any] = []
        renamed = 0
        for call in calls:
            ident = call_id(call)
            if ident is None:
                new_calls.append(call)
                continue
            new_ident = ident
            if ident in seen:
                suffix = 2
                while f"{ident}_{suffix}" in taken:
                    suffix += 1
                new_ident = f"{ident}_{suffix}"
                taken.add(new_ident)
                renamed += 1
            seen.add(new_ident)
            slots.setdefault(ident, deque()).append(new_ident)
            new_calls.append(call if new_ident == ident else {**call, "id": new_ident})
        if not renamed:
            if out is not None:
                out.append(message)
            continue
        if out is None:
            out = messages[: index - 1]
        out.append({**message, "tool_calls": new_calls})
        ctx.counts["tool_call_ids_renamed"] += renamed
        while index < len(messages) and messages[index].get("role") == "tool":
            result = messages[index]
            ident = result.get("tool_call_id")
            queue = slots.get(ident) if isinstance(ident, str) else None
            if queue:
                new_ident = queue.popleft()
                if new_ident != ident:
                    result = {**result, "tool_call_id": new_ident}
            out.append(result)
            index += 1
    return messages if out is None else out
