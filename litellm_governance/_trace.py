"""The note that stands for cut turns: what the agent did in the history snipping removed, so it
can ask for an output again instead of starting over::

    [Context note: 14 earlier turns were cut to fit the context window. What they did, oldest
    first (call a tool again to see its output):
    - (+31 earlier: Read x12, Bash x9, Grep x6, said x4)
    - Read(file_path="src/app.py") → 412 lines
    - Bash(command="pytest -x tests/test_app.py") → 88 lines, error x2
    - said: "The failure comes from the date parser."
    - user: "Keep the old API working too."]

Repeats of a call fold into their latest place (``xN``); beyond `NOTE_SHARE` of the budget the
oldest lines fold into counts. The note is a pure function of the cut turns as the client sent
them, so it changes only when the cut point moves, and the prompt cache holds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from ._calls import CallInfo, describe_size, is_stub, looks_like_error, shorten
from ._messages import Message, call_id, is_instruction, origin, tool_calls
from ._tokens import TokenCounter

#: The note's first characters (how a second pass recognises one), and a summary's (``summary_model``).
NOTE_START: Final = "[Context note:"
SUMMARY_START: Final = "[Context summary:"
NOTE_SHARE: Final = 0.10  # the most of the budget the note takes; older lines fold into counts beyond it
SAID_CHARS: Final = 160  # what the assistant or the user said is quoted up to this many characters
_OLDEST_FIRST: Final = "oldest first (call a tool again to see its output):"
_LINE_OVERHEAD: Final = 2  # tokens a line costs beyond its text (the newline and the dash)
_FRAME_TOKENS: Final = 40  # tokens of the header and the closing bracket
#: A note or summary in a text (at its start or after a blank line, up to the first ``]`` followed by
#: a blank line or the end): group 1 the note, group 2 the turns it stood for.
_NOTE: Final = re.compile(
    r"(?s)(?:\A|\n\n)(\[Context (?:note|summary):(?: (\d+) earlier turns? (?:was|were) cut)?.*?(?:\](?=\n\n)|\Z))"
)


@dataclass(frozen=True, slots=True)
class Entry:
    """A line of the note (``text``, no dash): a ``call``, what the assistant ``said`` or the ``user``'s
    words (``kind``), folded under ``label``; a call's repeats share a ``key``; ``carried``: an earlier note's."""

    kind: str
    text: str
    label: str
    key: str | None = None
    carried: bool = False


@dataclass(frozen=True, slots=True)
class EarlierNotes:
    """The notes an earlier pass wrote into one user message: their ``lines`` (oldest first, without
    the dash), the ``turns`` they stood for, and the message's ``own`` words around them (or None)."""

    lines: tuple[str, ...]
    turns: int
    own: str | None


def is_note(message: Mapping[str, object]) -> bool:
    """Whether `message` is (or begins with) a note written by this module."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    text = _part_text(content[0]) if isinstance(content, list) and content else content
    return isinstance(text, str) and text.startswith((NOTE_START, SUMMARY_START))


def may_hold_note(message: Message) -> bool:
    """Whether `message` can hold a note of an earlier pass: a user message, not text that rode
    along with tool results (a note goes next to a task, and only there is it merged)."""
    if message.get("role") != "user":
        return False
    found = origin(message)
    return found is None or not found.continuation


def earlier_notes(message: Mapping[str, object]) -> EarlierNotes | None:
    """The notes an earlier pass wrote into user `message` (a note of its own, or merged into the
    task's text or blocks by a provider's role rules), for a later pass that cuts it again."""
    if message.get("role") != "user":
        return None
    content = message.get("content")
    parts = content if isinstance(content, list) else [content] if isinstance(content, str) else []
    texts = [text for text in map(_part_text, parts) if text is not None]
    if not any(NOTE_START in text or SUMMARY_START in text for text in texts):
        return None
    lines, turns, own = _take_notes(texts)
    if not lines and not turns:
        return None
    words = " ".join(part.strip() for part in own if part.strip())
    return EarlierNotes(tuple(lines), turns, words or None)


def without_notes(message: Message) -> Message:
    """User `message` (a task) without the notes an earlier pass merged into it (`earlier_notes`)."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": _own_text(content)}
    if not isinstance(content, list):
        return message
    parts: list[Any] = []
    for part in content:
        text = _part_text(part)
        if text is None or (NOTE_START not in text and SUMMARY_START not in text):
            parts.append(part)
        elif kept := _own_text(text):
            parts.append(kept if isinstance(part, str) else {**part, "text": kept})
    return {**message, "content": parts}


def _take_notes(texts: Sequence[str]) -> tuple[list[str], int, list[str]]:
    """The notes in `texts`: their lines (without the dash), the turns they stood for, the text around them."""
    lines: list[str] = []
    own: list[str] = []
    turns = 0
    for text in texts:
        at = 0
        for found in _NOTE.finditer(text):
            own.append(text[at : found.start(1)])
            turns += int(found.group(2) or 0)
            body = found.group(1).removesuffix("]").splitlines()[1:]
            lines.extend(line[2:] for line in body if line.startswith("- "))
            at = found.end()
        own.append(text[at:])
    return lines, turns, own


