"""Shrinking a repaired request to its budget (`_pipeline` step 2): compaction, then snipping — or,
with ``cache_stable``, `stable_shrink`, which replays both — retried with fewer scruples while the
budget forces it."""

from __future__ import annotations

from ._context import Context, StepResult, Tally
from ._messages import Message
from ._microcompact import microcompact
from ._snip import snip
from ._stable import stable_shrink
from ._steps import SNIPPED

__all__ = ["shrink"]


def shrink(messages: list[Message], ctx: Context, tally: Tally) -> list[Message]:
    """Compact, then snip; retry with fewer scruples while the budget forces it. Only the attempt
    kept is added to `tally`, whose ``over_budget`` then says whether even the smallest request does
    not fit (`run` then truncates the newest exchange's results; it never stubs them)."""
    mark = ctx.last_breakpoint(messages)
    protected = ctx.config.respect_cache_control and mark >= 0
    too_big = protected and ctx.budget is not None and ctx.request_tokens(messages) > ctx.budget
    attempts: list[tuple[int | None, bool]] = [(None, False)]
    if protected:
        attempts.append((None, True))  # compacting behind the breakpoint beats cutting it off
    attempts.append((0, True))  # compacting every older result beats a request that cannot fit
    base = ctx.with_(original=messages)
    kept = StepResult(messages)
    for keep_recent, ignore_breakpoints in attempts:
        step_ctx = base.with_(ignore_breakpoints=ignore_breakpoints)
        if ctx.stable:
            kept = stable_shrink(messages, step_ctx, keep_recent)
        else:
            behind = protected and not ignore_breakpoints  # (compaction stops at the breakpoint)
            if behind and too_big and not any(m.get("role") == "tool" for m in messages[mark + 1 :]):
                continue  # no result after it to compact, and too big: snipping would cut what it protects
            compacted = microcompact(messages, step_ctx, keep_recent)
            if behind and compacted.messages is messages and too_big:
                continue  # nothing compacted either
            cut = snip(compacted.messages, step_ctx)
            kept = StepResult(
                cut.messages,
                compacted.fates + cut.fates,
                over_budget=cut.over_budget,
                large_uncompacted=compacted.large_uncompacted,
                cut=cut.cut,
            )
        if kept.over_budget:
            continue
        if protected and not ignore_breakpoints and any(f.step == SNIPPED for f in kept.fates):
            continue  # a cut would drop what the breakpoint protects: try compacting it first
        break
    return tally.add(kept)
