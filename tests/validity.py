"""What a provider accepts, written independently of the implementation, for property tests."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

Messages = list[dict[str, Any]]


def _calls(message: Mapping[str, Any]) -> list[Any]:
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def problems(messages: Messages, profile: str, *, prefill: bool = False) -> list[str]:
    """Every rule of `profile` that `messages` breaks (empty when the provider would accept it)."""
    found: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        role = message.get("role")
        if role == "tool":
            found.append(f"[{index}] tool result not directly after its call's block")
            index += 1
            continue
        if role == "assistant":
            calls = _calls(message)
            if "tool_calls" in message and not calls:
                found.append(f"[{index}] tool_calls present but empty or not a list")
            for call in calls:
                if not (isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]):
                    found.append(f"[{index}] tool call without an id")
                function = call.get("function") if isinstance(call, dict) else None
                if not (isinstance(function, dict) and isinstance(function.get("name"), str) and function["name"]):
                    found.append(f"[{index}] tool call without a name")
            if not calls and _empty(message.get("content")):
                found.append(f"[{index}] assistant message with neither content nor tool calls")
            expected = [c.get("id") for c in calls if isinstance(c, dict)]
            answered: list[Any] = []
            index += 1
            while index < len(messages) and messages[index].get("role") == "tool":
                answered.append(messages[index].get("tool_call_id"))
                if messages[index].get("content") is None:
                    found.append(f"[{index}] tool result with null content")
                index += 1
            if sorted(map(str, answered)) != sorted(map(str, expected)):
                found.append(f"[{index}] calls {expected} answered by {answered}")
            continue
        if role in ("user", "system", "developer") and message.get("content") is None:
            found.append(f"[{index}] {role} message with null content")
        index += 1

    if profile == "permissive":
        return found
    non_system = [m for m in messages if m.get("role") not in ("system", "developer")]
    if non_system and non_system[0].get("role") != "user":
        found.append(f"first non-system message is {non_system[0].get('role')}, not user")
    # Adjacent in the list: a system message between two assistant messages separates them (LiteLLM
    # turns it into a user turn for Anthropic, and merges the two itself for Gemini).
    for previous, current in itertools.pairwise(messages):
        if previous.get("role") == current.get("role") and current.get("role") in ("user", "assistant"):
            found.append(f"consecutive {current.get('role')} messages")
    if non_system and non_system[-1].get("role") == "assistant" and not prefill:
        found.append("ends with an assistant message (prefill) the model rejects")
    if profile == "anthropic":
        ids = [c.get("id") for m in messages for c in _calls(m) if isinstance(c, dict)]
        if len(ids) != len(set(ids)):
            found.append("tool-call ids repeat")
    return found


def _empty(content: object) -> bool:
    return content is None or (isinstance(content, str) and not content.strip()) or content == []


def text_of(content: object) -> str:
    """All the text in a content value, for 'is it still there' checks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(p.get("text")) if isinstance(p, dict) else text_of(p) for p in content)
    return "" if content is None else str(content)
