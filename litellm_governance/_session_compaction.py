"""Codex's remote compaction, for deployments that cannot compact (docs/codex-compaction.md). Pure.

Codex CLI (0.169.0) with the built-in provider compacts by sending a ``/v1/responses`` request whose
last input item is ``{"type": "compaction_trigger"}``, requires exactly one output item ``{"type":
"compaction", "id": "cmp_…", "encrypted_content": "…"}``, and sends that item back, byte for byte, on
later requests. Only OpenAI's (and Azure's) own Responses API does this; for every other deployment the
trigger becomes an ordinary summary request (`summary_request`), the summary one compaction item
holding the gateway's own token (`compaction_item`: `TOKEN_PREFIX`, then the summary compressed and
base64-encoded; no secret needed: a client can write any message anyway), and on later requests each
of the gateway's own items a user message holding its summary (`read_back`). An item without the
prefix is another server's: never decoded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._calls import calls_by_id
from ._models import split_provider
from ._responses import ResponsesOutline
from ._tokens import TokenCounter, encoding_for_model, token_cache
from ._trace import render_note, unit_entries

#: The input item that asks for a compaction (OpenAI: "Must be the final input item").
TRIGGER: Final = "compaction_trigger"
#: How the gateway's ``encrypted_content`` begins: its name and the token's version.
TOKEN_PREFIX: Final = "litellm-governance.compaction.v1:"
#: At most this many characters of summary come out of a token (a guard against a crafted one).
MAX_SUMMARY_CHARS: Final = 1_000_000
#: The note's room, in tokens, when it stands for the whole session (`session_note`).
NOTE_TOKENS: Final = 3_000
#: The instruction the summary request ends with. Its words are those of Codex's own local
#: compaction ("CONTEXT CHECKPOINT COMPACTION", "handoff summary"), which agents' models know.
INSTRUCTION: Final = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Write a handoff summary of this session for "
    "the agent that will resume it from the summary alone: the user's task and instructions, what was "
    "done (files read and changed, commands run and what came of them, errors above all), what was "
    "found and decided, and what is still to do next. Plain text, no tool calls, no preamble."
)
#: The first line of the message a summary becomes on later requests.
SUMMARY_OPENING: Final = (
    "[Session summary: the earlier part of this session was compacted; this is what it did. "
    "Continue the task from here.]"
)
_SUMMARY_BLOCK: Final = re.compile(r"<summary>(.*?)</summary>", re.DOTALL)
# Request fields that do not belong in a summary request: it calls no tool, compacts nothing, and
# writes plain text without reasoning (a thinking Claude, reached through LiteLLM's translation, would
# also want its tool turns to open with the thinking blocks the translation cannot carry).
_DROPPED: Final = (
    "tool_choice",
    "parallel_tool_calls",
    "context_management",
    "previous_response_id",
    "reasoning",
    "include",
)


def is_trigger_request(request: Mapping[str, Any]) -> bool:
    """Whether `request` (a Responses body) asks for a compaction: its last input item is the trigger."""
    items = request.get("input")
    return isinstance(items, list) and bool(items) and _is_type(items[-1], TRIGGER)


def _is_type(item: object, kind: str) -> bool:
    return isinstance(item, Mapping) and item.get("type") == kind


def summary_request(request: Mapping[str, Any], *, note: str | None = None) -> dict[str, Any]:
    """The summary request a compaction request becomes: its history (triggers left out), then a
    user message with `INSTRUCTION`; no tools. With `note` (the gateway answers with it and asks no
    model) the history is that note alone, so nothing large is governed or sent on."""
    items = request.get("input")
    history = [item for item in items if not _is_type(item, TRIGGER)] if isinstance(items, list) else []
    if note is not None:
        history = [_user_message(note)]
    out = {key: value for key, value in request.items() if key not in _DROPPED}
    out["input"] = [*history, _user_message(INSTRUCTION)]
    out["tools"] = []
    return out


def _user_message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def encode_summary(summary: str) -> str:
    """The gateway's ``encrypted_content`` for `summary`: `TOKEN_PREFIX` and the summary, compressed
    and base64-encoded (URL-safe, no padding)."""
    packed = zlib.compress(summary.encode("utf-8"), 9)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")


def decode_summary(content: object) -> str | None:
    """The summary in a token `encode_summary` wrote; None for anything else — another server's
    content (no prefix: never decoded), or a token that does not decode."""
    if not isinstance(content, str) or not content.startswith(TOKEN_PREFIX):
        return None
    data = content[len(TOKEN_PREFIX) :]
    try:
        packed = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_SUMMARY_CHARS * 4)
        if inflater.unconsumed_tail or not inflater.eof:
            return None  # larger than any summary this gateway writes, or cut short
        return raw.decode("utf-8")
    except (binascii.Error, ValueError, zlib.error, UnicodeDecodeError):
        return None


def compaction_item(summary: str) -> dict[str, Any]:
    """The one output item answering a compaction request: ``type: compaction``, an id that is a
    digest of the summary (no clock, no randomness), and the summary as the gateway's token."""
    digest = hashlib.sha256(summary.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return {"type": "compaction", "id": f"cmp_{digest}", "encrypted_content": encode_summary(summary)}


def read_back(items: object) -> list[Any] | None:
    """`items` (a Responses ``input``) with each of the gateway's own compaction items replaced by a
    user message holding its summary, every other item as it came; None when there is none of ours."""
    if not isinstance(items, list):
        return None
    summaries = [decode_summary(i.get("encrypted_content")) if _is_type(i, "compaction") else None for i in items]
    if all(summary is None for summary in summaries):
        return None
    return [
        item if summary is None else _user_message(f"{SUMMARY_OPENING}\n\n{summary}")
        for item, summary in zip(items, summaries, strict=True)
    ]


def summary_of_answer(text: object) -> str | None:
    """The summary in a model's answer: the text of its ``<summary>`` block if it wrote one (as
    agents' prompts often ask), else the whole text; None when there is no text."""
    if not isinstance(text, str):
        return None
    found = _SUMMARY_BLOCK.search(text)
    summary = (found.group(1) if found else text).strip()
    return summary or None


@dataclass(frozen=True)
class Session:
    """What the gateway knows of a session it compacts, without asking a model."""

    #: Its deterministic note (`session_note`).
    note: str
    #: Its history's tokens (tiktoken, in the model's encoding; the trigger aside).
    tokens: int


def session_note(items: Sequence[Any], model: str, *, tokens: int = NOTE_TOKENS, cache_size: int = 65_536) -> Session:
    """The deterministic note of a whole session (what governance writes for cut turns, `_trace`):
    each call with its main argument and outcome, what the user and the assistant said, the oldest
    folded into counts beyond `tokens`; and the session's size. A session compacted before goes on
    from its summary: the note opens with it (its newest `4 * tokens` characters) and lists what
    came after. Never empty."""
    history = [item for item in items if not _is_type(item, TRIGGER)]
    start, earlier = 0, ""
    for index, item in enumerate(history):
        text = _summary_text(item)
        if text is not None:
            start, earlier = index + 1, text
    counter = TokenCounter(encoding_for_model(model), token_cache(cache_size))
    size = sum(map(counter.message, ResponsesOutline(history).view))
    view = ResponsesOutline(history[start:]).view
    results = {m["tool_call_id"]: m for m in view if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)}
    entries = unit_entries(view, 0, len(view), calls=calls_by_id(view), results=results)
    turns = sum(1 for m in view if m.get("role") == "assistant")
    note = render_note(entries, max(turns, 1), tokens, counter) if entries else None
    if earlier:
        kept = earlier if len(earlier) <= 4 * tokens else "…" + earlier[-4 * tokens :]
        return Session(f"{kept}\n\n{note}" if note else kept, size)
    return Session(note or f"[Context note: {turns} earlier turns; nothing of them could be listed.]", size)


