"""Step: drop tool results that answer nothing, duplicate results, and malformed tool calls.

A result is kept only if an earlier assistant message declared its ``tool_call_id`` and no other
result answered that call yet (see `_pairing`). Calls a provider cannot accept (not a dict, no
string id, no function name) are removed from their message; a ``tool_calls`` value that is not a
non-empty list is removed; an assistant message left with neither content nor calls is dropped.
"""

from __future__ import annotations

from ._context import Context
from ._messages import Message, is_empty_content
from ._pairing import ORPHAN, is_valid_call, pair

__all__ = ["DropOrphans"]


class DropOrphans:
    name = "orphans"

    def __call__(self, messages: list[Message], ctx: Context) -> list[Message]:
        out: list[Message] | None = None
        for index, message in enumerate(messages):
            kept: Message | None = message
            if message.get("role") == "assistant" and "tool_calls" in message:
                kept = self._clean_calls(message, ctx)
            if kept is not message and out is None:
                out = messages[:index]
            if out is not None and kept is not None:
                out.append(kept)
        current = messages if out is None else out

        rejected = pair(current).rejected
        if not rejected:
            return current
        for reason in rejected.values():
            ctx.counts["orphans_dropped" if reason == ORPHAN else "duplicates_dropped"] += 1
        return [m for i, m in enumerate(current) if i not in rejected]

    @staticmethod
    def _clean_calls(message: Message, ctx: Context) -> Message | None:
        calls = message["tool_calls"]
        if isinstance(calls, list) and calls and all(is_valid_call(c) for c in calls):
            return message
        valid = [c for c in calls if is_valid_call(c)] if isinstance(calls, list) else []
        dropped = len(calls) - len(valid) if isinstance(calls, list) else 1
        if calls is not None and calls != []:
            ctx.counts["malformed_calls_dropped"] += dropped
        cleaned = dict(message)
        if valid:
            cleaned["tool_calls"] = valid
            return cleaned
        del cleaned["tool_calls"]
        if is_empty_content(cleaned.get("content")):
            ctx.counts["empty_messages_dropped"] += 1
            return None
        return cleaned
