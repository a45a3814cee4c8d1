"""Step: drop tool results that answer nothing, duplicate results, and malformed tool calls.

A result is kept only if an earlier assistant message declared its ``tool_call_id`` and no other
result answered that call yet (see `_pairing`). Calls a provider cannot accept (not a dict, no
string id, no function name) are removed from their message; a ``tool_calls`` value that is not a
non-empty list is removed; an assistant message left with neither content nor calls is dropped.
"""

from __future__ import annotations

from ._context import Context, Fate, StepResult
from ._messages import Message, is_empty_content
from ._pairing import ORPHAN, is_valid_call
from ._steps import DUPLICATES_DROPPED, EMPTY_MESSAGES_DROPPED, MALFORMED_CALLS_DROPPED, ORPHANS_DROPPED

__all__ = ["drop_orphans"]


def drop_orphans(messages: list[Message], ctx: Context) -> StepResult:
    fates: list[Fate] = []
    current = messages
    malformed = set(ctx.pairing(messages).malformed)
    if malformed:
        current = []
        for index, message in enumerate(messages):
            cleaned = _clean_calls(message, fates) if index in malformed else message
            if cleaned is not None:
                current.append(cleaned)
    rejected = ctx.pairing(current).rejected
    for index, reason in rejected.items():
        fates.append(Fate(ORPHANS_DROPPED if reason == ORPHAN else DUPLICATES_DROPPED, current[index]))
    if rejected:
        current = [m for i, m in enumerate(current) if i not in rejected]
    return StepResult(current, tuple(fates))


def _clean_calls(message: Message, fates: list[Fate]) -> Message | None:
    """`message` without its malformed calls (None: nothing left in it)."""
    calls = message["tool_calls"]
    valid = [c for c in calls if is_valid_call(c)] if isinstance(calls, list) else []
    dropped = len(calls) - len(valid) if isinstance(calls, list) else 1
    cleaned = dict(message)
    if valid:
        cleaned["tool_calls"] = valid
    else:
        del cleaned["tool_calls"]
    empty = not valid and is_empty_content(cleaned.get("content"))
    if calls is not None and calls != []:
        fates.append(Fate(MALFORMED_CALLS_DROPPED, None if empty else cleaned, dropped))
    if empty:
        fates.append(Fate(EMPTY_MESSAGES_DROPPED, cleaned))
        return None
    return cleaned