def text_tokens(text: str, model: str) -> int:
    """The tokens of `text` (tiktoken, in `model`'s encoding): a summary's size."""
    return TokenCounter(encoding_for_model(model), token_cache(0)).text(text)  # (counted once: no cache)


def _summary_text(item: object) -> str | None:
    """The summary a message of `read_back` holds (without its opening line); None for any other item."""
    if not isinstance(item, Mapping) or item.get("role") != "user":
        return None
    content = item.get("content")
    first = content[0] if isinstance(content, list) and content else None
    text = first.get("text") if isinstance(first, Mapping) else content
    if not isinstance(text, str) or not text.startswith(SUMMARY_OPENING):
        return None
    return text[len(SUMMARY_OPENING) :].strip()


def for_explain(request: dict[str, Any], model: str, provider: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """What the proxy does to a Responses body before governing it, for ``explain``: its own items read
    back, and a compaction request for a deployment without compaction of its own (every one but
    OpenAI's and Azure's) turned into the summary request it sends; and a line saying so for each."""
    lines: list[str] = []
    replaced = read_back(request.get("input"))
    if replaced is not None:
        request = {**request, "input": replaced}
        lines.append("the gateway's compaction items are read back as user messages holding their summaries")
    if is_trigger_request(request) and split_provider(model, provider)[0] not in ("openai", "azure"):
        request = summary_request(request)
        lines.append(
            "compacted_session: a compaction request (compaction_trigger) the gateway answers with one compaction "
            "item, from the summary the model writes for the summary request below (or the note, in note mode)"
        )
    return request, lines
