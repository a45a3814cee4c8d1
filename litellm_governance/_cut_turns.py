"""The turns snipping cut, as a summary model sees them: the cut point's key and a plain-text
transcript of the cut messages.

The key is a SHA-256 digest of everything the cut removed, exactly: every field of every cut message
as the client sent it (its blocks or items included), so two conversations share a key only where
what was cut is the same, byte for byte (`prefix_keys`). Whose summary a key may fetch — which
summary model, prompt, deployment and tenant — the integration adds (`integration.summaries`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ._calls import calls_by_id
from ._messages import Message, call_id, native_of, tool_calls

__all__ = ["CutTurns", "prefix_keys", "transcript"]


@dataclass(frozen=True)
class CutTurns:
    """The turns snipping removed at one cut point: what a summary model may summarise. Summaries
    roll: the one for this cut point is written from the summary of an earlier cut point of the
    same conversation (`previous`) and the turns cut since (`messages`)."""

    #: How many assistant turns are cut.
    turns: int
    #: Gives `messages` (read on first use: only a summary model needs them, and there are many).
    read: Callable[[], tuple[Message, ...]] = field(repr=False, compare=False)
    #: The summary of an earlier cut point this one builds on, if any.
    previous: str | None = None
    #: Gives `key` (worked out on first use: only a summary model needs it).
    keyed: Callable[[], str] = field(default=lambda: "", repr=False, compare=False)

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        """The cut messages a summary must add to `previous` (outline messages), oldest first."""
        return self.read()

    @cached_property
    def key(self) -> str:
        """Digest of everything cut up to this cut point, exactly (`prefix_keys`)."""
        return self.keyed()


def prefix_keys(units: Sequence[Sequence[Message]]) -> tuple[str, ...]:
    """``keys[c]``: the key of cutting every unit before `c` — a SHA-256 digest of every field of
    every message of those units, as the client sent them (`_material`): the same only where what is
    cut is the same, byte for byte. ``keys[0]`` is "" (nothing cut)."""
    digest = hashlib.sha256(b"cut-turns-v3")
    keys = [""]
    for unit in units:
        for message in unit:
            material = _material(message)
            digest.update(len(material).to_bytes(8, "big") + material)
        digest.update(b"\x1d")  # the end of a unit
        keys.append(digest.copy().hexdigest())
    return tuple(keys)


def _material(message: Message) -> bytes:
    """What a summary key digests of one outline message: its fields and the client's own message,
    block or item it stands for (where the outline keeps only part of it), as JSON in the order sent."""
    native = native_of(message)
    value = [message, native if isinstance(native, Mapping) else None]
    try:  # (the outline's own keys are not strings: `skipkeys` leaves them out)
        text = json.dumps(value, ensure_ascii=False, skipkeys=True, separators=(",", ":"), default=repr)
    except (ValueError, RecursionError):  # a value JSON cannot hold: its repr, as exact
        text = repr(value)
    return text.encode("utf-8", "surrogatepass")


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
