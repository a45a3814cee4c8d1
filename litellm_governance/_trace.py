"""The note that stands for cut turns: what the agent did in the history snipping removed.

When snipping removes whole turns, one short user-role note takes their place, so the agent
knows what it already did and can ask for an output again instead of starting over::

    [Context note: 14 earlier turns were cut to fit the context window. What they did, oldest
    first (call a tool again to see its output):
    - (+31 earlier: Read x12, Bash x9, Grep x6, said x4)
    - Read(file_path="src/app.py") → 412 lines
    - Bash(command="pytest -x tests/test_app.py") → 88 lines, error x2
    - said: "The failure comes from the date parser."
    - user: "Keep the old API working too."]

One line per call — tool, main argument, outcome (size, and whether it failed) — with repeats of
the same call folded into one line (its latest place, ``xN``); short lines for what the
assistant said (its stated conclusions) and what the user asked in between. When the note would
take more than `NOTE_SHARE` of the budget, the oldest lines fold into counts (what the user said
last of all). Everything is a
pure function of the cut turns as the client sent them (outcomes are read from the uncompacted
results), so the note changes only when the cut point moves and the prompt cache holds.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from ._calls import CallInfo, calls_by_id, describe_size, is_stub, looks_like_error, shorten
from ._messages import Message, call_id, is_instruction, origin, tool_calls
from ._tokens import TokenCounter

__all__ = [
    "NOTE_SHARE",
    "NOTE_START",
    "SUMMARY_START",
    "EarlierNotes",
    "Entry",
    "TraceIndex",
    "TraceWalk",
    "earlier_notes",
    "is_note",
    "may_hold_note",
    "render_note",
    "render_summary",
    "without_notes",
]

#: The note's first characters (also how a second pass recognises one).
NOTE_START: Final = "[Context note:"
#: The first characters of a summary written in the note's place (``summary_model``).
SUMMARY_START: Final = "[Context summary:"
#: At most this share of the budget goes to the note; older lines fold into counts beyond it.
NOTE_SHARE: Final = 0.10
#: Notes a conversation keeps for its next request (`TraceWalk.notes`).
_NOTES: Final = 2
#: What the assistant or the user said is quoted up to this many characters.
SAID_CHARS: Final = 160
_HEADER: Final = (
    "{start} {turns} earlier {noun} cut to fit the context window. What they did, oldest first "
    "(call a tool again to see its output):"
)
#: Tokens a line costs beyond its text (the newline and the dash), and the header and footer's.
_LINE_OVERHEAD: Final = 2
_FRAME_TOKENS: Final = 40


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the note: a call (``key`` groups repeats of the same call) or something said."""

    #: "call", "said" (the assistant) or "user".
    kind: str
    #: The line without its dash, e.g. ``Read(file_path="a.py") → 12 lines``.
    text: str
    #: What a count folds it under: the tool's name, or the kind.
    label: str
    #: Repeats of the same call share a key (None: never grouped).
    key: str | None = None
    #: A line of an earlier pass's note (`earlier_notes`), carried into this one.
    carried: bool = False


def is_note(message: Mapping[str, object]) -> bool:
    """Whether `message` is (or begins with) a note written by this module."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, list) and content:
        first = content[0]
        content = first.get("text") if isinstance(first, Mapping) else first
    return isinstance(content, str) and content.startswith((NOTE_START, SUMMARY_START))


def _said(content: object) -> str | None:
    """The text of a message's content, shortened (thinking and tool blocks aside)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"):
                text_part = part.get("text")
                if isinstance(text_part, str):
                    parts.append(text_part)
            elif isinstance(part, Mapping) and part.get("type") == "message":  # a Responses message item
                parts.append(_said(part.get("content")) or "")
        text = " ".join(parts)
    else:
        return None
    text = text.strip()
    return shorten(text, SAID_CHARS) if text else None


#: What a note and a summary both begin with.
_EITHER: Final = "[Context "
#: How many turns a note (or a summary) written by this module stands for, from its first line.
_NOTE_TURNS: Final = re.compile(r"\[Context (?:note|summary): (\d+) earlier turns? (?:was|were) cut")


@dataclass(frozen=True, slots=True)
class EarlierNotes:
    """What the notes an earlier pass wrote into one user message stood for (`earlier_notes`)."""

    #: Their lines, oldest first, without the dash.
    lines: tuple[str, ...]
    #: The turns they stood for.
    turns: int
    #: The message's own text without them (the user's words the note was merged into), or None.
    own: str | None


