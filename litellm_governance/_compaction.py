"""Compaction blocks (Anthropic) and items (OpenAI Responses): where the history the provider still
reads begins, and what a provider that does not know them gets instead. Pure.

* Anthropic (``compact_20260112``): a ``compaction`` block (``content``: the summary; optionally
  ``encrypted_content``) in the assistant turn; the API drops everything before the newest one. A
  block whose ``content`` is null records a failed compaction: a no-op.
* OpenAI (``context_management`` with ``compact_threshold``, or ``/responses/compact``): a
  ``compaction`` item whose opaque ``encrypted_content`` carries the items before it.

A provider that knows neither (a route LiteLLM translates) gets `without_compaction`: the summary as
text in the newest compaction's place, without the history before it; an item without a readable
summary is removed and the history before it stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

COMPACTION: Final = "compaction"
#: Where a format keeps its compactions (`_formats.FormatSpec.compaction`): a content block of a
#: message (Anthropic), or an item of the input (Responses).
Where: TypeAlias = Literal["block", "item"]


def is_compaction(value: object) -> bool:
    """A compaction block or item."""
    return isinstance(value, Mapping) and value.get("type") == COMPACTION


def compaction_summary(value: Mapping[str, Any]) -> str | None:
    """The readable summary a compaction block or item carries (None: none, or opaque only)."""
    content = value.get("content")
    if isinstance(content, str) and content:
        return content
    summary = value.get("summary")
    if isinstance(summary, str) and summary:
        return summary
    if isinstance(summary, list):
        texts = [p.get("text") for p in summary if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
        return "\n".join(t for t in texts if t) or None
    return None


def newest_compaction(history: Sequence[Any], where: Where) -> tuple[int, int] | None:
    """Where the newest compaction the provider acts on is (an Anthropic block with null content
    is a no-op): ``(message, block)`` in an Anthropic ``messages`` list, ``(item, -1)`` in a
    Responses ``input`` list; None when there is none."""
    for index in reversed(range(len(history))):
        entry = history[index]
        if where == "item" and is_compaction(entry):
            return index, -1
        content = _blocks(entry.get("content")) if where == "block" and isinstance(entry, Mapping) else []
        for block in reversed(range(len(content))):
            if is_compaction(content[block]) and content[block].get("content") is not None:
                return index, block
    return None


def without_compaction(history: Sequence[Any], where: Where) -> list[Any] | None:
    """The history for a provider that knows no compaction: from the newest compaction on, the
    compaction replaced by its summary as text (Anthropic: a ``text`` block in its turn; Responses:
    an assistant message), other compaction blocks or items removed; None when the history holds
    none (nothing to do)."""
    if not any(
        is_compaction(entry)
        or (isinstance(entry, Mapping) and any(is_compaction(b) for b in _blocks(entry.get("content"))))
        for entry in history
    ):
        return None
    newest = newest_compaction(history, where)
    return _responses(history, newest) if where == "item" else _anthropic(history, newest)


def _blocks(content: object) -> list[Any]:
    return content if isinstance(content, list) else []


def _anthropic(messages: Sequence[Any], newest: tuple[int, int] | None) -> list[Any]:
    start = newest[0] if newest is not None else 0
    out: list[Any] = []
    for index in range(start, len(messages)):
        message = messages[index]
        blocks = _blocks(message.get("content") if isinstance(message, Mapping) else None)
        if not any(is_compaction(b) for b in blocks):
            out.append(message)
            continue
        # In the newest compaction's turn, the blocks before it are what its summary replaced.
        first = newest[1] if newest is not None and index == newest[0] else 0
        kept: list[Any] = []
        for position, block in enumerate(blocks[first:], first):
            if not is_compaction(block):
                kept.append(block)
            elif (index, position) == newest and (summary := compaction_summary(block)):
                kept.append({"type": "text", "text": summary})
        if kept:
            out.append({**message, "content": kept})
    return out


def _responses(items: Sequence[Any], newest: tuple[int, int] | None) -> list[Any]:
    summary = compaction_summary(items[newest[0]]) if newest is not None else None
    if newest is None or summary is None:
        # Opaque: the provider cannot read it, so the history it stands for stays.
        return [item for item in items if not is_compaction(item)]
    text = {"type": "output_text", "text": summary}
    out: list[Any] = [{"type": "message", "role": "assistant", "content": [text]}]
    out.extend(item for item in items[newest[0] + 1 :] if not is_compaction(item))
    return out
