"""What the previous request of a conversation computed, kept for the next one. Agents resend their
whole history on every request, so a request of an agent loop begins with the one before it, and
what the steps worked out over those messages need not be worked out again.

Kept per conversation, as plain values only: the tokens of each outline message, and where each
step's walk over the messages stood after them (by name, `Context.keep`: the tool-call pairing
`_pairing.PairingWalk`, the call ids, the instructions' tokens, the last ``cache_control``
breakpoint, the catalogue of results `_microcompact.Catalogued`, the units `_snip.LayoutWalk`, the
stubs' sizes and savings `_stable.stub_sizes`, how many first messages each role rule left as they
were `_roles._RulesWalk`, and where the window cuts, the note and its lines for the cut units
`_trace.TraceWalk`). Never the previous request's messages: those hold the objects it went
out with, which a callback running after the plugin may edit in place; and no text of a request
beyond what the process keeps anyway (a call's shortened main argument, a stub's line, what was said
as `_calls.shorten` shortened it for a note; `tests/test_privacy.py`).

A request reuses them only where it provably begins with the same messages, and only for the
previous request's items but its `_TAIL` newest (a client may send those again edited: Claude Code
moves its ``cache_control`` breakpoint to the newest message). The check is exact: the items are
written out in C by `_tokens.exact_bytes` (every value with its type, every dict in its key order,
no back-references, so the same messages give the same bytes whoever built them; `pickle` with its
memo off, which writes them in half the time `marshal` version 2 took, for the same guarantees),
and those bytes are compared by Python's hash of them (keyed per process, as the token cache keys
texts), chained over the stretches each request added: each request hashes its bytes once. A step
resumes its walk where the kept one stood and walks on; what it reuses is what it would compute from
those messages again, so governing gives the same bytes with or without this
(`tests/test_conversations.py`), and where the check fails, or a later message could change what a
walk found, everything is computed afresh.

A conversation is found by its system prompt and first items (with the format and the encoding),
a few candidates a key. What a conversation keeps grows with its messages (about 300
bytes each, 530 where the window cuts and the note and its lines are kept too, `python bench/memory.py`):
a process keeps at most `GovernanceConfig.conversation_cache_size` messages' worth, forgetting the
least recently used conversations first; 0 keeps none.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._tokens import exact_bytes

if TYPE_CHECKING:
    from ._formats import Outline

__all__ = ["Conversations", "Recall", "Seen", "conversations"]

#: Written in front of a request's items (`_LEAD`, `exact_bytes`), so that the items are written
#: as those of a list longer than one (which `pickle` writes otherwise): the bytes before the first
#: item and after the last, in a list of any length.
_LEAD: Final = (None, None)
_TRAILER: Final = 2  # (the list's end and the pickle's)
_HEADER: Final = len(exact_bytes([*_LEAD])) - _TRAILER
#: A conversation is found by its system prompt and this many first items (an agent's first turn
#: is its own: sessions sharing a system prompt and an opening message, as Codex's in one folder, differ
#: there), and a few are kept under one key.
_OPENING: Final = 3
_PER_KEY: Final = 4
#: The newest items of a request not kept for the next one (they may come back edited).
_TAIL: Final = 2
#: A conversation's digest is chained over at most this many stretches, then hashed anew whole.
_STRETCHES: Final = 16


def _chain(digest: int, stretch: memoryview) -> int:
    """`digest` carried over the bytes of `stretch` (hashed where they lie: no copy)."""
    return hash((digest, stretch))


@dataclass(frozen=True)
class Seen:
    """A conversation's previous request, up to its `_TAIL` newest items, as plain values."""

    key: int
    #: The hash of the bytes of those items (`exact_bytes`, without what the list writes around
    #: them), chained over `stretches` (the lengths of what each request added, `_chain`); their length.
    digest: int
    stretches: tuple[int, ...]
    size: int
    #: How many items they are, and the outline messages read from them alone.
    items: int
    messages: int
    #: Tokens of each of those outline messages (the counter's units).
    counts: array[int]
    #: The steps' walks over them, by name, when the repairs left them as read (else none).
    walks: Mapping[str, object]