def _note_at(text: str, start: int) -> tuple[int, int] | None:
    """Where the next note written by this module begins and ends in `text`, from `start`: at the
    start of the text or after a blank line (a note merged into a message). A note is one-line
    entries and ends with ``]``, so it ends at the first ``]`` followed by a blank line or the end."""
    found: tuple[int, int] | None = None
    for marker in (NOTE_START, SUMMARY_START):
        if start == 0 and text.startswith(marker):
            begin = 0
        else:
            blank = text.find("\n\n" + marker, start)
            if blank < 0:
                continue
            begin = blank + 2
        if found is None or begin < found[0]:
            close = text.find("]\n\n", begin)
            found = (begin, len(text) if close < 0 else close + 1)
    return found


def _notes_in_text(text: str, lines: list[str], own: list[str]) -> int:
    """Take the notes out of `text`: their lines to `lines`, the text around them to `own`; the
    turns they stood for."""
    turns = 0
    at = 0
    while (span := _note_at(text, at)) is not None:
        begin, end = span
        own.append(text[at:begin])
        note = text[begin:end]
        counted = _NOTE_TURNS.match(note)
        turns += int(counted.group(1)) if counted else 0
        body = note.removesuffix("]").splitlines()[1:]
        lines.extend(line[2:] for line in body if line.startswith("- "))
        at = end
    own.append(text[at:])
    return turns


def _part_text(part: object) -> str | None:
    """The text of a content part (a string, or a block's ``text``), if it has one."""
    text = part if isinstance(part, str) else part.get("text") if isinstance(part, Mapping) else None
    return text if isinstance(text, str) else None


def may_hold_note(message: Message) -> bool:
    """Whether `message` can hold a note of an earlier pass: a user message, not text that rode
    along with tool results (a note goes next to a task, and only there is it merged)."""
    if message.get("role") != "user":
        return False
    found = origin(message)
    return found is None or not found.continuation


def earlier_notes(message: Mapping[str, object]) -> EarlierNotes | None:
    """The notes an earlier pass wrote into user `message` (a note of its own, or merged into the
    task's text or blocks by a provider's role rules), when a later pass cuts it: a smaller
    deployment than the pre-call pass fitted, or LiteLLM's translation of the request counted
    anew. None when it holds none."""
    if message.get("role") != "user":
        return None
    content = message.get("content")
    if isinstance(content, str):
        if _EITHER not in content:  # most messages: one search
            return None
        texts = [content]
    elif isinstance(content, list):
        texts = [text for text in map(_part_text, content) if text is not None]
    else:
        return None
    if not any(NOTE_START in text or SUMMARY_START in text for text in texts):
        return None
    lines: list[str] = []
    own: list[str] = []
    turns = sum(_notes_in_text(text, lines, own) for text in texts)
    if not lines and not turns:
        return None
    words = " ".join(part.strip() for part in own if part.strip())
    return EarlierNotes(tuple(lines), turns, words or None)


def _carried(line: str) -> Entry:
    """An earlier note's line, as an entry of the next note (folded under its tool or kind)."""
    if line.startswith("user: "):
        return Entry("user", line, "user", carried=True)
    if line.startswith("said: "):
        return Entry("said", line, "said", carried=True)
    name = line.split("(", 1)[0]  # a call's tool; nothing for a fold line, ``(+31 earlier: Read x12)``
    return Entry("call", line, name if name and " " not in name else "earlier", carried=True)


def without_notes(message: Message) -> Message:
    """User `message` without the notes an earlier pass merged into it (`earlier_notes`): the task
    it anchors stays, and its notes go into the new note."""
    content = message.get("content")

    def own(text: str) -> str:
        pieces: list[str] = []
        _notes_in_text(text, [], pieces)
        return "\n\n".join(piece.strip("\n") for piece in pieces if piece.strip())

    if isinstance(content, str):
        return {**message, "content": own(content)}
    if not isinstance(content, list):
        return message
    parts: list[Any] = []
    for part in content:
        text = _part_text(part)
        if text is None or (NOTE_START not in text and SUMMARY_START not in text):
            parts.append(part)
        elif kept := own(text):
            parts.append(kept if isinstance(part, str) else {**part, "text": kept})
    return {**message, "content": parts}


