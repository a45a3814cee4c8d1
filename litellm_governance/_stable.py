"""Step (``cache_stable``): compaction and snipping replayed over the conversation's own growth,
so that consecutive requests of an agent loop share their governed prefix.

Providers bill the longest prefix a request shares with a recent one at a fraction of the price
(and serve it faster). Nanobot's rules applied to every request rewrite that prefix on most
turns: each new result pushes an old one past the ``keep_recent`` line, and keeping exactly as
much as fits moves the first kept message on every turn. A gateway keeps no per-conversation
state, so the stability has to come from the function itself. It does, because agents resend
their whole history: this step walks the history unit by unit from its start, as if watching the
conversation grow, and applies the rules with hysteresis at each step:

* a unit arrives whole;
* compaction in batches: when ``keep_recent + compact_batch`` results are whole, the oldest
  ``compact_batch`` become stubs;
* when what follows the cut no longer fits the budget, every whole result but the two newest
  becomes a stub, and if what is left still fills more than a third of the way from
  ``snip_watermark`` of the room to all of it, the cut jumps forward until what is left fits in
  ``snip_watermark`` of the room.

The request of turn n+1 replays turn n's steps exactly, then takes one more: between the rare
steps where something is compacted or cut, the governed request only grows at its end. It is
still a pure function of the request: deterministic, idempotent (a governed request fits, so
replaying it triggers nothing), and within budget.
"""

from __future__ import annotations

import math
from collections import deque

from ._context import Context
from ._messages import Message
from ._microcompact import compact, compactable_results, is_oversized
from ._snip import Layout, assemble

__all__ = ["PRESSURE_KEEP_RECENT", "StableShrink"]

#: Under budget pressure, whole results beyond this many newest are compacted at once: one large
#: rewrite instead of many small ones (measured in bench/cache.py: 24k windows need it to reach
#: 95 % prefix reuse; larger windows rarely come under pressure).
PRESSURE_KEEP_RECENT = 2


class StableShrink:
    name = "stable_shrink"

    def __init__(self, *, keep_recent: int | None = None) -> None:
        #: Overrides the config's keep_recent (the pipeline passes 0 when the budget demands it).
        self.keep_recent = keep_recent

    def __call__(self, messages: list[Message], ctx: Context) -> list[Message]:
        config = ctx.config
        keep = config.keep_recent if self.keep_recent is None else self.keep_recent
        batch = config.effective_compact_batch
        candidates, _ = compactable_results(messages, ctx)
        layout = Layout.of(messages, ctx)
        if ctx.budget is None or not layout.units:
            ctx.over_budget = ctx.budget is not None and layout.fixed > ctx.budget
            return self._apply(
                messages,
                ctx,
                layout=layout,
                candidates=candidates,
                compacted=self._batched(candidates, keep, batch),
                cut=0,
            )

        room = ctx.budget - layout.fixed
        cost = layout.cost_function(messages, ctx)
        low = math.floor(room * config.snip_watermark)
        # After compacting under pressure, history still filling more than a third of the way from
        # the watermark to the full room is cut too: otherwise old stubs fill the room and pressure
        # returns every few turns, each time rewriting the prefix.
        mid = math.floor(room * (config.snip_watermark + (1 - config.snip_watermark) / 3))
        # What compacting each candidate saves, and the candidates each unit brings.
        saving = [ctx.tokens(messages[i]) - ctx.tokens(compact(messages[i], name)) for i, name in candidates]
        unit_of = layout.unit_index()
        arriving: dict[int, list[int]] = {}
        for ordinal, (index, _) in enumerate(candidates):
            arriving.setdefault(unit_of[index], []).append(ordinal)
        current = list(layout.tokens)  # what each unit costs at the current step of the replay
        whole: deque[int] = deque()  # candidates that arrived and are still whole, oldest first
        compacted: set[int] = set()
        cut, tail = 0, 0

        def compact_oldest() -> int:
            ordinal = whole.popleft()
            compacted.add(ordinal)
            unit = unit_of[candidates[ordinal][0]]
            current[unit] -= saving[ordinal]
            return saving[ordinal] if unit >= cut else 0

        limit = ctx.oversized(messages)
        for step in range(len(layout.units)):
            tail += current[step]
            for ordinal in arriving.get(step, ()):
                whole.append(ordinal)
                if limit is not None and is_oversized(messages[candidates[ordinal][0]], limit, ctx):
                    whole.pop()
                    whole.appendleft(ordinal)  # too big to keep whole at all: compacted on arrival
                    tail -= compact_oldest()
            while len(whole) >= keep + batch:
                for _ in range(batch):
                    tail -= compact_oldest()
            if cost(cut, tail) <= room:
                continue
            while len(whole) > min(keep, PRESSURE_KEEP_RECENT):  # the budget beats keep_recent
                tail -= compact_oldest()
            if cost(cut, tail) <= mid:
                continue
            fitting: tuple[int, int] | None = None
            candidate_cut, remaining = cut, tail
            while candidate_cut < step:
                remaining -= current[candidate_cut]
                candidate_cut += 1
                kept = cost(candidate_cut, remaining)
                if kept <= low:
                    fitting = (candidate_cut, remaining)
                    break
                if kept <= room and fitting is None:
                    fitting = (candidate_cut, remaining)
            cut, tail = fitting if fitting is not None else (step, current[step])
            while whole and unit_of[candidates[whole[0]][0]] < cut:
                whole.popleft()  # cut off: no longer counts among the whole results

        ctx.over_budget = cost(cut, tail) > room
        return self._apply(messages, ctx, layout=layout, candidates=candidates, compacted=compacted, cut=cut)

    @staticmethod
    def _batched(candidates: list[tuple[int, str]], keep: int, batch: int) -> set[int]:
        """Without a budget: Nanobot's compaction, in batches."""
        excess = len(candidates) - keep
        return set(range(max(0, excess - excess % batch)))

    @staticmethod
    def _apply(
        messages: list[Message],
        ctx: Context,
        *,
        layout: Layout,
        candidates: list[tuple[int, str]],
        compacted: set[int],
        cut: int,
    ) -> list[Message]:
        first_kept = layout.units[cut][0] if layout.units else 0
        out = messages
        for ordinal in sorted(compacted):
            index, name = candidates[ordinal]
            if index < first_kept:
                continue  # snipped anyway
            if out is messages:
                out = list(messages)
            out[index] = compact(messages[index], name)
            ctx.counts["compacted"] += 1
        if cut == 0:
            return out
        return assemble(out, layout, cut, ctx)
