"""Step (``cache_stable``): compaction and snipping replayed over the conversation's own growth,
so that consecutive requests of an agent loop share their governed prefix (which providers bill
at a fraction of the price).

Nanobot's rules rewrite that prefix on most turns: each new result pushes an old one past
``keep_recent``, and keeping exactly as much as fits moves the cut every turn. A gateway keeps no
state per conversation, but agents resend their whole history, so this step walks it unit by unit
from the start, as if watching it grow, and applies the rules with hysteresis:

* compaction in batches: when ``keep_recent + compact_batch`` results are whole, the oldest
  ``compact_batch`` become stubs;
* an *event* when what follows the cut no longer fits: the oldest whole results become stubs
  (the newest kept whole, as many as `PRESSURE_SHARE` of the room holds, at least
  `PRESSURE_KEEP_RECENT`), then, unless compacting alone is the better deal, the cut jumps forward
  until what is left fits in the *cut-back level*.

``growth`` is the mean size of the last `GROWTH_UNITS` units, the tokens a turn adds. An event
losing share ``c`` of the previous request's prefix and leaving ``kept`` tokens of history buys
``(room - kept) / growth`` turns averaging ``(kept + room) / 2``; it is worth

    value(kept, c) = (kept + room) / (2 * budget) - REUSE_PRICE * c * growth / (room - kept)

whose best level is ``room - sqrt(2 * REUSE_PRICE * c * growth * budget)`` (`cut_back_level`):
large turns for the window cut back far, small ones keep most of the room. A ``snip_watermark``
replaces the derived level. Every figure is measured on the units up to the step replayed, so
the request of turn n+1 replays turn n's steps exactly and then takes one more: between events the
governed request only grows at its end — still a pure, deterministic, idempotent function.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping

from ._context import Context, Fate, StepResult
from ._messages import Message
from ._microcompact import Candidate, Catalogue, catalogue, compact, is_oversized
from ._snip import Layout, assemble, note_cap, note_for, trace_index
from ._steps import COMPACTED, SUPERSEDED
from ._trace import TraceIndex

__all__ = ["PRESSURE_KEEP_RECENT", "REUSE_PRICE", "cut_back_level", "stable_shrink"]

#: Under budget pressure, whole results beyond the newest few are compacted at once: one large
#: rewrite instead of many small ones. At least this many stay whole (unless keep_recent is lower),
PRESSURE_KEEP_RECENT = 2
#: and as many of the newest as this share of the room holds at the conversation's growth, up to
#: keep_recent (bench/cache.py: 3 at 24k; all 10 from about 64k, so the last ten results reach the
#: model whole as often as with the literal rules).
PRESSURE_SHARE = 0.15
#: Growth is the mean size of this many newest units.
GROWTH_UNITS = 32
#: Budget use one rewritten request is worth (module docstring). bench/cache.py: 5.5 keeps prefix
#: reuse at 0.95 with the budget 70 % used at 24k windows, where a turn adds about 4 % of the
#: budget; larger windows get both higher (0.986 and 86 % at 128k). (5 did before the newest
#: exchange was kept whole under pressure: it now leaves less room to the rest.)
REUSE_PRICE = 5.5
#: The derived cut-back level stays within these shares of the room.
MIN_CUT_BACK, MAX_CUT_BACK = 0.1, 0.9
#: Compacting alone is always enough when it leaves the history within this share of the way from
#: the cut-back level to the full room (a cut would drop rounds to buy a turn or two).
COMPACT_ENOUGH = 0.2


def cut_back_level(room: int, budget: int, growth: float, cost: float) -> int:
    """Tokens of history a cut goes back to when no ``snip_watermark`` is set: what maximises
    budget use minus prefix lost per turn (module docstring), for a conversation adding `growth`
    tokens a turn and a cut losing share `cost` of the previous request."""
    free = math.sqrt(2 * REUSE_PRICE * max(cost, 0.0) * max(growth, 0.0) * max(budget, 0))
    return math.floor(min(MAX_CUT_BACK * room, max(MIN_CUT_BACK * room, room - free)))


def stable_shrink(messages: list[Message], ctx: Context, keep_recent: int | None = None) -> StepResult:
    """Compaction and snipping replayed over the conversation's growth (module docstring);
    `keep_recent` overrides the config's (the shrinking attempts pass 0 when the budget demands it)."""
    config = ctx.config
    keep = config.keep_recent if keep_recent is None else keep_recent
    batch = config.compact_batch_for(True)
    found = catalogue(messages, ctx)
    layout = Layout.of(messages, ctx)
    if ctx.budget is None or not layout.units:
        candidates = found.candidates
        stubs = {o: _stub(messages, candidates[o]) for o in _batched(candidates, keep, batch, found.newest)}
        over = ctx.budget is not None and layout.fixed > ctx.budget
        return _apply(messages, ctx, layout, found, stubs=stubs, cut=0, over_budget=over)
    replay = _Replay(messages, ctx, layout, found, keep=keep, batch=batch)
    for step in range(len(layout.units)):
        replay.arrive(step)
    return replay.result()


