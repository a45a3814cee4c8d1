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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

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
    lines = _grouped(entries)
    header = _HEADER.format(start=NOTE_START, turns=turns, noun="turn was" if turns == 1 else "turns were")
    if summary is not None:
        text, covered = summary
        header = render_summary(text, covered, total=turns)[:-1]  # without its closing bracket
        if lines:
            header += "\nWhat the turns after those did, oldest first (call a tool again to see its output):"
    folding = _fold(lines, allowance - counter.text(header) - _LINE_OVERHEAD, counter)
    if folding is None:
        return None
    gone, folded = folding
    kept = [f"- {text}" for i, (_, text, _) in enumerate(lines) if i not in gone]
    body = ([f"- {_fold_line(folded)}"] if folded else []) + kept
    if not body:
        return header + "]" if summary is not None else None
    return header + "\n" + "\n".join(body) + "]"


def _grouped(entries: Sequence[Entry]) -> list[tuple[Entry, str, int]]:
    """The note's lines: each entry with its text, repeats of a call at their latest place, ``(xN)``."""
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
    return [
        (entry, f"{entry.text} (x{count})" if count > 1 else entry.text, count) for entry, count in grouped if count > 0
    ]


def _fold(
    lines: Sequence[tuple[Entry, str, int]], budget: int, counter: TokenCounter
) -> tuple[set[int], dict[str, int]] | None:
    """Which lines fold into counts (by label) so the rest and the fold line fit in `budget` tokens:
    the oldest first, what the user said last of all (it is rare, and may be an instruction still in
    force). None when not even the counts fit."""
    costs = [counter.text(text) + _LINE_OVERHEAD for _, text, _ in lines]
    total = sum(costs)
    folded: dict[str, int] = {}
    gone: set[int] = set()
    fold_cost = 0  # the fold line's tokens, worked out only once the lines alone fit
    counted = True
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
    return None if total + fold_cost > budget else (gone, folded)


def _fold_line(folded: Mapping[str, int]) -> str:
    total = sum(folded.values())
    parts = ", ".join(f"{label} x{count}" for label, count in sorted(folded.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"(+{total} earlier: {parts})"


class TraceIndex:
    """The note's lines per unit of a request (read on first need: most requests cut nothing), and
    an estimate of the note's size for any cut."""

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
        #: The messages lines are read from: `original` (the uncompacted messages at the same indexes).
        self.source = original if len(original) == len(messages) else messages
        self._units = units
        self._entries: list[Sequence[Entry] | None] = [None] * len(units)
        self._calls: Mapping[str, CallInfo] | None = None
        self._results: dict[str, Message] = {}
        self._seen: set[str] = set()  # the calls the estimate has seen
        self._totals: list[int] = []  # the estimate's running total after each unit walked
        self._kept: dict[int, int] = {}
        #: The cut keys worked out so far (`_cut_turns.KeyChain`), if any.
        self.chain: Any = None

    def lines(self, unit: int) -> Sequence[Entry]:
        """The note's lines for `unit`."""
        found = self._entries[unit]
        if found is None:
            if self._calls is None:
                self._read_calls()
            start, end = self._units[unit]
            found = self._entries[unit] = unit_entries(
                self.source, start, end, calls=self._calls or {}, results=self._results
            )
        return found

    def _read_calls(self) -> None:
        self._calls = self._calls_of(self.source)
        for message in self.source:
            ident = message.get("tool_call_id") if message.get("role") == "tool" else None
            if isinstance(ident, str) and ident not in self._results:
                self._results[ident] = message

    def _kept_cost(self, unit: int) -> int:
        """What the lines of a kept anchor `unit` cost that the note needs no new room for: the
        user's words (kept, not noted) and an earlier pass's note in it (already counted with the
        anchor; the new note repeats those lines in the room it frees)."""
        found = self._kept.get(unit)
        if found is None:
            lines = self.lines(unit)
            found = self._kept[unit] = sum(
                self.counter.text(e.text) + _LINE_OVERHEAD for e in lines if e.kind == "user" or e.carried
            )
        return found

    def estimate(self, cut: int, anchor: int) -> int:
        """Tokens of the note when units before `cut` are cut, `anchor` (a user unit, -1: none) kept."""
        while len(self._totals) < cut:
            running = self._totals[-1] if self._totals else 0
            for entry in self.lines(len(self._totals)):
                if entry.key is not None and entry.key in self._seen:
                    running += 3  # a repeat adds its count to an existing line
                    continue
                if entry.key is not None:
                    self._seen.add(entry.key)
                running += self.counter.text(entry.text) + _LINE_OVERHEAD
            self._totals.append(running)
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
