"""Step: give tool calls ids the provider can tell apart and accepts, call and result alike.

* On every profile, an id repeated inside one assistant message (``[c1, c1, c18]``) is renamed:
  no provider can tell which result answers which call.
* Where the provider needs ids unique in the whole request (Anthropic, Bedrock, Mistral), or the
  format does (Responses: an output finds its call by id alone), an id repeated across turns
  (replayed or merged sessions; some agent frameworks reuse them) is renamed too.
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
from collections import deque
from dataclasses import replace
from typing import Any, Final

from ._context import Context, Fate, StepResult
from ._messages import Message, call_id, tool_calls
from ._profiles import Profile
from ._steps import TOOL_CALL_IDS_RENAMED

__all__ = ["nine_char_id", "unique_ids"]

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


def unique_ids(messages: list[Message], ctx: Context) -> StepResult:
    profile = ctx.profile
    if ctx.unique_call_ids and not profile.unique_tool_call_ids:
        profile = replace(profile, unique_tool_call_ids=True)  # the format needs it (Responses)
    idents = [ident for m in messages for c in tool_calls(m) if (ident := call_id(c)) is not None]
    taken = set(idents)
    needs_work = profile.nine_char_ids and any(not _NINE.fullmatch(i) for i in taken)
    # Cheap check first: most requests have no repeated id at all.
    if not needs_work and (
        len(idents) == len(taken) or (not profile.unique_tool_call_ids and not _repeats_within(messages))
    ):
        return StepResult(messages)
    fates: list[Fate] = []
    return StepResult(_rename(messages, profile, taken, fates), tuple(fates))


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


def _new_ident(ident: str, profile: Profile, seen: set[str], taken: set[str]) -> str:
    """The id a call with `ident` gets, given the ids `seen` in its scope and every id `taken`."""
    new_ident = ident
    if profile.nine_char_ids and not _NINE.fullmatch(ident):
        salt = 0
        new_ident = nine_char_id(ident)
        while new_ident in seen or (new_ident in taken and new_ident != ident):
            salt += 1
            new_ident = nine_char_id(ident, salt)
    if new_ident not in seen:
        return new_ident
    if profile.nine_char_ids:
        salt = 1
        while (candidate := nine_char_id(ident, salt)) in seen or candidate in taken:
            salt += 1
        return candidate
    suffix = 2
    while _with_suffix(ident, suffix, profile.id_payload_marker) in taken:
        suffix += 1
    return _with_suffix(ident, suffix, profile.id_payload_marker)


def _rename(messages: list[Message], profile: Profile, taken: set[str], fates: list[Fate]) -> list[Message]:
    seen: set[str] = set()
    out: list[Message] = []
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
        for call in calls:
            ident = call_id(call)
            new_ident = ident if ident is None else _new_ident(ident, profile, seen, taken)
            if ident is not None and new_ident is not None:
                taken.add(new_ident)
                seen.add(new_ident)
                slots.setdefault(ident, deque()).append(new_ident)
            new_calls.append(call if new_ident == ident else {**call, "id": new_ident})
        renamed = sum(1 for a, b in zip(calls, new_calls, strict=True) if a is not b)
        if not renamed:
            out.append(message)
            continue
        out.append({**message, "tool_calls": new_calls})
        fates.append(Fate(TOOL_CALL_IDS_RENAMED, out[-1], renamed))
        while index < len(messages) and messages[index].get("role") == "tool":
            result = messages[index]
            ident = result.get("tool_call_id")
            queue = slots.get(ident) if isinstance(ident, str) else None
            if queue and (new_ident := queue.popleft()) != ident:
                result = {**result, "tool_call_id": new_ident}
                fates.append(Fate(TOOL_CALL_IDS_RENAMED, result, 0))
            out.append(result)
            index += 1
    return out if fates else messages