class _Replay:
    """The state of the replay: which candidates arrived and are still whole, which are compacted
    (and why), where the cut stands and what the units after it cost at the step being replayed."""

    def __init__(
        self, messages: list[Message], ctx: Context, layout: Layout, found: Catalogue, *, keep: int, batch: int
    ) -> None:
        self.messages, self.ctx, self.layout, self.found = messages, ctx, layout, found
        self.keep, self.batch = keep, batch
        self.budget = ctx.budget or 0
        self.room = self.budget - layout.fixed
        self.cost = layout.cost_function(messages, ctx)
        self.trace = trace_index(messages, layout, ctx)
        self.cap = note_cap(ctx)
        candidates = found.candidates
        self.unit_of = {i: unit for unit, (start, end) in enumerate(layout.units) for i in range(start, end)}
        self.arriving: dict[int, list[int]] = {}
        self.stale_from: dict[int, list[int]] = {}  # a superseded read goes stale when the later read arrives
        for ordinal, candidate in enumerate(candidates):
            self.arriving.setdefault(self.unit_of[candidate.index], []).append(ordinal)
            if candidate.superseded_by is not None:
                self.stale_from.setdefault(self.unit_of[candidate.superseded_by], []).append(ordinal)
        self.current = list(layout.tokens)  # what each unit costs at the current step of the replay
        self.arrived = [0] * len(self.current)  # what each unit cost when it arrived
        self.whole: deque[int] = deque()  # candidates that arrived and are still whole, oldest first
        self.compacted: dict[int, tuple[Message, bool]] = {}  # candidate -> its stub, and whether it says stale
        self.stale: set[int] = set()  # whole candidates a later read superseded: compacted at the next batch
        self.deferred: list[int] = []  # too big to keep whole: compacted once they are no longer the newest
        self.cut, self.tail, self.step = 0, 0, 0
        self.recent = 0  # tokens of the last GROWTH_UNITS units as they arrived
        limit = ctx.oversized(messages)
        # (no result is over the limit when no unit is: none costs more than its unit)
        self.limit = limit if limit is not None and max(layout.tokens) > limit else None
        # What the cut adds in front (a user message, the note), worked out again only when it moves.
        self.in_front = self.cost(0, 0) + self.note(0)

    def compact_one(self, ordinal: int) -> int:
        """Compact a whole candidate; what that takes off the tail (nothing for one before the cut)."""
        self.whole.remove(ordinal)
        candidate = self.found.candidates[ordinal]
        # Its stub says stale if a later read superseded it by now; one compacted earlier keeps its own.
        self.compacted[ordinal] = _stub(self.messages, candidate, stale=ordinal in self.stale)
        self.stale.discard(ordinal)
        unit = self.unit_of[candidate.index]
        # What that saves (measured on the very stub the request will carry): it replaces the content alone.
        content = self.messages[candidate.index].get("content")
        saving = self.ctx.counter.content(content) - self.ctx.counter.text(self.compacted[ordinal][0]["content"])
        self.current[unit] -= saving
        return saving if unit >= self.cut else 0

    def is_newest(self, ordinal: int) -> bool:
        """Whether the candidate is among the results the model is about to read at this step."""
        return self.unit_of[self.found.candidates[ordinal].index] >= self.layout.keep_from[self.step]

    def compact_oldest(self, most: int, keeping: int = 0) -> None:
        """Compact the stale, then at most `most` of the oldest whole candidates while more than
        `keeping` are whole (never the newest)."""
        self.tail -= sum(self.compact_one(o) for o in sorted(self.stale) if not self.is_newest(o))
        for _ in range(most):
            if len(self.whole) <= keeping or self.is_newest(self.whole[0]):
                break
            self.tail -= self.compact_one(self.whole[0])

    def note(self, at: int) -> int:
        if at == 0 or self.cap == 0:
            return 0
        return min(self.cap, self.trace.estimate(at, self.layout.anchor(at)))

    def value(self, kept: int, share_lost: float, growth: float) -> float:
        if kept >= self.room:
            return -math.inf  # buys no turn
        return (kept + self.room) / (2 * self.budget) - REUSE_PRICE * share_lost * growth / (self.room - kept)

    def arrive(self, step: int) -> None:
        """Replay the arrival of unit `step`: compact in batches, then handle an event if it overflows."""
        self.step = step
        before = self.tail  # the history of the previous step: the previous request
        for ordinal in [o for o in self.deferred if not self.is_newest(o)]:
            self.deferred.remove(ordinal)
            if ordinal in self.whole:
                self.tail -= self.compact_one(ordinal)
        for ordinal in self.arriving.get(step, ()):
            self.whole.append(ordinal)
            result = self.messages[self.found.candidates[ordinal].index]
            if self.limit is not None and is_oversized(result, self.limit, self.ctx):
                self.deferred.append(ordinal)  # too big to keep whole at all, once it is not the newest
        self.stale.update(o for o in self.stale_from.get(step, ()) if o in self.whole)
        self.tail += self.current[step]
        self.arrived[step] = self.current[step]
        self.recent += self.current[step] - (self.arrived[step - GROWTH_UNITS] if step >= GROWTH_UNITS else 0)
        while len(self.whole) >= self.keep + self.batch and not self.is_newest(self.whole[0]):
            self.compact_oldest(self.batch)
        if self.tail + self.in_front > self.room:
            self.event(before)

    def event(self, before: int) -> None:
        """The history no longer fits: compact under pressure, then cut unless compacting is the better deal.
        What an event costs is measured against the previous request (`before`: its history)."""
        layout, room, cut = self.layout, self.room, self.cut
        growth = max(1.0, self.recent / min(self.step + 1, GROWTH_UNITS))
        previous = layout.fixed + self.cost(cut, before) + self.note(cut)
        keep_whole = min(self.keep, max(PRESSURE_KEEP_RECENT, math.floor(PRESSURE_SHARE * room / growth)))
        rewritten = 0
        if len(self.whole) > keep_whole:  # the budget beats keep_recent
            first = max(cut, self.unit_of[self.found.candidates[self.whole[0]].index])
            rewritten = sum(self.current[first : self.step])
            self.compact_oldest(len(self.whole), keep_whole)
        kept = self.cost(cut, self.tail) + self.note(cut)
        watermark = self.ctx.config.snip_watermark
        if watermark is not None:
            low = math.floor(room * watermark)
            enough = kept <= math.floor(room * (watermark + (1 - watermark) / 3))
        else:
            cut_cost = (previous - layout.fixed) / previous  # a cut keeps only the fixed part
            low = cut_back_level(room, self.budget, growth, cut_cost)
            enough = kept <= low + (room - low) * COMPACT_ENOUGH or (
                kept <= room and self.value(kept, rewritten / previous, growth) >= self.value(low, cut_cost, growth)
            )
        if not enough and kept > low:
            self.cut_back(low)

    def cut_back(self, low: int) -> None:
        """Cut from the first unit that leaves at most `low`, else keep only the newest."""
        latest = self.layout.keep_from[self.step]
        while self.cut < latest and self.cost(self.cut, self.tail) + self.note(self.cut) > low:
            self.tail -= self.current[self.cut]
            self.cut += 1
        self.in_front = self.cost(self.cut, 0) + self.note(self.cut)
        while self.whole and self.unit_of[self.found.candidates[self.whole[0]].index] < self.cut:
            self.stale.discard(self.whole.popleft())  # cut off: no longer counts among the whole results

    def result(self) -> StepResult:
        cut, room = self.cut, self.room
        tail_cost, note = self.cost(cut, self.tail), self.note(cut)
        over = tail_cost + (note if tail_cost + note <= room else 0) > room
        allowance = min(self.cap, room - tail_cost)
        return _apply(
            self.messages, self.ctx, self.layout, self.found, stubs=self.compacted,
            cut=cut, over_budget=over, trace=self.trace, allowance=allowance,
        )  # fmt: skip


