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

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from ._context import Context, Fate, StepResult, is_bridge_content, is_turn
from ._cut_turns import CutTurns, prefix_keys
from ._messages import Message, is_empty_content, is_instruction
from ._steps import NOTED, SNIPPED, SUMMARIZED
from ._tokens import REPLY_PRIMING
from ._trace import (
    NOTE_SHARE,
    SUMMARY_START,
    TraceIndex,
    earlier_notes,
    is_note,
    may_hold_note,
    render_note,
    without_notes,
)

__all__ = ["Cost", "Layout", "assemble", "note_for", "snip"]

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
    keep_from: list[int]

    @classmethod
    def of(cls, messages: list[Message], ctx: Context) -> Layout:
        """Units and their costs, including what the role rules will add to them (a bridge turn
        after tool results that a user message follows, a system note's label, reasoning). A bridge
        turn the rules already inserted belongs to the results it follows, as text that came with
        the results does: so a governed request is cut exactly as its input was."""
        _, note, reasoning = ctx.rule_overheads()
        layout = cls([], [], [], [], ctx.tools_tokens + REPLY_PRIMING, [])
        newest = _Newest(ctx.drops_trailing_assistant())
        latest_user = -1
        index = 0
        while index < len(messages):
            message = messages[index]
            if is_instruction(message):
                newest.instruction(message, ctx)
                layout.fixed += ctx.tokens(message)
                if layout.units and message.get("role") != "user":  # a system message that will become a note
                    layout.fixed += note
                index += 1
                continue
            end, tokens = _unit_end(messages, index, ctx)
            unit = len(layout.units)
            layout.units.append((index, end))
            layout.tokens.append(tokens + (reasoning if message.get("role") == "assistant" else 0))
            layout.previous_user.append(latest_user)
            layout.is_user.append(is_task(message))
            if layout.is_user[-1]:
                latest_user = unit
            layout.keep_from.append(newest.unit(messages, index, end, unit, ctx))
            index = end
        return layout

    def anchor(self, cut: int) -> int:
        """The user unit kept in front of a cut at `cut` (-1: none needed, or none there)."""
        return -1 if self.is_user[cut] else self.previous_user[cut]

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
            # (an empty user message the rules drop starts nothing: what follows it does)
            first = next(
                (
                    m
                    for m in (messages[start] for start, _ in self.units[cut:])
                    if m.get("role") != "user" or ctx.ends_turns(m)
                ),
                None,
            )
            starts_with_assistant = first is not None and first.get("role") == "assistant"
            return tail + (synthetic if starts_with_assistant else 0)

        return cost


def _unit_end(messages: list[Message], index: int, ctx: Context) -> tuple[int, int]:
    """Where the unit starting at `index` ends (exclusive), and its tokens: an assistant message
    with tool calls takes its results, the text that came with them, and the bridge turn after them
    (or what the rules will add for one)."""
    message = messages[index]
    tokens, end, count = ctx.tokens(message), index + 1, len(messages)
    if message.get("role") != "assistant" or not message.get("tool_calls"):
        return end, tokens
    while end < count and messages[end].get("role") == "tool":
        tokens += ctx.tokens(messages[end])
        end += 1
    if end < count and _continues(messages[end]):
        tokens += ctx.tokens(messages[end])
        end += 1  # text that came with the results (Anthropic) goes where they go
    bridge = ctx.rule_overheads()[0]
    if end < count and is_bridge(messages[end]):
        tokens += ctx.tokens(messages[end])
        end += 1
    elif bridge and end < count and messages[end].get("role") in ("user", "system", "developer"):
        tokens += bridge  # the rules will put a bridge turn here
    return end, tokens


