"""Step: drop the oldest history so the request fits the model's input budget (Nanobot's rule).

System messages (and system notes, see `_roles`) and tool schemas are counted first and always
kept. The rest is cut into units (an assistant message with its tool results is one unit, every
other message its own) and kept from the newest back while it fits. The kept part must start
with a user message: when the cut falls elsewhere, the nearest earlier user message with real
content (the task being worked on; not an empty one, nor text that came along with tool
results) is kept in front of it. The newest unit is always kept; when even that does not fit,
the request is as small as the rules allow and the report says ``over_budget``.

The cut turns leave a trace: one short note in their place listing the calls they made, their
outcomes and what was said (`_trace`), in at most a tenth of the budget and never at the expense
of the newest exchange (the note shrinks, down to nothing, when the room is short).

This keeps as much as fits, so the cut moves with every turn of a long agent loop and the
provider's prompt cache misses the whole history each time: `_stable` replays the same rules
with hysteresis instead (``cache_stable``).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from operator import is_not

from ._context import BRIDGE_CONTENT, Context, StepResult, is_turn
from ._cut_turns import CutTurns, prefix_keys
from ._messages import Message, is_empty_content, is_instruction, origin
from ._tokens import REPLY_PRIMING
from ._trace import (
    NOTE_SHARE,
    SUMMARY_START,
    Noted,
    TraceIndex,
    TraceWalk,
    earlier_notes,
    is_note,
    may_hold_note,
    render_note,
    without_notes,
)

__all__ = ["Cost", "Layout", "LayoutWalk", "Snip", "assemble", "note_for"]

# cost(cut, tail): tokens kept when cutting at unit `cut`, given the tokens of the units from there.
Cost = Callable[[int, int], int]


@dataclass
class Layout:
    """The request cut into units, with what each costs."""

    units: list[tuple[int, int]]  # [start, end) message indexes of each non-system unit
    tokens: list[int]  # tokens of each unit as it is now (after compaction)
    is_user: list[bool]
    previous_user: list[int]  # the nearest user unit before each unit (-1: none)
    fixed: int  # tool schemas, system messages, reply priming
    #: Per unit: the unit a cut may go no later than when that unit is the newest — the last
    #: assistant turn with results up to it (the newest exchange: what the model is about to read,
    #: user messages after it included), else the unit itself.
    keep_from: list[int] = field(default_factory=list)

    def latest_cut(self) -> int:
        """The latest unit a cut of the whole request may keep from: the newest exchange's."""
        return self.keep_from[-1] if self.keep_from else 0

    @classmethod
    def of(cls, messages: list[Message], ctx: Context) -> Layout:
        """Units and their costs, including what the role rules will add to them (a bridge turn
        after tool results that a user message follows, a system note's label, reasoning). A bridge
        turn the rules already inserted belongs to the results it follows, as text that came with
        the results does: so a governed request is cut exactly as its input was. Where the previous
        request of the conversation began this list (`Context.conversation`), its walk is resumed."""
        rules = (ctx.profile, ctx.allow_prefill)  # what else it reads (with the messages' tokens)
        shared = ctx.conversation(messages)
        source = ctx.original  # the request as repaired, which `messages` may be a compaction of
        if shared is None and source is not None and source is not messages and ctx.conversation(source) is not None:
            stubbed = cls.of(source, ctx)._with_stubs(messages, source, ctx)  # type: ignore[arg-type]
            if stubbed is not None:
                return stubbed
        before = shared[1].get("layout") if shared is not None else None
        walk = None
        if isinstance(before, LayoutWalk) and before.rules == rules and before.index <= len(messages):
            walk = before.copy()
        if walk is None:
            walk = LayoutWalk(rules)
        kept = walk.walk(messages, ctx, shared[0] if shared is not None else 0)
        if kept is not None:
            ctx.keep("layout", kept)
        fixed = walk.fixed + ctx.tools_tokens + REPLY_PRIMING
        return cls(walk.units, walk.tokens, walk.is_user, walk.previous_user, fixed, walk.keep_from)

    def _with_stubs(self, messages: list[Message], source: list[Message], ctx: Context) -> Layout | None:
        """The layout of `messages`, where this is `source`'s and `messages` differs from `source`
        only by results replaced (stubs): the same units, each costing what its messages now cost.
        None where they differ otherwise (then `messages` is laid out anew)."""
        if len(messages) != len(source):
            return None
        changed = list(compress(count(), map(is_not, messages, source)))
        starts = [start for start, _ in self.units]
        tokens = list(self.tokens)
        for index in changed:
            unit = bisect_right(starts, index) - 1
            if unit < 0 or index >= self.units[unit][1]:
                return None
            if messages[index].get("role") != "tool" or source[index].get("role") != "tool":
                return None
            tokens[unit] += ctx.tokens(messages[index]) - ctx.tokens(source[index])
        return Layout(self.units, tokens, self.is_user, self.previous_user, self.fixed, self.keep_from)

    def unit_index(self) -> dict[int, int]:
        """Message index -> index of the unit holding it (system messages are in none)."""
        return {i: unit for unit, (start, end) in enumerate(self.units) for i in range(start, end)}

    def cost_function(self, messages: list[Message], ctx: Context) -> Cost:
        """cost(cut, tail): tokens kept when cutting at unit `cut`, where `tail` is what the units
        from `cut` on cost; adds the user message put in front, or the synthetic one if needed."""
        synthetic = ctx.synthetic_user_tokens() if ctx.profile.first_must_be_user else 0

        def cost(cut: int, tail: int) -> int:
            if self.is_user[cut]:
                return tail
            anchor = self.previous_user[cut]
            if anchor >= 0:
                return tail + self.tokens[anchor]
            starts_with_assistant = messages[self.units[cut][0]].get("role") == "assistant"
            return tail + (synthetic if starts_with_assistant else 0)

        return cost


