"""What a provider accepts, written independently of the implementation, for property tests.

The rules come from the providers' documented errors (docs/providers/), not from the plugin's code.
"""

from __future__ import annotations

import itertools
import re
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
            if not calls and empty(message.get("content")):
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

    for index, message in enumerate(messages):  # every provider: which result answers which call?
        if message.get("role") != "assistant":
            continue
        ids = [c.get("id") for c in _calls(message) if isinstance(c, dict)]
        if len(ids) != len(set(map(str, ids))):
            found.append(f"[{index}] tool-call ids repeat inside one message")
    if profile == "permissive":
        return found
    non_system = [m for m in messages if m.get("role") not in ("system", "developer")]
    if messages and not non_system:  # GLM 1214, "A conversation must start with a user message"
        found.append("system messages only: no user message")
    if non_system and non_system[0].get("role") != "user":
        found.append(f"first non-system message is {non_system[0].get('role')}, not user")
    seen_conversation = False
    for index, message in enumerate(messages):
        if message.get("role") in ("system", "developer"):
            if seen_conversation:  # GLM, vLLM templates, Mistral after tool/assistant; Gemini/Claude move it
                found.append(f"[{index}] system message in the middle of the conversation")
        else:
            seen_conversation = True
        if message.get("role") in ("user", "assistant", "system") and _has_blank_text(message.get("content")):
            found.append(f"[{index}] blank text part")
        if message.get("role") == "user" and empty(message.get("content")):
            found.append(f"[{index}] empty user message")
    # Once system messages are set aside (providers move them out), no two user or two assistant
    # turns may touch.
    turns = [m for m in messages if m.get("role") not in ("system", "developer")]
    for previous, current in itertools.pairwise(turns):
        if previous.get("role") == current.get("role") and current.get("role") in ("user", "assistant"):
            found.append(f"consecutive {current.get('role')} messages")
    if non_system and non_system[-1].get("role") == "assistant" and not prefill:
        found.append("ends with an assistant message (prefill) the model rejects")
    if profile in ("anthropic", "bedrock", "bedrock_claude", "mistral"):
        ids = [c.get("id") for m in messages for c in _calls(m) if isinstance(c, dict)]
        if len(ids) != len(set(ids)):
            found.append("tool-call ids repeat")
    if profile == "mistral":  # "Tool call id was X but must be a-z, A-Z, 0-9, with a length of 9."
        for message in messages:
            for ident in [c.get("id") for c in _calls(message) if isinstance(c, dict)] + [message.get("tool_call_id")]:
                if ident is not None and not re.fullmatch(r"[A-Za-z0-9]{9}", str(ident)):
                    found.append(f"tool-call id {ident!r} is not 9 letters and digits")
    if profile in ("mistral", "bedrock", "bedrock_claude"):  # 3230 / "cannot be provided in the same turn"
        for previous, current in itertools.pairwise(messages):
            if previous.get("role") == "tool" and current.get("role") == "user":
                found.append("user message right after tool results")
    if profile in ("deepseek", "moonshot"):  # "The reasoning_content in the thinking mode must be passed back"
        for index, message in enumerate(messages):
            if message.get("role") != "assistant" or (profile == "moonshot" and not _calls(message)):
                continue
            if not isinstance(message.get("reasoning_content"), str) or not message["reasoning_content"]:
                found.append(f"[{index}] assistant message without reasoning_content")
    return found


def _has_blank_text(content: object) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "text" and not str(p.get("text") or "").strip() for p in content
    )


def empty(content: object) -> bool:
    """No content a provider could show: None, blank text, or only blank text parts."""
    if isinstance(content, list):
        return all(
            isinstance(p, dict) and p.get("type") == "text" and not str(p.get("text") or "").strip() for p in content
        )
    return content is None or (isinstance(content, str) and not content.strip())


def text_of(content: object) -> str:
    """All the text in a content value, for 'is it still there' checks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(p.get("text")) if isinstance(p, dict) else text_of(p) for p in content)
    return "" if content is None else str(content)
