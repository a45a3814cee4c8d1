"""Step: give every tool call exactly one result, in one block right after its call.

Results that stand apart from their call (a user or system message in between, or results of
an earlier call after a later assistant message) are moved up to follow the call. Calls that no
result answers get a stub result, placed after the call's other results. Anthropic and Gemini
reject any message between a call and its results; OpenAI rejects unanswered calls.
"""

from __future__ import annotations

from typing import Final

from ._context import Context, Fate, StepResult
from ._messages import Message, call_name, tool_calls
from ._steps import BACKFILLED, RESULTS_MOVED

__all__ = ["BACKFILL_CONTENT", "backfill"]

#: Content of a result inserted for a call whose result is missing.
BACKFILL_CONTENT: Final = "[Tool result unavailable — call was interrupted or lost]"


def backfill(messages: list[Message], ctx: Context) -> StepResult:
    pairing = ctx.pairing(messages)
    if not pairing.unanswered and not pairing.scattered:  # every call answered, by results right after it
        return StepResult(messages)
    blocks: dict[int, list[int]] = {}
    for result_index, (owner, _) in pairing.answers.items():
        blocks.setdefault(owner, []).append(result_index)
    fates: list[Fate] = []
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index in pairing.answers:
            continue  # emitted in its call's block
        out.append(message)
        for offset, result_index in enumerate(blocks.get(index, [])):
            if result_index != index + 1 + offset:
                fates.append(Fate(RESULTS_MOVED, messages[result_index]))
            out.append(messages[result_index])
        calls = tool_calls(message)
        for position in pairing.unanswered.get(index, []):
            call = calls[position]
            stub = {"role": "tool", "tool_call_id": call["id"], "name": call_name(call), "content": BACKFILL_CONTENT}
            fates.append(Fate(BACKFILLED, stub))
            out.append(stub)
    return StepResult(out, tuple(fates))
