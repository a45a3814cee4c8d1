"""The turns snipping cut, as a summary model sees them: the cut point's key (the same cut point
gives the same key on every request) and a plain-text transcript of the cut messages."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ._calls import calls_by_id
from ._messages import Message, call_id, tool_calls
from ._trace import Entry

__all__ = ["CutTurns", "KeyChain", "prefix_keys", "transcript"]


@dataclass(frozen=True)
class CutTurns:
    """The turns snipping removed at one cut point: what a summary model may summarise. Summaries
    roll: the one for this cut point is written from the summary of an earlier cut point of the
    same conversation (`previous`) and the turns cut since (`messages`)."""

    #: Digest of everything cut up to this cut point: the same cut point gives the same key.
    key: str
    #: How many assistant turns are cut.
    turns: int
    #: Gives `messages` (read on first use: only a summary model needs them, and there are many).
    read: Callable[[], tuple[Message, ...]] = field(repr=False, compare=False)
    #: The summary of an earlier cut point this one builds on, if any.
    previous: str | None = None

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        """The cut messages a summary must add to `previous` (outline messages), oldest first."""
        return self.read()


def prefix_keys(
    units: Sequence[Sequence[Entry]],
    messages: Sequence[Sequence[Message]],
    *,
    after: KeyChain | None = None,
) -> KeyChain:
    """``keys[c]``: the key of cutting every unit before `c` — a digest of those units' note lines
    and call ids (which tell one conversation from another): a pure function of what is cut, and
    the same for a conversation's cut point on every request. ``keys[0]`` is "" (nothing cut).
    With `after` (the keys of the first units, as an earlier request of the conversation found them),
    `units` and `messages` are those that follow them."""
    digest = hashlib.sha256(b"cut-turns-v2") if after is None else after.digest.copy()
    keys = [""] if after is None else list(after.keys)
    for entries, unit in zip(units, messages, strict=True):
        for entry in entries:
            digest.update(b"\x1f" + entry.text.encode("utf-8", "surrogatepass"))
        for message in unit:
            for call in tool_calls(message):
                ident = call_id(call)
                if ident is not None:
                    digest.update(b"\x1e" + ident.encode("utf-8", "surrogatepass"))
        keys.append(digest.copy().hexdigest()[:32])
    return KeyChain(tuple(keys), digest)


@dataclass(frozen=True)
class KeyChain:
    """The keys of cutting before each of a request's first units (`prefix_keys`), and the digest
    after the last of them (to go on from; never updated in place)."""

    keys: tuple[str, ...]
    digest: Any

    @property
    def units(self) -> int:
        """How many units the keys cover."""
        return len(self.keys) - 1


def transcript(messages: Sequence[Message], *, limit: int = 60_000, result_chars: int = 2_000) -> str:
    """The cut turns as plain text for a summary model: who said what, each call and the start of
    its result; at most `limit` characters (the newest lines are kept when it must be cut)."""
    calls = calls_by_id(messages)
    lines: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            ident = message.get("tool_call_id")
            call = calls.get(ident) if isinstance(ident, str) else None
            text = _said_full(message.get("content"))
            head = text[:result_chars] + (" …" if len(text) > result_chars else "")
            lines.append(f"[result of {call.describe() if call else 'a call'}] {head}")
            continue
        said = _said_full(message.get("content"))
        if said:
            lines.append(f"[{role}] {said}")
        for call in tool_calls(message):
            ident = call_id(call)
            info = calls.get(ident) if ident is not None else None
            if info is not None:
                lines.append(f"[{role} calls] {info.describe()}")
    text = "\n".join(lines)
    return text if len(text) <= limit else "…" + text[len(text) - limit :]


def _said_full(content: object) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, Mapping) and part.get("type") == "message":
                texts.append(_said_full(part.get("content")))
        return "\n".join(t for t in texts if t).strip()
    return ""