def _batched(candidates: list[Candidate], keep: int, batch: int, newest: frozenset[int]) -> set[int]:
    """Without a budget: Nanobot's compaction, in batches (superseded reads go with the batch);
    never the newest exchange's results."""
    current = [o for o, c in enumerate(candidates) if c.superseded_by is None]
    excess = len(current) - keep
    chosen = set(current[: max(0, excess - excess % batch)])
    if chosen or excess - excess % batch > 0:
        chosen |= {o for o, c in enumerate(candidates) if c.superseded_by is not None}
    return {o for o in chosen if candidates[o].index not in newest}


def _apply(
    messages: list[Message],
    ctx: Context,
    layout: Layout,
    found: Catalogue,
    *,
    stubs: Mapping[int, tuple[Message, bool]],
    cut: int,
    over_budget: bool,
    trace: TraceIndex | None = None,
    allowance: int = 0,
) -> StepResult:
    """The request with the candidates in `stubs` replaced by their stub (which says whether a later
    read superseded the result) and the units before `cut` cut."""
    first_kept = layout.units[cut][0] if layout.units else 0
    out = list(messages)
    fates: list[Fate] = []
    for ordinal in sorted(stubs):
        index = found.candidates[ordinal].index
        if index < first_kept:
            continue  # snipped anyway
        out[index], stale = stubs[ordinal]
        fates.append(Fate(SUPERSEDED if stale else COMPACTED, out[index]))
    if not fates:
        out = messages
    cut_turns = None
    if cut:
        note = None
        if trace is not None:
            note, cut_turns = note_for(out, layout, cut, trace=trace, allowance=allowance, ctx=ctx)
        out, cut_fates = assemble(out, layout, cut, note)
        fates.extend(cut_fates)
    return StepResult(
        out, tuple(fates), over_budget=over_budget, large_uncompacted=found.large_uncompacted, cut=cut_turns
    )


def _stub(messages: list[Message], candidate: Candidate, *, stale: bool | None = None) -> tuple[Message, bool]:
    """The candidate's result as a stub, and whether it says stale (default: whether a later read
    supersedes it anywhere in the request)."""
    stale = candidate.superseded_by is not None if stale is None else stale
    return compact(messages[candidate.index], candidate, superseded=stale), stale
