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
* when what follows the cut no longer fits the budget (an *event*: the request is rewritten from
  the first message that changes), the oldest whole results become stubs, keeping whole the
  newest, as many as `PRESSURE_SHARE` of the room holds at the conversation's growth (at least
  two, at most ``keep_recent``); then, unless compacting alone is the better deal (below), the cut
  jumps forward until what is left fits in the *cut-back level* (or only the newest unit is left).

Both decisions come from the conversation's own growth, measured on the request at that step of
the replay: ``growth`` is the mean size of the last `GROWTH_UNITS` units as they arrived, the
tokens a turn adds (the mean, not the median: tool outputs are skewed, and the room a run of turns
takes is their sum). An event loses a share ``c`` of the previous request's prefix: a cut all of
it but the system messages and tools, a compaction what follows the oldest compacted result.
After an event leaving ``kept`` tokens of history, the next one comes about ``(room - kept) /
growth`` turns later, and meanwhile the history averages ``(kept + room) / 2``. An event is worth

    value(kept, c) = (kept + room) / (2 * budget) - REUSE_PRICE * c * growth / (room - kept)

the budget use over the turns it buys, minus the prefix lost per turn priced at `REUSE_PRICE`.
The best cut-back level is ``room - sqrt(2 * REUSE_PRICE * c * growth * budget)``
(`cut_back_level`): a conversation whose turns are large for its window is cut back far, so cuts
stay rare; one whose turns are small keeps most of the room (bench/cache.py: about 30 % of the
room at 24k, 75 % at 128k, against a fixed 30 % before). Compacting without cutting is kept when
it is worth more than that cut, or when it leaves the history within `COMPACT_ENOUGH` of the way
from the cut-back level to the full room. A ``snip_watermark`` in the config replaces the derived
level: cuts go back to that share of the room, and compacting alone is enough up to a third of the
way from there to the full room.

