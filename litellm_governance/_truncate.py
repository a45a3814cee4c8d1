"""Step: the last resort for the newest exchange — truncate its results, never stub them.

The results after the last assistant turn are what the model asked for and is about to read.
Compaction never stubs them and snipping always keeps them; only when the smallest valid request
(system prompt, task, newest exchange) still does not fit are they cut down — each keeping its
head and its tail, with a line saying how much was removed and how to see it::

    [… 1,204 lines (61,877 characters) omitted here to fit the context window: the first 180 and
    the last 90 lines are shown. Re-run with a narrower range or a filter (head, tail, grep) to
    see the rest.]

The largest results give up the most (every result above a common size is cut down to it), so a
short result next to a huge one stays whole. Deterministic: the same request is cut the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ._context import Context, Fate, StepResult
from ._messages import Message
from ._microcompact import newest_results
from ._snip import Layout
from ._steps import TRUNCATED

__all__ = ["MIN_KEPT_TOKENS", "truncate_newest", "truncate_text"]

#: A truncated result keeps at least about this many tokens of its own text; one within half as
#: much again of it is left as it is (so a second pass finds nothing more to cut).
MIN_KEPT_TOKENS: Final = 64
_FLOOR_SLACK: Final = 1.5
#: Attempts at fitting (each estimate of characters per token is corrected by the last count).
_ATTEMPTS: Final = 6
_MARKER: Final = re.compile(
    r"\n\[… (?:(?P<lines>[\d,]+) lines \()?(?P<chars>[\d,]+) characters\)? omitted here to fit the context "
    r"window: [^\]\n]*\]\n"
)


def _marker(removed_lines: int, removed_chars: int, head: str, tail: str) -> str:
    what = f"{removed_chars:,} characters"
    if removed_lines > 1:
        what = f"{removed_lines:,} lines ({what})"
    head_lines = head.count("\n") + (1 if head else 0)
    tail_lines = tail.count("\n") + (1 if tail and not tail.endswith("\n") else 0)
    return (
        f"\n[… {what} omitted here to fit the context window: the first {head_lines:,} and the last "
        f"{tail_lines:,} lines are shown. Re-run with a narrower range or a filter (head, tail, grep) "
        "to see the rest.]\n"
    )


def _head_end(text: str, chars: int) -> int:
    """Where a head of about `chars` characters ends: after a line where one is near."""
    if chars >= len(text):
        return len(text)
    end = text.rfind("\n", 0, chars + 1)
    return chars if end < chars // 2 else end


def _tail_start(text: str, chars: int) -> int:
    """Where a tail of about `chars` characters starts: at a line where one is near."""
    if chars >= len(text):
        return 0
    start = len(text) - chars
    line = text.find("\n", start)
    return start if line < 0 or line - start > chars // 2 else line + 1


def truncate_text(text: str, keep_chars: int) -> str:
    """`text` cut to about `keep_chars` characters of its own: two thirds from its head, one third
    from its tail, at line boundaries where the lines allow, with a marker in between saying what
    was removed. A text cut before is cut further around its marker, which then counts both cuts."""
    found = _MARKER.search(text)
    if found is None:
        if keep_chars >= len(text):
            return text
        head_end = _head_end(text, keep_chars * 2 // 3)
        tail_start = max(head_end, _tail_start(text, keep_chars - keep_chars * 2 // 3))
        if tail_start <= head_end:
            return text
        removed = text[head_end:tail_start]
        head, tail = text[:head_end], text[tail_start:]
        return head + _marker(removed.count("\n"), len(removed), head, tail) + tail
    head, tail = text[: found.start()], text[found.end() :]
    if keep_chars >= len(head) + len(tail):
        return text
    lines = int((found.group("lines") or "0").replace(",", ""))
    chars = int(found.group("chars").replace(",", ""))
    head_keep = min(len(head), keep_chars * 2 // 3)
    tail_keep = min(len(tail), keep_chars - head_keep)
    head_keep = min(len(head), keep_chars - tail_keep)
    new_head = head[: _head_end(head, head_keep)]
    new_tail = tail[_tail_start(tail, tail_keep) :]
    removed = head[len(new_head) :] + tail[: len(tail) - len(new_tail)]
    return new_head + _marker(lines + removed.count("\n"), chars + len(removed), new_head, new_tail) + new_tail


def _longest_part(content: object) -> int | None:
    """The index of the longest text part of list content (the first of equals; None: none)."""
    if not isinstance(content, list):
        return None
    parts = [i for i, p in enumerate(content) if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    return max(parts, key=lambda i: len(content[i]["text"]), default=None)


def _longest(content: object) -> str:
    """The text a truncation cuts: string content, or the longest text part."""
    if isinstance(content, str):
        return content
    at = _longest_part(content)
    return "" if at is None else content[at]["text"]  # type: ignore[index]


def _visible_chars(text: str) -> int:
    found = _MARKER.search(text)
    return len(text) - (found.end() - found.start() if found else 0)


def _cut(message: Message, keep_chars: int) -> Message:
    """`message` with its (longest) text cut to `keep_chars` characters of its own."""
    content: Any = message.get("content")
    if isinstance(content, str):
        return {**message, "content": truncate_text(content, keep_chars)}
    at = _longest_part(content)
    if at is None:
        return message
    parts = list(content)
    parts[at] = {**content[at], "text": truncate_text(content[at]["text"], keep_chars)}
    return {**message, "content": parts}


def truncate_newest(messages: list[Message], ctx: Context) -> StepResult:
    """Cut the newest exchange's results down until the request fits (or they are as small as they
    go); called only when shrinking left the request over budget."""
    if ctx.budget is None:
        return StepResult(messages)
    newest = sorted(i for i in newest_results(messages, ctx) if _longest(messages[i].get("content")))
    if not newest:
        return StepResult(messages, over_budget=True)
    layout = Layout.of(messages, ctx)
    cost = layout.cost_function(messages, ctx)
    # A little below the room: the role rules' overheads are estimates, and a governed request
    # must fit when governed again (idempotence).
    room = ctx.budget - layout.fixed - 8 - (ctx.budget - layout.fixed) // 100

    def total(current: list[Message]) -> int:  # (the units' costs hold what the rules will add)
        return cost(0, sum(layout.tokens) + sum(ctx.tokens(current[i]) - ctx.tokens(messages[i]) for i in newest))

    need = total(messages) - room
    if need <= 0:
        return StepResult(messages, over_budget=True)
    # Sizes in tokens of each result's own text (a marker from an earlier cut aside).
    sizes: dict[int, int] = {}
    chars: dict[int, int] = {}
    for i in newest:
        text = _longest(messages[i].get("content"))
        chars[i] = _visible_chars(text)
        # (the text's own tokens, not its message's: whatever else the message holds stays as it is,
        # and counting it here would cut the text again when the request is governed again)
        sizes[i] = max(1, ctx.counter.text(text) * chars[i] // max(1, len(text)))
    cuttable = {i: size for i, size in sizes.items() if size > MIN_KEPT_TOKENS * _FLOOR_SLACK}
    out = messages
    for _attempt in range(_ATTEMPTS):
        cap = _water_level(cuttable, need)
        if cap is None:
            break
        out = list(messages)  # always cut from what the client sent: one marker each
        for i in cuttable:
            if sizes[i] > cap:
                out[i] = _cut(messages[i], cap * chars[i] // sizes[i])
        shortfall = total(out) - room
        if shortfall <= 0:
            break
        need += shortfall  # characters per token were not what the estimate said: ask for more
    fates = tuple(Fate(TRUNCATED, out[i]) for i in newest if out[i] is not messages[i])
    if not fates:
        return StepResult(messages, over_budget=True)
    return StepResult(out, fates, over_budget=total(out) > room)


def _water_level(sizes: Mapping[int, int], need: int) -> int | None:
    """The size every result above it is cut down to so that `need` tokens go, at least
    `MIN_KEPT_TOKENS` (None: nothing can be cut)."""
    ordered = sorted(sizes.values(), reverse=True)
    removable = sum(max(0, s - MIN_KEPT_TOKENS) for s in ordered)
    if removable <= 0:
        return None
    need = min(need + need // 20 + 16, removable)  # a little extra: markers and rounding
    for k in range(1, len(ordered) + 1):
        level = max(ordered[k] if k < len(ordered) else MIN_KEPT_TOKENS, MIN_KEPT_TOKENS)
        if sum(s - level for s in ordered[:k]) >= need:
            # Between ordered[k] and ordered[k - 1]: exactly `need` removed from the k largest.
            return max(MIN_KEPT_TOKENS, (sum(ordered[:k]) - need) // k)
    return MIN_KEPT_TOKENS