class Recall:
    """One request's look at its conversation: what the previous request left (`seen`, whose first
    `reuse` outline messages are this request's first), and what this one leaves: its items but the
    `_TAIL` newest (a client may edit those in the next request: Claude Code moves its
    ``cache_control`` breakpoint to the newest message), read into the first `mark` outline
    messages (`leave`)."""

    __slots__ = ("_extends", "_items", "_key", "_store", "_written", "mark", "reuse", "seen")

    def __init__(
        self,
        store: Conversations,
        key: int,
        written: memoryview,
        *,
        history: list[Any],
        outline: Outline,
        seen: Seen | None,
    ) -> None:
        self._store, self._key, self._written, self._extends = store, key, written, seen
        self._items = max(0, len(history) - _TAIL)
        self.mark = outline.prefix(self._items) if self._items else 0
        self.reuse = min(outline.prefix(seen.items), seen.messages) if seen is not None else 0
        self.seen = seen if self.reuse > 0 else None

    def leave(self, counts: array[int], walks: Mapping[str, object]) -> None:
        """Keep this request, up to `mark` outline messages (`counts` their tokens, `walks` the
        steps' walks over them), for the next one of the conversation, in place of the one it extended."""
        if self.mark <= 0:
            return
        before, size = self._extends, len(self._written)
        if before is not None and before.size <= size and len(before.stretches) < _STRETCHES:
            digest, stretches = before.digest, (*before.stretches, size - before.size)
            digest = _chain(digest, self._written[before.size :])
        else:
            digest, stretches = _chain(0, self._written), (size,)
        seen = Seen(self._key, digest, stretches, size, self._items, self.mark, counts, walks)
        self._store.keep(seen, replacing=before)


class Conversations:
    """The last request of the most recent conversations, for one process: at most `size` outline
    messages' worth (what a conversation keeps grows with its messages, about 300 bytes each)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._by_key: OrderedDict[int, list[Seen]] = OrderedDict()
        self._messages = 0

    def __len__(self) -> int:
        """The conversations kept."""
        with self._lock:
            return sum(len(bucket) for bucket in self._by_key.values())

    @property
    def messages(self) -> int:
        """The outline messages they keep counts and walks for."""
        return self._messages

    def clear(self) -> None:
        with self._lock:
            self._by_key.clear()
            self._messages = 0

    def recall(self, outline: Outline, encoding: str) -> Recall | None:
        """This request's conversation, or None where none can be told (nothing to key it by, or a
        value JSON cannot hold: not a request body parsed from JSON, `exact_bytes`)."""
        if self.size <= 0:
            return None
        source = outline.source()
        if source is None:
            return None
        history, system = source
        if type(history) is not list or not history:
            return None
        kept = len(history) - _TAIL  # what this request keeps (see `Recall`)
        try:
            blob = exact_bytes([*_LEAD, *history[: max(0, kept)]])
            written = blob[_HEADER : len(blob) - _TRAILER]  # (the bytes of those items only: a view)
            key = hash((outline.format, encoding, exact_bytes((system, history[:_OPENING]))))
        except (ValueError, RecursionError):  # a value JSON cannot hold, or nesting too deep
            return None
        with self._lock:
            bucket = self._by_key.get(key, ())
        found = None
        for seen in bucket:
            if seen.items <= kept and seen.size <= len(written):
                digest, at = 0, 0
                for length in seen.stretches:
                    digest = _chain(digest, written[at : at + length])
                    at += length
                if digest == seen.digest:
                    found = seen
                    break
        return Recall(self, key, written, history=history, outline=outline, seen=found)

    def keep(self, seen: Seen, *, replacing: Seen | None = None) -> None:
        """Keep `seen` (in place of `replacing`, the request it extended), then forget the least
        recently used conversations until the messages kept are at most `size`."""
        with self._lock:
            bucket = self._by_key.pop(seen.key, [])
            kept = [s for s in bucket if s is not replacing]
            if seen.messages <= self.size:  # (a conversation bigger than the store is not kept)
                kept = [seen, *kept][:_PER_KEY]
            self._messages += sum(s.messages for s in kept) - sum(s.messages for s in bucket)
            if kept:
                self._by_key[seen.key] = kept
            while self._messages > self.size:
                _, dropped = self._by_key.popitem(last=False)
                self._messages -= sum(s.messages for s in dropped)


_stores: dict[int, Conversations] = {}
_stores_lock = threading.Lock()


def conversations(size: int) -> Conversations:
    """The process-wide conversation store keeping at most `size` messages' worth."""
    with _stores_lock:
        store = _stores.get(size)
        if store is None:
            store = _stores[size] = Conversations(size)
        return store


def counts_of(messages: Sequence[Any], counts: dict[int, int]) -> array[int]:
    """The tokens of each of `messages`, as a per-request memo holds them (by id)."""
    return array("q", map(counts.__getitem__, map(id, messages)))