The request of turn n+1 replays turn n's steps exactly (every figure above is measured on the
units up to the step being replayed), then takes one more: between the rare events, the governed
request only grows at its end. It is still a pure function of the request: deterministic,
idempotent (a governed request fits, so replaying it triggers nothing), and within budget.
"""

from __future__ import annotations

import math
from collections import Counter, deque

from ._calls import describe_size
from ._context import Context, StepResult
from ._messages import Message
from ._microcompact import AGAIN, SUPERSEDED, Candidate, Catalogue, catalogue, compact, is_oversized, stub_text
from ._snip import Layout, assemble, keep_trace, note_cap, note_for, trace_index
from ._trace import TraceIndex

__all__ = ["PRESSURE_KEEP_RECENT", "REUSE_PRICE", "StableShrink", "cut_back_level"]

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


class StableShrink:
    name = "stable_shrink"

    def __init__(self, *, keep_recent: int | None = None) -> None:
        #: Overrides the config's keep_recent (the pipeline passes 0 when the budget demands it).
        self.keep_recent = keep_recent

    def __call__(self, messages: list[Message], ctx: Context) -> StepResult:
        config = ctx.config
        keep = config.keep_recent if self.keep_recent is None else self.keep_recent
        batch = config.compact_batch_for(True)
        found = catalogue(messages, ctx)
        candidates = found.candidates
        layout = Layout.of(messages, ctx)
        if ctx.budget is None or not layout.units:
            return self._apply(
                messages,
                ctx,
                layout=layout,
                found=found,
                compacted=self._batched(candidates, keep, batch, found.newest),
                cut=0,
                over_budget=ctx.budget is not None and layout.fixed > ctx.budget,
            )

        budget = ctx.budget
        room = budget - layout.fixed
        cost = layout.cost_function(messages, ctx)
        trace = trace_index(messages, layout, ctx)
        cap = note_cap(ctx)
        watermark = config.snip_watermark
        # What compacting each candidate saves, and the candidates each unit brings. A stub replaces
        # the content and nothing else: the saving is the content's tokens less the stub's.
        stubs = stub_sizes(messages, candidates, ctx)  # what `_apply` puts in, mostly
        saving = [saved for _, saved in stubs]
        unit_of = layout.unit_index()
        arriving: dict[int, list[int]] = {}
        for ordinal, candidate in enumerate(candidates):
            arriving.setdefault(unit_of[candidate.index], []).append(ordinal)
        # A superseded read goes stale when the read superseding it arrives.
        stale_from: dict[int, list[int]] = {}
        for ordinal, candidate in enumerate(candidates):
            if candidate.superseded_by is not None:
                stale_from.setdefault(unit_of[candidate.superseded_by], []).append(ordinal)
        current = list(layout.tokens)  # what each unit costs at the current step of the replay
        arrived = [0] * len(current)  # what each unit cost when it arrived
        whole: deque[int] = deque()  # candidates that arrived and are still whole, oldest first
        compacted: set[int] = set()
        stubbed_stale: set[int] = set()  # compacted because a later read superseded them
        stale: set[int] = set()  # whole candidates a later read superseded: compacted at the next batch
        deferred: list[int] = []  # too big to keep whole: compacted once they are no longer the newest
        cut, tail = 0, 0
        recent = 0  # tokens of the last GROWTH_UNITS units as they arrived
        step = 0  # the unit arriving: its results are the newest exchange, never compacted

        def compact_one(ordinal: int) -> int:
            whole.remove(ordinal)
            if ordinal in stale:
                stale.discard(ordinal)
                stubbed_stale.add(ordinal)  # its stub says so; one compacted earlier keeps its own
            compacted.add(ordinal)
            unit = unit_of[candidates[ordinal].index]
            current[unit] -= saving[ordinal]
            return saving[ordinal] if unit >= cut else 0

        def compact_oldest() -> int:
            return compact_one(whole[0])

        def newest(ordinal: int) -> bool:
            """Whether the candidate is among the results the model is about to read at this step."""
            return unit_of[candidates[ordinal].index] >= layout.keep_from[step]

        def oldest_is_newest() -> bool:
            return newest(whole[0])

        def compact_stale() -> int:
            return sum(compact_one(o) for o in sorted(stale) if not newest(o))

        def note(at: int) -> int:
            if at == 0 or cap == 0:
                return 0
            anchor = -1 if layout.is_user[at] else layout.previous_user[at]
            return min(cap, trace.estimate(at, anchor))

        def value(kept: int, share_lost: float, growth: float) -> float:
            if kept >= room:
                return -math.inf  # buys no turn
            return (kept + room) / (2 * budget) - REUSE_PRICE * share_lost * growth / (room - kept)

        limit = ctx.oversized(messages)
        if limit is not None and max(layout.tokens) <= limit:
            limit = None  # no result is over it: none costs more than its unit
        # cost(cut, tail) is tail plus what the cut adds in front (a user message), and the note's
        # size depends on the cut alone: both are worked out again only when the cut moves.
        in_front = cost(cut, 0) + note(cut)
        for step in range(len(layout.units)):
            before = tail  # the history of the previous step: the previous request
            if deferred:
                for ordinal in [o for o in deferred if not newest(o)]:
                    deferred.remove(ordinal)
                    if ordinal in whole:
                        tail -= compact_one(ordinal)
            for ordinal in arriving.get(step, ()):
                whole.append(ordinal)
                if limit is not None and is_oversized(messages[candidates[ordinal].index], limit, ctx):
                    deferred.append(ordinal)  # too big to keep whole at all, once it is not the newest
            if step in stale_from:
                stale.update(o for o in stale_from[step] if o in whole)
            tail += current[step]
            arrived[step] = current[step]
            recent += current[step] - (arrived[step - GROWTH_UNITS] if step >= GROWTH_UNITS else 0)
            while len(whole) >= keep + batch and not oldest_is_newest():
                tail -= compact_stale()
                for _ in range(batch):
                    if whole and not oldest_is_newest():
                        tail -= compact_oldest()
            if tail + in_front <= room:
                continue
            # An event. What it costs is measured against the previous request.
            growth = max(1.0, recent / min(step + 1, GROWTH_UNITS))
            previous = layout.fixed + cost(cut, before) + note(cut)
            keep_whole = min(keep, max(PRESSURE_KEEP_RECENT, math.floor(PRESSURE_SHARE * room / growth)))
            rewritten = 0
            if len(whole) > keep_whole:  # the budget beats keep_recent
                first = max(cut, unit_of[candidates[whole[0]].index])
                rewritten = sum(current[first:step])
                tail -= compact_stale()
                while len(whole) > keep_whole and not oldest_is_newest():
                    tail -= compact_oldest()
            kept = cost(cut, tail) + note(cut)
            if watermark is not None:
                low = math.floor(room * watermark)
                if kept <= math.floor(room * (watermark + (1 - watermark) / 3)):
                    continue
            else:
                cut_cost = (previous - layout.fixed) / previous  # a cut keeps only the fixed part
                low = cut_back_level(room, budget, growth, cut_cost)
                if kept <= low + (room - low) * COMPACT_ENOUGH or (
                    kept <= room and value(kept, rewritten / previous, growth) >= value(low, cut_cost, growth)
                ):
                    continue
            if kept <= low:
                continue
            # Cut: from the first unit that leaves at most `low`, else keep only the newest.
            while cut < layout.keep_from[step] and cost(cut, tail) + note(cut) > low:
                tail -= current[cut]
                cut += 1
            in_front = cost(cut, 0) + note(cut)
            while whole and unit_of[candidates[whole[0]].index] < cut:
                stale.discard(whole.popleft())  # cut off: no longer counts among the whole results

        tail_cost = cost(cut, tail)
        result = self._apply(
            messages,
            ctx,
            layout=layout,
            found=found,
            compacted=compacted,
            cut=cut,
            over_budget=tail_cost + (note(cut) if tail_cost + note(cut) <= room else 0) > room,
            trace=trace,
            allowance=min(cap, room - tail_cost),
            stubbed_stale=stubbed_stale,
            stubs=stubs,
        )
        keep_trace(trace, ctx)
        return result

    @staticmethod
    def _batched(candidates: list[Candidate], keep: int, batch: int, newest: frozenset[int]) -> set[int]:
        """Without a budget: Nanobot's compaction, in batches (superseded reads go with the batch);
        never the newest exchange's results."""
        current = [o for o, c in enumerate(candidates) if c.superseded_by is None]
        excess = len(current) - keep
        chosen = set(current[: max(0, excess - excess % batch)])
        if chosen or excess - excess % batch > 0:
            chosen |= {o for o, c in enumerate(candidates) if c.superseded_by is not None}
        return {o for o in chosen if candidates[o].index not in newest}

    @staticmethod
    def _apply(
        messages: list[Message],
        ctx: Context,
        *,
        layout: Layout,
        found: Catalogue,
        compacted: set[int],
        cut: int,
        over_budget: bool,
        trace: TraceIndex | None = None,
        allowance: int = 0,
        stubbed_stale: set[int] | None = None,
        stubs: list[tuple[str, int]] | None = None,
    ) -> StepResult:
        """The request with the `compacted` candidates stubbed and the units before `cut` cut.
        `stubs` are the sizes the candidates' stubs give and what each stub saves with its default
        reason (`stub_sizes`, reused where that reason holds)."""
        candidates = found.candidates
        counts: Counter[str] = Counter()
        first_kept = layout.units[cut][0] if layout.units else 0
        out = messages
        saved = 0  # what the stubs put in save (for the report's ledger)
        for ordinal in sorted(compacted):
            candidate = candidates[ordinal]
            if candidate.index < first_kept:
                continue  # snipped anyway
            if out is messages:
                out = list(messages)
            # The stub says what the replay knew when it compacted the result: a read superseded only
            # later keeps the stub it got by age (so the prefix does not change under the cache).
            stale = candidate.superseded_by is not None if stubbed_stale is None else ordinal in stubbed_stale
            result = messages[candidate.index]
            if stubs is not None and stale == (candidate.superseded_by is not None):
                size, saving = stubs[ordinal]
                stub = dict(result)
                stub["content"] = stub_text(candidate.name, candidate.call, size, SUPERSEDED if stale else AGAIN)
                ctx.seed(stub, ctx.tokens(result) - saving)  # (what counting it gives)
                saved += saving  # (what counting the stub gives, less the result's tokens)
            else:
                stub = compact(result, candidate, superseded=stale)
                saved += ctx.tokens(result) - ctx.tokens(stub)
            out[candidate.index] = stub
            counts["superseded" if stale else "compacted"] += 1
        cut_turns = None
        if cut:
            note = None
            if trace is not None:
                note, cut_turns = note_for(out, layout, cut, trace=trace, allowance=allowance, ctx=ctx)
            out = assemble(out, layout, cut, counts, note, trace=trace)
        return StepResult(
            out,
            counts,
            over_budget=over_budget,
            large_uncompacted=found.large_uncompacted,
            cut=cut_turns,
            saved=saved,
        )


