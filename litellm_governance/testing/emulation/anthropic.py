"""The validator of Anthropic's ``/v1/messages``, and the signature the emulated Anthropic gives a
thinking block (`sign_thinking`)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Final

from .bodies import JSON, as_dicts, messages_of, model_name, thinking_type
from .verdicts import Violation, violation

__all__ = ["sign_thinking", "validate_anthropic"]


_NO_PREFILL: Final = re.compile(
    r"claude-(?:opus|sonnet)-4-[6-9]|claude-(?:opus|sonnet|haiku|fable)-[5-9]|claude-fable|fable-5"
)


def sign_thinking(thinking: str) -> str:
    """The signature the emulated Anthropic gives a thinking block with this text.

    A request whose ``thinking`` block carries any other signature (or whose text was edited
    after signing) is rejected with "Invalid `signature` in `thinking` block".
    """
    digest = hashlib.sha256(b"litellm-governance-emulator\x00" + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def _anthropic_blocks(content: object) -> list[JSON]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return as_dicts(content)


def _anthropic_text_problem(blocks: Sequence[JSON]) -> str | None:
    for block in blocks:
        if block.get("type") != "text":
            continue
        text = block.get("text")
        if not isinstance(text, str) or text == "":
            return "empty"
        if not text.strip():
            return "whitespace"
    return None


def _context_management_problem(body: JSON) -> Violation | None:
    management = body.get("context_management")
    edits = as_dicts(management.get("edits")) if isinstance(management, Mapping) else []
    kinds = [edit.get("type") for edit in edits]
    if "clear_thinking_20251015" in kinds:
        if thinking_type(body) not in ("enabled", "adaptive"):
            return violation("anthropic.clear_thinking_needs_thinking")
        if kinds[0] != "clear_thinking_20251015":
            return violation("anthropic.clear_thinking_first")
    return None


def validate_anthropic(body: JSON, model: str | None) -> Violation | None:
    refused = _context_management_problem(body)
    if refused is not None:
        return refused
    messages = messages_of(body)
    opened = bool(messages) and any(
        b.get("type") == "compaction" for b in _anthropic_blocks(messages[0].get("content"))
    )
    if messages and messages[0].get("role") != "user" and not opened:  # a compaction turn may open the history
        return violation("anthropic.first_user")
    for previous, current in itertools.pairwise(messages):
        if previous.get("role") == current.get("role"):
            return violation("anthropic.alternation", role=str(current.get("role")))
    for index, message in enumerate(messages):
        content = message.get("content")
        final_assistant = index == len(messages) - 1 and message.get("role") == "assistant"
        if (content in ("", [])) and not final_assistant:
            return violation("anthropic.empty_content", index=index)
    system = body.get("system")
    system_blocks = _anthropic_blocks(system) if isinstance(system, list) else []
    problem = _anthropic_text_problem(system_blocks)
    if problem is not None:
        return violation(f"anthropic.{problem}_text", where="system")
    for message in messages:
        content = message.get("content")
        if content == "":
            continue
        problem = _anthropic_text_problem(_anthropic_blocks(content))
        if problem is not None:
            return violation(f"anthropic.{problem}_text", where="messages")
    seen: set[str] = set()
    for index, message in enumerate(messages):
        for position, block in enumerate(_anthropic_blocks(message.get("content"))):
            if block.get("type") == "tool_use":
                tool_id = str(block.get("id"))
                if tool_id in seen:
                    return violation("anthropic.duplicate_tool_use_id", index=index, block=position)
                seen.add(tool_id)
    for index, message in enumerate(messages):
        blocks = _anthropic_blocks(message.get("content"))
        previous_ids: list[str] = []
        if index > 0 and messages[index - 1].get("role") == "assistant":
            previous_ids = [
                str(b.get("id"))
                for b in _anthropic_blocks(messages[index - 1].get("content"))
                if b.get("type") == "tool_use"
            ]
        if message.get("role") == "user":
            for position, block in enumerate(blocks):
                if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in previous_ids:
                    return violation(
                        "anthropic.tool_result_orphan", index=index, block=position, id=str(block.get("tool_use_id"))
                    )
        if message.get("role") != "assistant":
            continue
        ids = [str(block.get("id")) for block in blocks if block.get("type") == "tool_use"]
        if not ids:
            continue
        following = _anthropic_blocks(messages[index + 1].get("content")) if index + 1 < len(messages) else []
        leading: list[str] = []
        later: list[str] = []
        in_lead = True
        for block in following:
            if block.get("type") != "tool_result":
                in_lead = False
                continue
            (leading if in_lead else later).append(str(block.get("tool_use_id")))
        missing = [tool_id for tool_id in ids if tool_id not in leading]
        if missing:
            rule = (
                "anthropic.tool_result_not_first"
                if all(m in later for m in missing)
                else "anthropic.tool_use_unanswered"
            )
            return violation(rule, index=index, ids=", ".join(missing))
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last_assistant is not None:
        blocks = _anthropic_blocks(messages[last_assistant].get("content"))
        for position, block in enumerate(blocks):
            if block.get("type") == "thinking":
                text = block.get("thinking")
                signature = block.get("signature")
                if not isinstance(text, str) or signature != sign_thinking(text):
                    return violation("anthropic.thinking_signature", index=last_assistant, block=position)
        tool_loop_open = (
            last_assistant == len(messages) - 2
            and any(b.get("type") == "tool_use" for b in blocks)
            and any(b.get("type") == "tool_result" for b in _anthropic_blocks(messages[-1].get("content")))
        )
        if thinking_type(body) in ("enabled", "adaptive") and tool_loop_open and blocks:
            first = str(blocks[0].get("type"))
            if first not in ("thinking", "redacted_thinking"):
                return violation("anthropic.thinking_first", index=last_assistant, found=first)
    if messages and messages[-1].get("role") == "assistant" and _NO_PREFILL.search(model_name(body, model)):
        return violation("anthropic.no_prefill")
    return None