def _own_text(text: str) -> str:
    return "\n\n".join(piece.strip("\n") for piece in _take_notes([text])[2] if piece.strip())


def _part_text(part: object) -> str | None:
    text = part if isinstance(part, str) else part.get("text") if isinstance(part, Mapping) else None
    return text if isinstance(text, str) else None


def unit_entries(
    messages: Sequence[Message], start: int, end: int, *, calls: Mapping[str, CallInfo], results: Mapping[str, Message]
) -> list[Entry]:
    """The note's lines for the messages ``[start, end)`` of one unit, in order. `results` maps a
    call id to its result as the client sent it (outcomes are read from there)."""
    entries: list[Entry] = []
    for message in messages[start:end]:
        role = message.get("role")
        if role == "assistant":
            entries += _words("said", message.get("content"))
            for call in tool_calls(message):
                ident = call_id(call)
                if ident is not None and (info := calls.get(ident)) is not None:
                    described = info.describe()
                    outcome = _outcome(results.get(ident), info)
                    entries.append(Entry("call", f"{described} → {outcome}", info.name, described))
        elif role == "user" and not is_instruction(message) and may_hold_note(message):
            earlier = earlier_notes(message)  # cut again: the user's words merged with it, then its lines
            entries += _words("user", message.get("content") if earlier is None else earlier.own)
            entries.extend(_carried(line) for line in (earlier.lines if earlier is not None else ()))
    return entries


def _words(kind: str, content: object) -> list[Entry]:
    """The line quoting what the assistant (``said``) or the user said in `content`, if anything."""
    text = _said(content)
    return [Entry(kind, f'{kind}: "' + text.replace('"', "'") + '"', kind)] if text else []


def _said(content: object) -> str | None:
    """The text of a message's content, on one line and shortened (thinking and tool blocks aside)."""
    if isinstance(content, list):
        content = " ".join(_said_part(part) or "" for part in content)  # (`shorten` folds the spaces)
    text = content.strip() if isinstance(content, str) else ""
    return shorten(text, SAID_CHARS) if text else None


def _said_part(part: object) -> str | None:
    if isinstance(part, str) or not isinstance(part, Mapping):
        return part if isinstance(part, str) else None
    kind = part.get("type")
    if kind == "message":  # a Responses message item
        return _said(part.get("content"))
    return _part_text(part) if kind in ("text", "input_text", "output_text") else None


def _carried(line: str) -> Entry:
    """An earlier note's line, as an entry of the next note (folded under its tool or kind)."""
    kind, colon, _ = line.partition(": ")
    if colon and kind in ("user", "said"):
        return Entry(kind, line, kind, carried=True)
    name = line.split("(", 1)[0]  # a call's tool; nothing for a fold line, ``(+31 earlier: Read x12)``
    return Entry("call", line, name if name and " " not in name else "earlier", carried=True)


def _outcome(result: Message | None, call: CallInfo) -> str:
    if result is None:
        return "no result"
    content = result.get("content")
    if is_stub(content) and isinstance(content, str):
        prefix = f"[{call.name} result omitted from context: {call.describe()}, "
        return content[len(prefix) :].split(" — ", 1)[0] if content.startswith(prefix) else "omitted earlier"
    return describe_size(content) + (", error" if looks_like_error(result) else "")


def render_note(
    entries: Sequence[Entry], turns: int, allowance: int, counter: TokenCounter, summary: tuple[str, int] | None = None
) -> str | None:
    """The note for `entries` (oldest first) standing for `turns` cut turns, in at most `allowance`
    tokens. With `summary` (its text, and how many of the turns it covers) it opens with the summary
    and lists only the turns after those. None when not even the counts fit."""
    lines = _grouped(entries)
    noun = "turn was" if turns == 1 else "turns were"
    if summary is None:
        header = f"{NOTE_START} {turns} earlier {noun} cut to fit the context window. What they did, {_OLDEST_FIRST}"
    else:
        text, covered = summary
        which = "them" if covered >= turns else f"the first {covered}"
        header = f"{SUMMARY_START} {turns} earlier {noun} cut to fit the context window. A summary of {which}:\n"
        header += text.strip() + (f"\nWhat the turns after those did, {_OLDEST_FIRST}" if lines else "")
    body = _fold(lines, allowance - counter.text(header) - _LINE_OVERHEAD, counter)
    if body is None or (not body and summary is None):
        return None
    return header + "".join(f"\n- {line}" for line in body) + "]"