class _Newest:
    """Where the newest exchange starts as the layout walks the units: the last assistant turn with
    results, and after it, while no prefill is accepted, assistant text the rules will drop."""

    def __init__(self, drops_trailing: bool) -> None:
        self.drops_trailing = drops_trailing
        self.exchange = -1  # the unit of the last assistant turn so far, when results came with it
        self.after_text = False  # assistant text came after that exchange (dropped if nothing else follows)

    def instruction(self, message: Message, ctx: Context) -> None:
        if self.after_text and ctx.ends_turns(message):  # the assistant text before it stays: a turn
            self.exchange, self.after_text = -1, False

    def unit(self, messages: list[Message], index: int, end: int, unit: int, ctx: Context) -> int:
        """The unit a cut may go no later than, with `unit` (messages ``[index, end)``) the newest."""
        message = messages[index]
        role = message.get("role")
        if role == "assistant" and is_turn(message):
            if end - index > 1 and messages[index + 1].get("role") == "tool":
                self.exchange, self.after_text = unit, False
            elif self.drops_trailing and self.exchange >= 0:
                # Assistant text that ends the request is dropped by the rules (no prefill): the
                # exchange before it stays the newest while nothing but such text follows.
                self.after_text = True
            else:
                self.exchange = -1
        elif self.after_text and role != "assistant" and ctx.ends_turns(message):
            self.exchange, self.after_text = -1, False  # the assistant text before it was the last turn after all
        return self.exchange if self.exchange >= 0 else unit


def is_bridge(message: Message) -> bool:
    """The assistant turn the rules put between tool results and a user message."""
    return (
        message.get("role") == "assistant"
        and is_bridge_content(message.get("content"))
        and not message.get("tool_calls")
    )


def _continues(message: Message) -> bool:
    return message.get("role") == "user" and not may_hold_note(message)


def is_task(message: Message) -> bool:
    """A user message that can carry the task: with real content, not text that rode along with
    tool results (Anthropic's reminders and interjections inside a results message), and not a
    note standing for cut turns."""
    return may_hold_note(message) and not is_empty_content(message.get("content")) and not is_note(message)


def snip(messages: list[Message], ctx: Context) -> StepResult:
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
    cut = _earliest_cut(layout, room, cost, trace, note_cap(ctx))
    tail = cost(cut, sum(layout.tokens[cut:]))
    allowance = min(note_cap(ctx), room - tail)
    note, cut_turns = note_for(messages, layout, cut, trace=trace, allowance=allowance, ctx=ctx)
    out, fates = assemble(messages, layout, cut, note)
    over = tail + (ctx.tokens(note) if note is not None else 0) > room
    return StepResult(out, fates, over_budget=over, cut=cut_turns)


def _earliest_cut(layout: Layout, room: int, cost: Cost, trace: TraceIndex, cap: int) -> int:
    """The earliest unit to keep from so the rest fits with the note for what goes, in at most
    `cap` tokens (the newest unit when nothing fits; the note then gets what room is left)."""
    tail = sum(layout.tokens)
    latest = layout.keep_from[-1]  # the newest exchange's
    first = 0
    while first < latest and tail > room:  # what a cut keeps is at least its tail: none before fits
        tail -= layout.tokens[first]
        first += 1
    for cut in range(first, latest):
        note = min(cap, trace.estimate(cut, layout.anchor(cut))) if cut and cap else 0
        if cost(cut, tail) + note <= room:
            return cut
        tail -= layout.tokens[cut]
    return latest