def unit_entries(
    messages: Sequence[Message],
    start: int,
    end: int,
    *,
    calls: Mapping[str, CallInfo],
    results: Mapping[str, Message],
) -> list[Entry]:
    """The note's lines for the messages ``[start, end)`` of one unit, in order. `results` maps a
    call id to its result as the client sent it (outcomes are read from there)."""
    entries: list[Entry] = []
    for message in messages[start:end]:
        role = message.get("role")
        if role == "assistant":
            said = _said(message.get("content"))
            if said:
                entries.append(Entry("said", f"said: {_quote(said)}", "said"))
            for call in tool_calls(message):
                ident = call_id(call)
                info = calls.get(ident) if ident is not None else None
                if info is None:
                    continue
                result = results.get(ident) if ident is not None else None
                described = info.describe()
                entries.append(Entry("call", f"{described} → {_outcome(result, info)}", info.name, described))
        elif role == "user" and not is_instruction(message):
            if not may_hold_note(message):
                continue  # reminders that rode along with results: not the user's words
            earlier = earlier_notes(message)
            if earlier is not None:
                # an earlier pass's note, cut again: what the user said with it, then its lines
                said = _said(earlier.own) if earlier.own is not None else None
                if said:
                    entries.append(Entry("user", f"user: {_quote(said)}", "user"))
                entries.extend(_carried(line) for line in earlier.lines)
                continue
            said = _said(message.get("content"))
            if said:
                entries.append(Entry("user", f"user: {_quote(said)}", "user"))
    return entries


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def _outcome(result: Message | None, call: CallInfo) -> str:
    if result is None:
        return "no result"
    content = result.get("content")
    if is_stub(content) and isinstance(content, str):
        prefix = f"[{call.name} result omitted from context: {call.describe()}, "
        size = content[len(prefix) :].split(" — ", 1)[0] if content.startswith(prefix) else "omitted earlier"
        return size
    size = describe_size(content)
    return f"{size}, error" if looks_like_error(result) else size


def render_note(
    entries: Sequence[Entry],
    turns: int,
    allowance: int,
    counter: TokenCounter,
    summary: tuple[str, int] | None = None,
) -> str | None:
    """The note for `entries` (oldest first) standing for `turns` cut turns, in at most
    `allowance` tokens: repeats of a call grouped at their latest place, the oldest lines folded
    into counts as far as needed. With `summary` (its text, and how many of the turns it covers),
    the note opens with it and lists only the turns after those. None when not even the counts fit."""
    grouped: list[tuple[Entry, int]] = []
    position: dict[str, int] = {}
    for entry in entries:
        if entry.key is not None and entry.key in position:
            at = position[entry.key]
            earlier, count = grouped[at]
            grouped[at] = (earlier, -1)  # superseded by this later place
            grouped.append((entry, count + 1))
        else:
            grouped.append((entry, 1))
        if entry.key is not None:
            position[entry.key] = len(grouped) - 1
    lines = [
        (entry, f"{entry.text} (x{count})" if count > 1 else entry.text, count) for entry, count in grouped if count > 0
    ]
    header = _HEADER.format(start=NOTE_START, turns=turns, noun="turn was" if turns == 1 else "turns were")
    if summary is not None:
        text, covered = summary
        header = render_summary(text, covered, total=turns)[:-1]  # without its closing bracket
        if lines:
            header += "\nWhat the turns after those did, oldest first (call a tool again to see its output):"
    costs = [counter.short(text) + _LINE_OVERHEAD for _, text, _ in lines]
    budget = allowance - counter.text(header) - _LINE_OVERHEAD
    total = sum(costs)
    folded: dict[str, int] = {}
    gone: set[int] = set()
    fold_cost = 0  # the fold line's tokens, worked out only once the lines alone fit: until then
    counted = True  # the line, which costs at least nothing, cannot make them fit (a new text each time)
    # The oldest lines fold first — what the user said last of all (it is rare, and it may be an
    # instruction still in force).
    order = [i for i, (entry, _, _) in enumerate(lines) if entry.kind != "user"]
    order += [i for i, (entry, _, _) in enumerate(lines) if entry.kind == "user"]
    for i in order:
        if total <= budget:
            if not counted:
                fold_cost, counted = counter.text(_fold_line(folded)) + _LINE_OVERHEAD, True
            if total + fold_cost <= budget:
                break
        entry, _, count = lines[i]
        folded[entry.label] = folded.get(entry.label, 0) + count
        total -= costs[i]
        gone.add(i)
        counted = False
    if not counted:
        fold_cost = counter.text(_fold_line(folded)) + _LINE_OVERHEAD
    if total + fold_cost > budget:
        return None
    kept = [f"- {text}" for i, (_, text, _) in enumerate(lines) if i not in gone]
    body = ([f"- {_fold_line(folded)}"] if folded else []) + kept
    if not body:
        return header + "]" if summary is not None else None
    # header, then a line each, then the closing bracket: counted from its lines' counts (`compose`),
    # which come back on the next request, where the note as a whole is new whenever its room moves.
    return counter.compose([f"{header}\n", *(f"{line}\n" for line in body[:-1]), f"{body[-1]}]"])


