"""Step: drop tool results that answer nothing, duplicate results, and malformed tool calls.

A result is kept only if an earlier assistant message declared its ``tool_call_id`` and no other
result answered that call yet (see `_pairing`). Calls a provider cannot accept (not a dict, no
string id, no function name) are removed from their message; a ``tool_calls`` value that is not a
non-empty list is removed; an assistant message left with neither content nor calls is dropped.
"""

from __future__ import annotations

from collections import Counter

from ._context import Context, StepResult
from ._messages import Message, is_empty_content
from ._pairing import ORPHAN, is_valid_call

__all__ = ["DropOrphans"]


class DropOrphans:
    name = "orphans"

    def __call__(self, messages: list[Message], ctx: Context) -> StepResult:
        counts: Counter[str] = Counter()
        current = messages
        malformed = ctx.pairing(messages).malformed
        if malformed:
            current = []
            start = 0
            for index in malformed:
                current.extend(messages[start:index])
                cleaned = self._clean_calls(messages[index], counts)
                if cleaned is not None:
                    current.append(cleaned)
                start = index + 1
            current.extend(messages[start:])
        rejected = ctx.pairing(current).rejected
        if not rejected:
            return StepResult(current, counts)
        for reason in rejected.values():
            counts["orphans_dropped" if reason == ORPHAN else "duplicates_dropped"] += 1
        return StepResult([m for i, m in enumerate(current) if i not in rejected], counts)

    @staticmethod
    def _clean_calls(message: Message, counts: Counter[str]) -> Message | None:
        calls = message["tool_calls"]
        valid = [c for c in calls if is_valid_call(c)] if isinstance(calls, list) else []
        dropped = len(calls) - len(valid) if isinstance(calls, list) else 1
        if calls is not None and calls != []:
            counts["malformed_calls_dropped"] += dropped
        cleaned = dict(message)
        if valid:
            cleaned["tool_calls"] = valid
            return cleaned
        del cleaned["tool_calls"]
        if is_empty_content(cleaned.get("content")):
            counts["empty_messages_dropped"] += 1
            return None
        return cleaned
