"""Small, pure helpers over OpenAI chat-format messages (plain dicts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

from ._errors import InvalidRequestError

__all__ = [
    "Message",
    "call_id",
    "call_name",
    "content_chars",
    "has_cache_control",
    "is_empty_content",
    "is_system",
    "merge_content",
    "tool_calls",
    "validate_messages",
    "validate_tools",
]

Message: TypeAlias = dict[str, Any]

SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def validate_messages(messages: object) -> list[Message]:
    """Check that `messages` is a chat message list; return it typed. Damage inside is fine."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidRequestError(f"messages must be a list of message dicts, got {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidRequestError(
                f"messages[{index}] must be a dict like {{'role': 'user', 'content': '...'}}, "
                f"got {type(message).__name__}"
            )
    return list(messages)


def validate_tools(tools: object) -> list[Any] | None:
    """Check the request's `tools`: None or a list of schemas."""
    if tools is None:
        return None
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidRequestError(f"tools must be a list of tool schemas or None, got {type(tools).__name__}")
    return list(tools)


def is_system(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return isinstance(role, str) and role in SYSTEM_ROLES


def tool_calls(message: Mapping[str, Any]) -> list[Any]:
    """The assistant message's tool calls ([] when absent or not a list)."""
    calls = message.get("tool_calls")
    return calls if type(calls) is list else []


def call_id(call: object) -> str | None:
    """A tool call's id, when it is a non-empty string."""
    if type(call) is dict or isinstance(call, Mapping):
        ident = call.get("id")
        if type(ident) is str and ident:
            return ident
    return None


def call_name(call: object) -> str | None:
    """A tool call's function name, when it is a non-empty string."""
    if type(call) is dict or isinstance(call, Mapping):
        function = call.get("function")
        if type(function) is dict or isinstance(function, Mapping):
            name = function.get("name")
            if type(name) is str and name:
                return name
    return None


def content_chars(content: object) -> int:
    """Characters of text in a message's content (text parts only for lists)."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                total += len(part["text"])
            elif isinstance(part, str):
                total += len(part)
        return total
    return 0


def is_empty_content(content: object) -> bool:
    """No content at all: None, an empty or blank string, or an empty list."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return not content
    return False


def has_cache_control(message: Mapping[str, Any]) -> bool:
    """Whether the message carries an explicit prompt-cache breakpoint (on itself or a part)."""
    if message.get("cache_control"):
        return True
    content = message.get("content")
    if type(content) is list:
        return any((type(part) is dict or isinstance(part, Mapping)) and part.get("cache_control") for part in content)
    return False


def _as_parts(content: object) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, Mapping):
        return [content]  # a lone part: kept as it is
    return [{"type": "text", "text": str(content) if isinstance(content, (int, float, bool)) else repr(type(content))}]


def merge_content(first: object, second: object) -> object:
    """Both contents, in order, losing nothing: strings joined by a blank line, lists concatenated."""
    if first is None or first == "":
        return second if second is not None else first
    if second is None or second == "":
        return first
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    return _as_parts(first) + _as_parts(second)