def is_bridge(message: Message) -> bool:
    """The assistant turn the rules put between tool results and a user message."""
    return (
        message.get("role") == "assistant"
        and message.get("content") == BRIDGE_CONTENT
        and not message.get("tool_calls")
    )


def _continues(message: Message) -> bool:
    found = origin(message)
    return found is not None and found.continuation and message.get("role") == "user"


def is_task(message: Message) -> bool:
    """A user message that can carry the task: with real content, not text that rode along with
    tool results (Anthropic's reminders and interjections inside a results message), and not a
    note standing for cut turns."""
    if message.get("role") != "user" or is_empty_content(message.get("content")) or is_note(message):
        return False
    found = origin(message)
    return found is None or not found.continuation


@dataclass
class LayoutWalk:
    """Where the walk that lays a request out in units stands (`Layout.of`), before message `index`:
    plain values only, so that the next request of the conversation, which begins with the messages
    walked, resumes there (`_conversations`)."""

    #: What the walk read besides the messages and their tokens (the profile, prefill).
    rules: tuple[object, ...]
    index: int = 0
    units: list[tuple[int, int]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    is_user: list[bool] = field(default_factory=list)
    previous_user: list[int] = field(default_factory=list)
    keep_from: list[int] = field(default_factory=list)
    #: System messages and notes' labels (the request's tool schemas and reply priming are not in it).
    fixed: int = 0
    latest_user: int = -1
    exchange: int = -1  # the unit of the last assistant turn so far, when results came with it
    after_text: bool = False  # assistant text came after that exchange (dropped if nothing else follows)

    def copy(self) -> LayoutWalk:
        return LayoutWalk(
            self.rules,
            self.index,
            list(self.units),
            list(self.tokens),
            list(self.is_user),
            list(self.previous_user),
            list(self.keep_from),
            self.fixed,
            self.latest_user,
            self.exchange,
            self.after_text,
        )

    def walk(self, messages: list[Message], ctx: Context, mark: int) -> LayoutWalk | None:
        """Lay out the messages from `index` on; returns a copy of the walk as it stood at the last
        unit that starts before message `mark` (whatever the messages from `mark` on: what it read
        of them so far is message `mark - 1` at most), or None when it never stood there."""
        bridge, note, reasoning = ctx.rule_overheads()
        index = self.index
        latest_user, exchange, after_text = self.latest_user, self.exchange, self.after_text
        units, unit_tokens, is_user, previous_user, keep_from = (
            self.units,
            self.tokens,
            self.is_user,
            self.previous_user,
            self.keep_from,
        )
        fixed = self.fixed
        drops_trailing = ctx.drops_trailing_assistant()
        tokens_of = ctx.tokens
        count = len(messages)
        stood: tuple[int, int, int, int, int, bool] | None = None
        while index < count:
            if index < mark:
                stood = (index, len(units), fixed, latest_user, exchange, after_text)
            message = messages[index]
            if is_instruction(message):
                if after_text and ctx.ends_turns(message):  # the assistant text before it stays: a turn
                    exchange, after_text = -1, False
                fixed += tokens_of(message)
                if units and message.get("role") != "user":  # a system message that will become a note
                    fixed += note
                index += 1
                continue
            end = index + 1
            role = message.get("role")
            tokens = tokens_of(message)
            if role == "assistant" and message.get("tool_calls"):
                while end < count and messages[end].get("role") == "tool":
                    tokens += tokens_of(messages[end])
                    end += 1
                if end < count and _continues(messages[end]):
                    tokens += tokens_of(messages[end])
                    end += 1  # text that came with the results (Anthropic) goes where they go
                if end < count and is_bridge(messages[end]):
                    tokens += tokens_of(messages[end])
                    end += 1
                elif bridge and end < count and messages[end].get("role") in ("user", "system", "developer"):
                    tokens += bridge  # the rules will put a bridge turn here
            unit = len(units)
            units.append((index, end))
            if role == "assistant":
                tokens += reasoning
            unit_tokens.append(tokens)
            previous_user.append(latest_user)
            user = is_task(message)
            is_user.append(user)
            if user:
                latest_user = unit
            if role == "assistant" and is_turn(message):
                if end - index > 1 and messages[index + 1].get("role") == "tool":
                    exchange, after_text = unit, False
                elif drops_trailing and exchange >= 0:
                    # Assistant text that ends the request is dropped by the rules (no prefill): the
                    # exchange before it stays the newest while nothing but such text follows.
                    after_text = True
                else:
                    exchange = -1
            elif after_text and role != "assistant" and ctx.ends_turns(message):
                exchange, after_text = -1, False  # the assistant text before it was the last turn after all
            keep_from.append(exchange if exchange >= 0 else unit)
            index = end
        self.index, self.fixed = index, fixed
        self.latest_user, self.exchange, self.after_text = latest_user, exchange, after_text
        if stood is None:
            return None
        at, n, fixed, latest_user, exchange, after_text = stood
        return LayoutWalk(
            self.rules,
            at,
            units[:n],
            unit_tokens[:n],
            is_user[:n],
            previous_user[:n],
            keep_from[:n],
            fixed,
            latest_user,
            exchange,
            after_text,
        )


class Snip:
    name = "snip"

    def __call__(self, messages: list[Message], ctx: Context) -> StepResult:
        if ctx.budget is None or not messages:
            return StepResult(messages)
        layout = Layout.of(messages, ctx)
        room = ctx.budget - layout.fixed
        if not layout.units:
            return StepResult(messages, over_budget=room < 0)
        cost = layout.cost_function(messages, ctx)

        if cost(0, sum(layout.tokens)) <= room:
            return StepResult(messages)
        trace = trace_index(messages, layout, ctx)
        cut = self._earliest_cut(layout, room, cost, trace, note_cap(ctx))
        tail = cost(cut, sum(layout.tokens[cut:]))
        allowance = min(note_cap(ctx), room - tail)
        note, cut_turns = note_for(messages, layout, cut, trace=trace, allowance=allowance, ctx=ctx)
        counts: Counter[str] = Counter()
        out = assemble(messages, layout, cut, counts, note, trace=trace)
        over = tail + (ctx.tokens(note) if note is not None else 0) > room
        keep_trace(trace, ctx)
        return StepResult(out, counts, over_budget=over, cut=cut_turns)

    @staticmethod
    def _earliest_cut(layout: Layout, room: int, cost: Cost, trace: TraceIndex, cap: int) -> int:
        """The earliest unit to keep from so the rest fits with the note for what goes, in at most
        `cap` tokens (the newest unit when nothing fits; the note then gets what room is left)."""
        tail = sum(layout.tokens)
        latest = layout.latest_cut()
        tokens = layout.tokens
        first = 0
        while first < latest and tail > room:  # what a cut keeps is at least its tail: none before fits
            tail -= tokens[first]
            first += 1
        for cut in range(first, latest):
            anchor = -1 if layout.is_user[cut] else layout.previous_user[cut]
            note = min(cap, trace.estimate(cut, anchor)) if cut and cap else 0
            if cost(cut, tail) + note <= room:
                return cut
            tail -= layout.tokens[cut]
        return latest


def trace_index(messages: list[Message], layout: Layout, ctx: Context) -> TraceIndex:
    """The note's lines for the units of `messages` (read from the request as repaired, which
    `messages` may be a compaction of): those the conversation's previous request read, taken from it."""
    trace = TraceIndex(messages, ctx.original or messages, layout.units, ctx.counter, ctx.calls_by_id)
    shared = ctx.conversation(trace.source)
    if shared is not None:
        # The longer of the previous request's and the one an earlier shrinking attempt of this one kept.
        walks = [ctx.memo.kept.get("trace"), shared[1].get("trace")]
        for walk in sorted((w for w in walks if isinstance(w, TraceWalk)), key=lambda w: -len(w.units)):
            if trace.resume(walk):
                break
    return trace


def keep_trace(trace: TraceIndex, ctx: Context) -> None:
    """Keep the lines `trace` read (`TraceIndex.walk`) for the conversation's next request, unless an
    earlier shrinking attempt of this request kept more."""
    shared = ctx.conversation(trace.source)
    if shared is not None:
        walk = trace.walk(shared[0])
        kept = ctx.memo.kept.get("trace")
        if walk is not None and not (isinstance(kept, TraceWalk) and len(kept.units) > len(walk.units)):
            ctx.keep("trace", walk)


def note_cap(ctx: Context) -> int:
    """The most a note for cut turns may take: `NOTE_SHARE` of the budget (0: notes are off)."""
    if ctx.budget is None or not ctx.config.note_cut_turns:
        return 0
    return int(ctx.budget * NOTE_SHARE)


def note_for(
    messages: list[Message], layout: Layout, cut: int, *, trace: TraceIndex, allowance: int, ctx: Context
) -> tuple[Message | None, CutTurns | None]:
    """The note standing for the units before `cut` (the kept anchor aside), in at most
    `allowance` tokens, and the cut turns themselves; (None, None) when nothing is cut.

    Where a summary model wrote the summary of an earlier cut point of this conversation (given in
    ``ctx.summaries``), the note opens with the latest such summary and lists only the turns cut
    after it: so it changes only when the cut point moves, as the note alone does."""
    if cut == 0:
        return None, None
    anchor = -1 if layout.is_user[cut] else layout.previous_user[cut]
    if anchor >= 0 and allowance < note_cap(ctx):
        # An earlier pass's note merged into the kept task goes into this one: its room is this one's.
        anchored = messages[slice(*layout.units[anchor])]
        freed = sum(ctx.tokens(m) - ctx.tokens(without_notes(m)) for m in anchored if earlier_notes(m) is not None)
        allowance = min(note_cap(ctx), allowance + freed)
    # The note the conversation's previous request wrote for the same cut, anchor and room, where the
    # lines of every unit before the cut are its (the note is a function of those alone, summaries aside).
    noted = None if ctx.summaries else trace.noted(cut, anchor, allowance)
    if noted is None:
        entries = trace.entries_before(cut, anchor)
        if not entries:
            if not ctx.summaries:
                trace.wrote(cut, anchor, allowance, None)
            return None, None
        turns = trace.turns_before(cut, messages, layout.units)
    elif noted.turns < 0:  # no lines: no note, no cut turns
        return None, None
    else:
        turns = noted.turns
    units = layout.units

    def keys() -> tuple[str, ...]:
        """The cut keys up to `cut` (`prefix_keys`, of the messages as the client sent them)."""
        chain = trace.chain
        if chain is None or chain.units < cut:
            done = chain.units if chain is not None else 0
            source = trace.source
            chain = trace.chain = prefix_keys([source[start:end] for start, end in units[done:cut]], after=chain)
        return chain.keys  # type: ignore[no-any-return]

    # Not this cut point's own summary: written after the cut, using it would change the request
    # while the cut point stays (a rewrite the prompt cache pays for); the next cut point will.
    covered = next((c for c in range(cut - 1, 0, -1) if keys()[c] in ctx.summaries), 0) if ctx.summaries else 0
    summary = ctx.summaries[keys()[covered]] if covered else None
    cut_turns = CutTurns(
        turns,
        lambda: tuple(
            m for unit in range(covered, cut) if unit != anchor for m in messages[slice(*units[unit])] if not is_note(m)
        ),
        summary,
        keyed=lambda: keys()[cut],
    )
    if allowance <= 0:
        return None, cut_turns
    if noted is not None:
        text = noted.text
    else:
        text = None
        if summary:
            added = [entry for unit in range(covered, cut) if unit != anchor for entry in trace.entries[unit]]
            covered_turns = trace.turns_before(covered, messages, layout.units)
            text = render_note(added, turns, allowance - 4, ctx.counter, summary=(summary, covered_turns))
        if text is None or ctx.counter.text(text) + 8 > allowance:  # no summary, or too long for the room
            text = render_note(entries, turns, allowance - 4, ctx.counter)
        if not ctx.summaries:
            trace.wrote(cut, anchor, allowance, Noted(turns, text))
    if text is None:
        return None, cut_turns
    note: Message = {"role": "user", "content": text}
    return (note if ctx.tokens(note) <= allowance else None), cut_turns


def assemble(
    messages: list[Message],
    layout: Layout,
    cut: int,
    counts: Counter[str],
    note: Message | None = None,
    *,
    trace: TraceIndex | None = None,
) -> list[Message]:
    """System messages, the user message anchoring the kept history, the note for what was cut,
    then everything from `cut`. Where the instructions and the messages that may hold an earlier
    pass's note are among the dropped ones is taken from `trace` (`TraceIndex.scanned`: resumed
    from the conversation's previous request) when it reads these messages."""
    cut_start = layout.units[cut][0]
    anchor = -1 if layout.is_user[cut] else layout.previous_user[cut]
    if trace is not None and len(trace.source) == len(messages):
        instructions, holders = trace.scanned(cut_start)
    else:
        instructions = [i for i in range(cut_start) if is_instruction(messages[i])]
        holders = [i for i in range(cut_start) if may_hold_note(messages[i])]

    def among(indexes: Sequence[int], start: int, end: int) -> list[Message]:
        return [messages[i] for i in indexes[bisect_left(indexes, start) : bisect_left(indexes, end)]]

    added = [note] if note is not None else []
    # The anchor held an earlier pass's note (merged into the task): the new note carries it, and
    # without a new note (no room) it would no longer say what was cut.
    stripped = False
    if anchor >= 0:
        anchor_start, anchor_end = layout.units[anchor]
        anchored = messages[anchor_start:anchor_end]
        if any(earlier_notes(m) is not None for m in anchored):
            anchored = [without_notes(m) if earlier_notes(m) is not None else m for m in anchored]
            stripped = True
        # System messages in the dropped spans are kept, in their order, before the history.
        result = (
            among(instructions, 0, anchor_start)
            + anchored
            + among(instructions, anchor_end, cut_start)
            + added
            + messages[cut_start:]
        )
    else:
        result = among(instructions, 0, cut_start) + added + messages[cut_start:]
    if len(result) == len(messages) and note is None:
        return messages  # already the smallest tail (over budget): nothing to drop
    # The notes of an earlier pass among the dropped messages and in the anchor (`_trace.earlier_notes`):
    # the new note carries them forward, so it adds no note to the request; a note alone was no
    # client message.
    dropped = (
        among(holders, 0, anchor_start) + among(holders, anchor_end, cut_start)
        if anchor >= 0
        else among(holders, 0, cut_start)
    )
    earlier = [found for m in dropped if (found := earlier_notes(m)) is not None]
    counts["snipped"] += len(messages) + len(added) - len(result) - sum(1 for e in earlier if e.own is None)
    if note is not None and not earlier and not stripped:
        counts["summarized" if str(note.get("content", "")).startswith(SUMMARY_START) else "noted"] += 1
    return result
