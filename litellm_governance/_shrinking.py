"""Shrinking a repaired request to its budget (`_pipeline` step 2): compaction, then snipping — or,
with ``cache_stable``, `StableShrink`, which replays both — retried with fewer scruples while the
budget forces it."""

from __future__ import annotations

from ._context import Context, Tally
from ._messages import Message
from ._microcompact import Microcompact
from ._snip import Snip
from ._stable import StableShrink
from ._tokens import REPLY_PRIMING

__all__ = ["shrink"]

_SNIP = Snip()


def shrink(messages: list[Message], ctx: Context, tally: Tally) -> list[Message]:
    """Compact, then snip; retry with fewer scruples while the budget forces it. Each attempt is
    counted on its own; the one kept is added to `tally`, whose ``over_budget`` then says whether
    even the smallest request does not fit (`run` then truncates the newest exchange's results;
    it never stubs them)."""
    protected = ctx.config.respect_cache_control and ctx.last_breakpoint(messages) >= 0
    attempts: list[tuple[int | None, bool]] = [(None, False)]
    if protected:
        attempts.append((None, True))  # compacting behind the breakpoint beats cutting it off
    attempts.append((0, True))  # compacting every older result beats a request that cannot fit
    base = ctx.with_(original=messages)
    result = messages

    def over(kept: list[Message]) -> bool:
        """Too big as it is, even before the role rules add anything (so `Snip` would cut)."""
        raw = ctx.tools_tokens + REPLY_PRIMING + ctx.total(kept)
        return ctx.budget is not None and raw > ctx.budget

    attempt = Tally()
    for keep_recent, ignore_breakpoints in attempts:
        attempt = Tally()
        step_ctx = base.with_(ignore_breakpoints=ignore_breakpoints)
        if ctx.stable:
            result = attempt.add(StableShrink(keep_recent=keep_recent)(messages, step_ctx))
        else:
            compacted = attempt.add(Microcompact(keep_recent=keep_recent)(messages, step_ctx))
            if protected and not ignore_breakpoints and compacted is messages and over(messages):
                continue  # nothing compacted and too big: snipping would cut what the breakpoint protects
            result = attempt.add(_SNIP(compacted, step_ctx))
        if attempt.over_budget:
            continue
        if protected and not ignore_breakpoints and attempt.counts["snipped"]:
            continue  # a cut would drop what the breakpoint protects: try compacting it first
        break
    tally.counts.update(attempt.counts)
    tally.notes.extend(attempt.notes)
    tally.large_uncompacted.update(attempt.large_uncompacted)
    tally.over_budget = attempt.over_budget
    tally.cut = attempt.cut
    tally.saved = attempt.saved
    return result
