"""Step: give tool calls ids the provider can tell apart and accepts, call and result alike.

* On every profile, an id repeated inside one assistant message (``[c1, c1, c18]``) is renamed:
  no provider can tell which result answers which call.
* Where the provider needs ids unique in the whole request (Anthropic, Bedrock, Mistral), an id
  repeated across turns (replayed or merged sessions; some agent frameworks reuse them) is
  renamed too.
* Mistral accepts only ids of exactly 9 letters and digits: every other id is mapped to one,
  derived from the original id, so the same call gets the same id on every request.

A repeat is renamed ``<id>_<n>`` with the smallest ``n`` no other call uses; for Gemini the
suffix goes before LiteLLM's ``__thought__`` marker, so the thought signature after it is kept
byte for byte. Ids are numbered from the start of the conversation, before any snipping, so the
same call keeps the same id on every request and the prompt cache survives. Results are renamed
with their call: after the repairs, each call's results follow it directly.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, deque
from typing import Any, Final

from ._context import Context, StepResult, stood
from ._messages import Message, call_id, tool_calls

__all__ = ["UniqueToolCallIds", "nine_char_id"]

_NINE: Final = re.compile(r"[A-Za-z0-9]{9}")
_ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def nine_char_id(ident: str, salt: int = 0) -> str:
    """A 9-character ``[A-Za-z0-9]`` id derived from `ident` (the same on every request)."""
    number = int.from_bytes(hashlib.blake2b(f"{salt}\x00{ident}".encode(), digest_size=8).digest(), "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        chars.append(_ALPHABET[digit])
    return "".join(chars)


class UniqueToolCallIds:
    name = "unique_ids"

    def __call__(self, messages: list[Message], ctx: Context) -> StepResult:
        profile = ctx.profile
        taken, count = _taken(messages, ctx)
        needs_work = profile.nine_char_ids and any(not _NINE.fullmatch(i) for i in taken)
        # Cheap check first: most requests have no repeated id at all.
        if not needs_work and (
            count == len(taken) or (not profile.unique_tool_call_ids and not _repeats_within(messages))
        ):
            return StepResult(messages)
        counts: Counter[str] = Counter()
        return StepResult(_rename(messages, ctx, set(taken), counts), counts)


def _idents(messages: list[Message], start: int, end: int) -> list[str]:
    return [ident for m in messages[start:end] for c in tool_calls(m) if (ident := call_id(c)) is not None]


def _taken(messages: list[Message], ctx: Context) -> tuple[frozenset[str], int]:
    """The ids of the calls in `messages`, and how many calls have one. Where the previous request of
    the conversation began this list (`Context.conversation`), its ids are taken from what it kept."""
    shared = ctx.conversation(messages)
    if shared is None:
        idents = _idents(messages, 0, len(messages))
        return frozenset(idents), len(idents)
    mark, walks = shared
    end, kept, count = stood(walks, "ids", mark, (0, frozenset(), 0))
    upto = _idents(messages, end, mark)
    kept, count = kept.union(upto), count + len(upto)
    ctx.keep("ids", (mark, kept, count))
    rest = _idents(messages, mark, len(messages))
    return kept.union(rest), count + len(rest)


def _repeats_within(messages: list[Message]) -> bool:
    for message in messages:
        idents = [i for c in tool_calls(message) if (i := call_id(c)) is not None]
        if len(idents) != len(set(idents)):
            return True
    return False


def _with_suffix(ident: str, suffix: int, marker: str | None) -> str:
    if marker and marker in ident:
        head, _, payload = ident.partition(marker)
        return f"{head}_{suffix}{marker}{payload}"
    return f"{ident}_{suffix}"


def _rename(messages: list[Message], ctx: Context, taken: set[str], counts: Counter[str]) -> list[Message]:
    profile = ctx.profile
    seen: set[str] = set()
    out: list[Message] | None = None
    index = 0
    while index < len(messages):
        message = messages[index]
        index += 1
        calls = tool_calls(message) if message.get("role") == "assistant" else []
        if not profile.unique_tool_call_ids:
            seen = set()  # only repeats inside one message must go
        # Per original id, the ids its calls end up with, in call order: results answer the
        # first unanswered call with their id, so the n-th result with an id takes the n-th.
        slots: dict[str, deque[str]] = {}
        new_calls: list[Any] = []
        renamed = 0
        for call in calls:
            ident = call_id(call)
            if ident is None:
                new_calls.append(call)
                continue
            new_ident = ident
            if profile.nine_char_ids and not _NINE.fullmatch(ident):
                salt = 0
                new_ident = nine_char_id(ident)
                while new_ident in seen or (new_ident in taken and new_ident != ident):
                    salt += 1
                    new_ident = nine_char_id(ident, salt)
            if new_ident in seen:
                if profile.nine_char_ids:
                    salt = 1
                    while (candidate := nine_char_id(ident, salt)) in seen or candidate in taken:
                        salt += 1
                    new_ident = candidate
                else:
                    suffix = 2
                    while _with_suffix(ident, suffix, profile.id_payload_marker) in taken:
                        suffix += 1
                    new_ident = _with_suffix(ident, suffix, profile.id_payload_marker)
            if new_ident != ident:
                taken.add(new_ident)
                renamed += 1
            seen.add(new_ident)
            slots.setdefault(ident, deque()).append(new_ident)
            new_calls.append(call if new_ident == ident else {**call, "id": new_ident})
        if not renamed:
            if out is not None:
                out.append(message)
            continue
        if out is None:
            out = messages[: index - 1]
        out.append({**message, "tool_calls": new_calls})
        counts["tool_call_ids_renamed"] += renamed
        while index < len(messages) and messages[index].get("role") == "tool":
            result = messages[index]
            ident = result.get("tool_call_id")
            queue = slots.get(ident) if isinstance(ident, str) else None
            if queue:
                new_ident = queue.popleft()
                if new_ident != ident:
                    result = {**result, "tool_call_id": new_ident}
            out.append(result)
            index += 1
    return messages if out is None else out