def trace_index(messages: list[Message], layout: Layout, ctx: Context) -> TraceIndex:
    """The note's lines for the units of `messages` (read from the request as repaired, which
    `messages` may be a compaction of)."""
    return TraceIndex(messages, ctx.original or messages, layout.units, ctx.counter, ctx.calls_by_id)


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
    anchor = layout.anchor(cut)
    if anchor >= 0 and allowance < note_cap(ctx):
        # An earlier pass's note merged into the kept task goes into this one: its room is this one's.
        anchored = messages[slice(*layout.units[anchor])]
        freed = sum(ctx.tokens(m) - ctx.tokens(without_notes(m)) for m in anchored if earlier_notes(m) is not None)
        allowance = min(note_cap(ctx), allowance + freed)
    entries = trace.entries_before(cut, anchor)
    if not entries:
        return None, None
    turns = trace.turns_before(cut, messages, layout.units)
    cut_turns, summary, covered = _cut_turns(messages, layout, cut, trace=trace, ctx=ctx, turns=turns)
    if allowance <= 0:
        return None, cut_turns
    text = None
    if summary:
        added = [entry for unit in range(covered, cut) if unit != anchor for entry in trace.lines(unit)]
        covered_turns = trace.turns_before(covered, messages, layout.units)
        text = render_note(added, turns, allowance - 4, ctx.counter, summary=(summary, covered_turns))
    if text is None or ctx.counter.text(text) + 8 > allowance:  # no summary, or too long for the room
        text = render_note(entries, turns, allowance - 4, ctx.counter)
    if text is None:
        return None, cut_turns
    note: Message = {"role": "user", "content": text}
    return (note if ctx.tokens(note) <= allowance else None), cut_turns


def _cut_turns(
    messages: list[Message], layout: Layout, cut: int, *, trace: TraceIndex, ctx: Context, turns: int
) -> tuple[CutTurns, str | None, int]:
    """The cut turns at `cut`, and the summary the note opens with (with the cut point it covers) —
    the newest one written for an earlier cut point of these very turns, if any."""
    units, anchor = layout.units, layout.anchor(cut)

    @cache
    def keys() -> tuple[str, ...]:
        """The cut keys up to `cut` (`prefix_keys`, of the messages as the client sent them)."""
        return prefix_keys([trace.source[start:end] for start, end in units[:cut]])

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
    return cut_turns, summary, covered


def assemble(
    messages: list[Message], layout: Layout, cut: int, note: Message | None = None
) -> tuple[list[Message], tuple[Fate, ...]]:
    """System messages, the user message anchoring the kept history, the note for what was cut,
    then everything from `cut`; and the fates: each message dropped, the note added."""
    cut_start = layout.units[cut][0]
    anchor = layout.anchor(cut)
    anchor_start, anchor_end = layout.units[anchor] if anchor >= 0 else (cut_start, cut_start)
    # The anchor held an earlier pass's note (merged into the task): the new note carries it, and
    # without a new note (no room) it would no longer say what was cut.
    anchored = messages[anchor_start:anchor_end]
    stripped = any(earlier_notes(m) is not None for m in anchored)
    if stripped:
        anchored = [without_notes(m) if earlier_notes(m) is not None else m for m in anchored]
    # System messages in the dropped spans are kept, in their order, before the history.
    kept = [i for i in range(cut_start) if not anchor_start <= i < anchor_end and is_instruction(messages[i])]
    before = [messages[i] for i in kept if i < anchor_start]
    between = [messages[i] for i in kept if i >= anchor_end]
    added = [note] if note is not None else []
    result = before + anchored + between + added + messages[cut_start:]
    if len(result) == len(messages) and note is None:
        return messages, ()  # already the smallest tail (over budget): nothing to drop
    keep = set(kept) | set(range(anchor_start, anchor_end))
    dropped = [m for i, m in enumerate(messages[:cut_start]) if i not in keep]
    # The notes of an earlier pass among the dropped messages (`_trace.earlier_notes`): the new note
    # carries them forward, so it adds no note to the request; a note alone was no client message.
    earlier = [found for m in dropped if may_hold_note(m) and (found := earlier_notes(m)) is not None]
    fates = [Fate(SNIPPED, m, 0 if _alone(m) else 1) for m in dropped]
    if note is not None:
        step = SUMMARIZED if str(note.get("content", "")).startswith(SUMMARY_START) else NOTED
        fates.append(Fate(step, note, 0 if earlier or stripped else 1))
    return result, tuple(fates)


def _alone(message: Message) -> bool:
    """A message that was nothing but an earlier pass's note (no client message: its drop is not counted)."""
    found = earlier_notes(message) if may_hold_note(message) else None
    return found is not None and found.own is None
