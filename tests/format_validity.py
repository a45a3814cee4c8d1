"""What the Anthropic Messages API and the OpenAI Responses API accept, written from their
documented errors (docs/providers/), independently of the implementation, for the format tests."""

from __future__ import annotations

import itertools
from typing import Any

Body = list[dict[str, Any]]


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _blank(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text") or "").strip()


def _compaction_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "compaction" and block.get("content") is not None


def anthropic_problems(messages: Body, *, prefill: bool = False, unique_ids: bool = True) -> list[str]:
    """Every rule of the Anthropic Messages API that `messages` breaks. With a compaction block
    (one whose content is not null) the API reads from the turn holding the newest one on."""
    found: list[str] = []
    opened = next(
        (i for i in range(len(messages) - 1, -1, -1) if any(map(_compaction_block, _blocks(messages[i])))), -1
    )
    if opened >= 0:
        messages = messages[opened:]
    if messages and messages[0].get("role") != "user" and opened < 0:
        found.append("first message is not a user message")
    for index, (previous, current) in enumerate(itertools.pairwise(messages), 1):
        if previous.get("role") == current.get("role"):
            found.append(f"messages.{index}: roles must alternate")
    ids: list[Any] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content")
        if role not in ("user", "assistant"):
            found.append(f"messages.{index}: role {role!r}")
        last = index == len(messages) - 1
        if (content in ("", None, []) or (isinstance(content, str) and not content.strip())) and not (
            last and role == "assistant"
        ):
            found.append(f"messages.{index}: all messages must have non-empty content")
        if any(_blank(b) for b in _blocks(message)):
            found.append(f"messages.{index}: text content blocks must be non-empty")
        uses = [b for b in _blocks(message) if isinstance(b, dict) and b.get("type") == "tool_use"]
        results = [b for b in _blocks(message) if isinstance(b, dict) and b.get("type") == "tool_result"]
        if role == "user":
            first_other = next(
                (
                    i
                    for i, b in enumerate(_blocks(message))
                    if not (isinstance(b, dict) and b.get("type") == "tool_result")
                ),
                None,
            )
            if first_other is not None and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in _blocks(message)[first_other:]
            ):
                found.append(f"messages.{index}: tool_result blocks must come first")
            previous_uses = (
                [
                    b.get("id")
                    for b in _blocks(messages[index - 1])
                    if isinstance(b, dict) and b.get("type") == "tool_use"
                ]
                if index and messages[index - 1].get("role") == "assistant"
                else []
            )
            answered = [b.get("tool_use_id") for b in results]
            for ident in answered:
                if ident not in previous_uses:
                    found.append(f"messages.{index}: unexpected tool_use_id found in tool_result blocks: {ident}")
            if len(answered) != len(set(answered)):
                found.append(f"messages.{index}: duplicate tool_result")
        if role == "assistant":
            if results:
                found.append(f"messages.{index}: tool_result in an assistant message")
            ids.extend(b.get("id") for b in uses)
            if uses:
                following = messages[index + 1] if index + 1 < len(messages) else None
                answered = (
                    {
                        b.get("tool_use_id")
                        for b in _blocks(following)
                        if isinstance(b, dict) and b.get("type") == "tool_result"
                    }
                    if following is not None and following.get("role") == "user"
                    else set()
                )
                missing = [b.get("id") for b in uses if b.get("id") not in answered]
                if missing:
                    found.append(f"messages.{index}: tool_use ids were found without tool_result blocks: {missing}")
            for block in uses:
                if not (isinstance(block.get("id"), str) and block["id"] and isinstance(block.get("name"), str)):
                    found.append(f"messages.{index}: tool_use without id or name")
    if unique_ids and len(ids) != len(set(map(str, ids))):
        found.append("tool_use ids must be unique")
    if messages and messages[-1].get("role") == "assistant" and not prefill:
        found.append("This model does not support assistant message prefill")
    return found


_CALL_OUTPUT = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "local_shell_call_output",
}


def responses_problems(items: Any, *, stored_calls: frozenset[str] = frozenset()) -> list[str]:
    """Every pairing rule of the Responses API that `items` breaks: "No tool output found for
    function call <id>", "No tool call found for function call output with call_id <id>";
    `stored_calls` are calls held upstream (previous_response_id). The items before the newest
    compaction item are what it replaced and are not checked."""
    if isinstance(items, str):
        return []
    compactions = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
    if compactions:  # the items before the newest compaction are what it replaced
        items = items[compactions[-1] :]
    found: list[str] = []
    calls: dict[str, str] = {}
    outputs: dict[str, int] = {}
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind in _CALL_OUTPUT:
            ident = item.get("call_id")
            if ident in calls:
                found.append(f"input[{index}]: duplicate call_id {ident}")
            calls[ident] = kind
        elif isinstance(kind, str) and kind.endswith("_call_output"):
            ident = item.get("call_id")
            if ident not in calls and ident not in stored_calls:
                found.append(f"input[{index}]: No tool call found for function call output with call_id {ident}")
            elif ident in calls and _CALL_OUTPUT[calls[ident]] != kind:
                found.append(f"input[{index}]: {kind} answers a {calls[ident]}")
            outputs[ident] = outputs.get(ident, 0) + 1
    for ident in calls:
        if ident not in outputs:
            found.append(f"No tool output found for function call {ident}")
        elif outputs[ident] > 1:
            found.append(f"more than one output for call {ident}")
    return found