def _grouped(entries: Sequence[Entry]) -> list[tuple[Entry, str, int]]:
    """The note's lines (entry, text, calls it stands for): repeats of a call at their latest place, ``(xN)``."""
    counts: Counter[str | None] = Counter(e.key for e in entries if e.key is not None)
    latest = {e.key: i for i, e in enumerate(entries)}
    kept = [e for i, e in enumerate(entries) if e.key is None or latest[e.key] == i]
    return [(e, e.text, 1) if counts[e.key] < 2 else (e, f"{e.text} (x{counts[e.key]})", counts[e.key]) for e in kept]


def _fold(lines: Sequence[tuple[Entry, str, int]], budget: int, counter: TokenCounter) -> list[str] | None:
    """The note's lines in `budget` tokens, as many as needed folded into counts (by label) on a first
    line: the oldest first, the user's words last (rare, and maybe still in force). None: nothing fits."""
    costs = [counter.text(text) + _LINE_OVERHEAD for _, text, _ in lines]
    total = sum(costs)
    folded: Counter[str] = Counter()
    gone: set[int] = set()

    def fits() -> bool:  # (the fold line is counted only once the lines alone fit)
        fold = counter.text(_fold_line(folded)) + _LINE_OVERHEAD if folded and total <= budget else 0
        return total + fold <= budget

    order = iter(sorted(range(len(lines)), key=lambda i: lines[i][0].kind == "user"))
    while not fits():
        at = next(order, None)
        if at is None:
            return None
        entry, _, count = lines[at]
        folded[entry.label] += count
        total -= costs[at]
        gone.add(at)
    return ([_fold_line(folded)] if folded else []) + [text for i, (_, text, _) in enumerate(lines) if i not in gone]


def _fold_line(folded: Mapping[str, int]) -> str:
    parts = ", ".join(f"{label} x{count}" for label, count in sorted(folded.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"(+{sum(folded.values())} earlier: {parts})"


class TraceIndex:
    """The note's lines per unit, read on first need (most requests cut nothing) from `original` (uncompacted)
    when it has the same indexes; and an estimate of the note's size for any cut."""

    def __init__(
        self,
        messages: Sequence[Message],
        original: Sequence[Message],
        units: Sequence[tuple[int, int]],
        counter: TokenCounter,
        calls_of: Callable[[Sequence[Message]], Mapping[str, CallInfo]],
    ) -> None:
        self.counter, self._units, self._calls_of = counter, units, calls_of
        self.source = original if len(original) == len(messages) else messages
        self._lines: dict[int, Sequence[Entry]] = {}
        self._seen: set[str | None] = set()  # the calls the estimate has seen
        self._totals: list[int] = []  # the estimate's running total after each unit walked
        self._kept: dict[int, int] = {}

    @cached_property
    def _calls(self) -> tuple[Mapping[str, CallInfo], dict[str, Message]]:  # by id; and each id's first result
        results = (m for m in reversed(self.source) if m.get("role") == "tool")
        return self._calls_of(self.source), {i: m for m in results if isinstance(i := m.get("tool_call_id"), str)}

    def lines(self, unit: int) -> Sequence[Entry]:
        if unit not in self._lines:
            (start, end), (calls, results) = self._units[unit], self._calls
            self._lines[unit] = unit_entries(self.source, start, end, calls=calls, results=results)
        return self._lines[unit]

    def estimate(self, cut: int, anchor: int) -> int:
        """Tokens of the note when units before `cut` are cut, `anchor` (a user unit, -1: none) kept."""
        while len(self._totals) < cut:
            running = self._totals[-1] if self._totals else 0
            for entry in self.lines(len(self._totals)):
                repeat = entry.key is not None and entry.key in self._seen  # (it adds its count to a line)
                running += 3 if repeat else self.counter.text(entry.text) + _LINE_OVERHEAD
                self._seen.add(entry.key)
            self._totals.append(running)
        total = self._totals[cut - 1] if cut else 0
        if total == 0:
            return 0
        if 0 <= anchor < cut:  # the kept anchor's words stay; its earlier note's room is the new note's
            if anchor not in self._kept:
                kept = [e for e in self.lines(anchor) if e.kind == "user" or e.carried]
                self._kept[anchor] = sum(self.counter.text(e.text) + _LINE_OVERHEAD for e in kept)
            total -= self._kept[anchor]
        return total + _FRAME_TOKENS

    def entries_before(self, cut: int, anchor: int) -> list[Entry]:
        """The lines of every unit before `cut`, oldest first: of the kept `anchor`, only those of the
        notes an earlier pass merged into it (the new note carries them)."""
        return [e for unit in range(cut) for e in self.lines(unit) if unit != anchor or e.carried]

    def turns_before(self, cut: int, messages: Sequence[Message], units: Sequence[tuple[int, int]]) -> int:
        """The turns the units before `cut` stand for: their assistant turns, and the turns the notes
        of an earlier pass among them (the kept anchor's too) stood for."""
        turns = sum(1 for start, _ in units[:cut] if messages[start].get("role") == "assistant")
        notes = (earlier_notes(m) for start, end in units[:cut] for m in messages[start:end] if may_hold_note(m))
        return turns + sum(found.turns for found in notes if found is not None)