def _fold_line(folded: Mapping[str, int]) -> str:
    total = sum(folded.values())
    parts = ", ".join(f"{label} x{count}" for label, count in sorted(folded.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"(+{total} earlier: {parts})"


@dataclass(frozen=True, slots=True)
class TraceWalk:
    """The note's lines for a request's first units and what the estimate made of them, kept for the
    next request of the conversation (`_conversations`), which begins with those messages. The
    lines hold only what the process keeps anyway: a call's description (`_calls`), a result's size,
    what was said as `_calls.shorten` shortened and remembered it."""

    #: The units' [start, end) message indexes.
    units: tuple[tuple[int, int], ...]
    #: Their lines (`unit_entries`).
    entries: tuple[tuple[Entry, ...], ...]
    #: The estimate's running total after each unit, and the calls it had seen after the last one.
    totals: tuple[int, ...]
    seen: frozenset[str]
    #: The ids of the calls those lines name (a later call reusing one would rename it).
    ids: frozenset[str]
    #: The cut keys of the first units (`_cut_turns.KeyChain`), if any were worked out.
    keys: Any = None
    #: The notes written for cuts among those units, by (cut, anchor, room), newest first (`Noted`;
    #: at most `_NOTES`: the two shrinking attempts of a request may each write one).
    notes: tuple[tuple[tuple[int, int, int], Noted], ...] = ()
    #: Of the first messages (how many), those that are instructions and those that may hold an
    #: earlier pass's note, by index (`TraceIndex.scanned`).
    scan: tuple[int, tuple[int, ...], tuple[int, ...]] = (0, (), ())


class Noted(NamedTuple):
    """A note written for cut turns (`_snip.note_for`, no summaries): the turns it stands for (-1:
    there were no lines, so no note) and its text (None: not even the counts fit)."""

    turns: int
    text: str | None


class TraceIndex:
    """The note's lines per unit of a request (read on first need: most requests cut nothing), and
    an estimate of the note's size for any cut. Those of the first units may come from the
    conversation's previous request (`resume`, `walk`)."""

    def __init__(
        self,
        messages: Sequence[Message],
        original: Sequence[Message],
        units: Sequence[tuple[int, int]],
        counter: TokenCounter,
        calls_of: Callable[[Sequence[Message]], Mapping[str, CallInfo]] = calls_by_id,
    ) -> None:
        self.counter = counter
        self._calls_of = calls_of
        #: Lines are read from `original` (the uncompacted messages at the same indexes).
        self._source = original if len(original) == len(messages) else messages
        self._units = units
        self._entries: list[Sequence[Entry] | None] = [None] * len(units)
        self._calls: Mapping[str, CallInfo] | None = None
        self._results: dict[str, Message] = {}
        self._result_at: dict[str, int] = {}
        self._seen: set[str] = set()  # the calls the estimate has seen (with those of the walk it resumed)
        self._seen_before: frozenset[str] = frozenset()
        self._done = 0
        self._totals: list[int] = []  # the estimate's running total after each unit walked
        self._kept: dict[int, int] = {}
        self.resumed: TraceWalk | None = None
        #: The cut keys worked out so far (`_cut_turns.KeyChain`), if any.
        self.chain: Any = None
        #: The notes written: this request's, then those of the walk it resumed (`TraceWalk.notes`).
        self._notes: list[tuple[tuple[int, int, int], Noted]] = []
        self._scan: tuple[int, Sequence[int], Sequence[int]] = (0, (), ())

    def resume(self, before: object) -> bool:
        """Take the lines of the first units from `before`, a walk the conversation's previous request
        kept over messages this request begins with (`walk`), where it holds: the same units, and no
        call after them reusing an id its lines name. Whether it was taken."""
        if not isinstance(before, TraceWalk) or self._done or self._calls is not None:
            return False
        stored = len(before.units)
        if not stored or stored > len(self._units) or tuple(self._units[:stored]) != before.units:
            return False
        if not before.ids.isdisjoint(_named(self._source[before.units[-1][1] :])):
            return False
        self._entries[:stored] = before.entries
        self._totals = list(before.totals)
        self._done = stored
        self._seen_before = before.seen
        self.chain = before.keys
        self._notes = list(before.notes)
        self._scan = before.scan
        self.resumed = before
        return True

    def scanned(self, end: int) -> tuple[Sequence[int], Sequence[int]]:
        """The indexes, among the first `end` messages read, of the instructions (`is_instruction`)
        and of the messages that may hold an earlier pass's note (`may_hold_note`): what assembling a
        cut request keeps and looks into among the dropped ones (`_snip.assemble`). Those of the
        messages the previous request scanned are taken from it."""
        scanned, instructions, holders = self._scan
        if scanned < end:
            source = self._source
            instructions = [*instructions, *(i for i in range(scanned, end) if is_instruction(source[i]))]
            holders = [*holders, *(i for i in range(scanned, end) if may_hold_note(source[i]))]
            scanned = end
            self._scan = (scanned, instructions, holders)
        if scanned == end:
            return instructions, holders
        return instructions[: bisect_left(instructions, end)], holders[: bisect_left(holders, end)]

    def noted(self, cut: int, anchor: int, room: int) -> Noted | None:
        """The note the previous request wrote for the same `cut`, `anchor` and `room` (tokens), if
        any: the same lines and turns, so the same note."""
        key = (cut, anchor, room)
        return next((note for at, note in self._notes if at == key), None)

    def wrote(self, cut: int, anchor: int, room: int, note: Noted | None) -> None:
        """Record the note written for `cut`, `anchor` and `room` (None: there were no lines)."""
        key = (cut, anchor, room)
        others = [(at, kept) for at, kept in self._notes if at != key]
        self._notes = [(key, note if note is not None else Noted(-1, None)), *others][:_NOTES]

    @property
    def source(self) -> Sequence[Message]:
        """The messages the lines are read from."""
        return self._source

    @property
    def entries(self) -> _Lines:
        """The lines of each unit (``entries[unit]``, ``entries[:cut]``)."""
        return _Lines(self)

    def lines(self, unit: int) -> Sequence[Entry]:
        """The note's lines for `unit`."""
        found = self._entries[unit]
        if found is None:
            if self._calls is None:
                self._read_calls()
            start, end = self._units[unit]
            found = self._entries[unit] = unit_entries(
                self._source,
                start,
                end,
                calls=self._calls,  # type: ignore[arg-type]
                results=self._results,
            )
        return found

    def _read_calls(self) -> None:
        self._calls = self._calls_of(self._source)
        for index, message in enumerate(self._source):
            ident = message.get("tool_call_id") if message.get("role") == "tool" else None
            if isinstance(ident, str) and ident not in self._results:
                self._results[ident] = message
                self._result_at[ident] = index

    def _kept_cost(self, unit: int) -> int:
        """What the lines of a kept anchor `unit` cost that the note needs no new room for: the
        user's words (kept, not noted) and an earlier pass's note in it (already counted with the
        anchor; the new note repeats those lines in the room it frees)."""
        found = self._kept.get(unit)
        if found is None:
            lines = self.lines(unit)
            found = self._kept[unit] = sum(
                self.counter.short(e.text) + _LINE_OVERHEAD for e in lines if e.kind == "user" or e.carried
            )
        return found

    def estimate(self, cut: int, anchor: int) -> int:
        """Tokens of the note when units before `cut` are cut, `anchor` (a user unit, -1: none)
        kept."""
        while self._done < cut:
            running = self._totals[-1] if self._totals else 0
            for entry in self.lines(self._done):
                if entry.key is not None and (entry.key in self._seen or entry.key in self._seen_before):
                    running += 3  # a repeat adds its count to an existing line
                    continue
                if entry.key is not None:
                    self._seen.add(entry.key)
                running += self.counter.short(entry.text) + _LINE_OVERHEAD
            self._totals.append(running)
            self._done += 1
        total = self._totals[cut - 1] if cut else 0
        if total == 0:
            return 0
        kept = self._kept_cost(anchor) if 0 <= anchor < cut else 0
        return total - kept + _FRAME_TOKENS

    def entries_before(self, cut: int, anchor: int) -> list[Entry]:
        """The lines of every unit before `cut`, oldest first: of the kept `anchor`, only those of the
        notes an earlier pass merged into it (the new note carries them)."""
        return [e for unit in range(cut) for e in self.lines(unit) if unit != anchor or e.carried]

    def turns_before(self, cut: int, messages: Sequence[Message], units: Sequence[tuple[int, int]]) -> int:
        """The turns the units before `cut` stand for: their assistant turns, and the turns the notes
        of an earlier pass among them (the kept anchor's too) stood for."""
        turns = 0
        for start, end in units[:cut]:
            if messages[start].get("role") == "assistant":
                turns += 1
            for message in messages[start:end]:
                earlier = earlier_notes(message) if may_hold_note(message) else None
                turns += earlier.turns if earlier is not None else 0
        return turns

    def walk(self, mark: int) -> TraceWalk | None:
        """What the next request of the conversation may take from this one: the lines of the first
        units read here, up to the first that ends after message `mark` (the next request may not
        share those) or whose lines could change with what follows — a call whose result is not
        before `mark`, or whose id another call reuses. None where nothing is kept."""
        before = self.resumed
        units, entries = self._units, self._entries
        stored = len(before.units) if before is not None else 0
        known: frozenset[str] = before.ids if before is not None else frozenset()
        count = stored
        ids: set[str] = set()  # those the lines of the units added name
        added: list[Sequence[Entry]] = []
        while count < min(self._done, len(units)) and units[count][1] <= mark:
            found = entries[count]
            if found is None:
                break
            named = _named(self._source[slice(*units[count])])
            if not (known.isdisjoint(named) and ids.isdisjoint(named)) or any(
                self._result_at.get(ident, mark) >= mark for ident in named
            ):
                break
            ids.update(named)
            added.append(found)
            count += 1
        if count == 0:
            return None
        if count > stored and not ids.isdisjoint(_named(self._source[units[count - 1][1] :])):
            return before  # a later call reuses an id the new lines name
        chain = self.chain if self.chain is not None and self.chain.units <= count else None
        if chain is None and before is not None:
            chain = before.keys
        # A note is kept where every unit before its cut is (it was written from their lines alone).
        notes = tuple(found for found in self._notes if found[0][0] <= count)
        scan = self._kept_scan(units[count - 1][1])
        if count == stored and before is not None:
            if chain is before.keys and notes == before.notes and scan is before.scan:
                return before
            return TraceWalk(before.units, before.entries, before.totals, before.seen, before.ids, chain, notes, scan)
        seen = {entry.key for found in added for entry in found if entry.key is not None}
        return TraceWalk(
            tuple(units[:count]),
            (*(before.entries if before is not None else ()), *map(tuple, added)),
            tuple(self._totals[:count]),
            (before.seen if before is not None else frozenset()) | seen,
            known | ids,
            chain,
            notes,
            scan,
        )

    def _kept_scan(self, end: int) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
        """`scanned` of at most the first `end` messages (those the next request shares), to keep."""
        before = self.resumed.scan if self.resumed is not None else (0, (), ())
        scanned, instructions, holders = self._scan
        if scanned <= before[0] or before[0] >= end:
            return before if before[0] <= end else (0, (), ())
        if scanned > end:
            instructions = instructions[: bisect_left(instructions, end)]
            holders = holders[: bisect_left(holders, end)]
            scanned = end
        return scanned, tuple(instructions), tuple(holders)


def _named(messages: Sequence[Message]) -> set[str]:
    """The ids of the calls `messages` make."""
    found: set[str] = set()
    for message in messages:
        if message.get("role") == "assistant":
            for call in tool_calls(message):
                ident = call_id(call)
                if ident is not None:
                    found.add(ident)
    return found


def render_summary(summary: str, covered: int, *, total: int | None = None) -> str:
    """The text standing for cut turns when a summary model has written the summary of the first
    `covered` of them (of `total`, default all)."""
    total = covered if total is None else total
    noun = "turn was" if total == 1 else "turns were"
    which = "them" if covered >= total else f"the first {covered}"
    return (
        f"{SUMMARY_START} {total} earlier {noun} cut to fit the context window. "
        f"A summary of {which}:\n{summary.strip()}]"
    )


class _Lines:
    """``TraceIndex.entries`` as a sequence: each unit's lines, read on first need."""

    def __init__(self, index: TraceIndex) -> None:
        self._index = index

    def __getitem__(self, key: int | slice) -> Any:
        if isinstance(key, slice):
            return [self._index.lines(unit) for unit in range(*key.indices(len(self._index._units)))]
        return self._index.lines(key)

    def __len__(self) -> int:
        return len(self._index._units)
