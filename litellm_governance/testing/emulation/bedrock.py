"""The validator of Bedrock's ``/model/{model}/converse`` ``messages``."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Final

from .bodies import JSON, as_dicts, messages_of
from .verdicts import Violation, violation

__all__ = ["validate_bedrock"]


_BEDROCK_CONVERSATION_BLOCKS: Final = frozenset({"text", "image", "document", "video"})


def _converse_ids(blocks: Sequence[JSON], kind: str) -> list[str]:
    ids: list[str] = []
    for block in blocks:
        inner = block.get(kind)
        if isinstance(inner, Mapping):
            ids.append(str(inner.get("toolUseId")))
    return ids


def validate_bedrock(body: JSON, model: str | None) -> Violation | None:
    messages = messages_of(body)
    contents = [as_dicts(message.get("content")) for message in messages]
    uses_tools = any(
        block.get("toolUse") is not None or block.get("toolResult") is not None
        for blocks in contents
        for block in blocks
    )
    if uses_tools and not isinstance(body.get("toolConfig"), Mapping):
        return violation("bedrock.tool_config")
    if messages and messages[0].get("role") != "user":
        return violation("bedrock.first_user")
    for previous, current in itertools.pairwise(messages):
        if previous.get("role") == current.get("role"):
            return violation("bedrock.alternation")
    for index, blocks in enumerate(contents):
        if not blocks:
            return violation("bedrock.empty_content", index=index)
        for position, block in enumerate(blocks):
            if "text" in block and (not isinstance(block.get("text"), str) or not str(block.get("text")).strip()):
                return violation("bedrock.blank_text", index=index, block=position)
    for index, blocks in enumerate(contents):
        role = messages[index].get("role")
        if role == "assistant":
            uses = _converse_ids(blocks, "toolUse")
            if uses:
                answered = _converse_ids(contents[index + 1], "toolResult") if index + 1 < len(contents) else []
                missing = [tool_id for tool_id in uses if tool_id not in answered]
                if missing:
                    return violation("bedrock.tool_use_unanswered", index=index + 1, ids=", ".join(missing))
        elif role == "user":
            results = _converse_ids(blocks, "toolResult")
            if results:
                prior_uses = _converse_ids(contents[index - 1], "toolUse") if index > 0 else []
                if len(results) > len(prior_uses) or any(tool_id not in prior_uses for tool_id in results):
                    return violation("bedrock.tool_result_orphan", index=index)
                if any(key in block for block in blocks for key in _BEDROCK_CONVERSATION_BLOCKS):
                    return violation("bedrock.mixed_tool_result_turn", index=index)
    model_id = (model or "").lower()
    if messages and messages[-1].get("role") == "assistant" and "anthropic." not in model_id:
        return violation("bedrock.last_user")
    return None