def stub_sizes(messages: list[Message], candidates: list[Candidate], ctx: Context) -> list[tuple[str, int]]:
    """Each candidate's size as its stub shows it (`compact`), and the tokens its stub with its
    default reason saves: the content's less the stub's. Where the previous request of the
    conversation began this list (`Context.conversation`), those of the results it kept are taken
    from it when the result is still named by the same call, with the same reason."""
    shared = ctx.conversation(messages)
    before = shared[1].get("stubs") if shared is not None else None
    known: dict[int, tuple[bool, str, object, str, int]] = before if isinstance(before, dict) else {}
    counter = ctx.counter
    out: list[tuple[str, int]] = []
    for candidate in candidates:
        superseded = candidate.superseded_by is not None
        found = known.get(candidate.index)
        if found is not None and found[0] == superseded and found[1] == candidate.name and found[2] == candidate.call:
            out.append((found[3], found[4]))
            continue
        content = messages[candidate.index].get("content")
        size = describe_size(content)
        text = stub_text(candidate.name, candidate.call, size, SUPERSEDED if superseded else AGAIN)
        out.append((size, counter.content(content) - counter.short(text)))
    if shared is not None:
        mark = shared[0]
        ctx.keep(
            "stubs",
            {
                c.index: (c.superseded_by is not None, c.name, c.call, size, saved)
                for c, (size, saved) in zip(candidates, out, strict=True)
                if c.index < mark
            },
        )
    return out
