"""Reading request bodies as providers do: helpers the validators share (message lists, tool-call
ids, the model's name, the thinking switch, the first tool-pairing defect of a chat history)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "JSON",
    "as_dicts",
    "chat_is_empty",
    "chat_pairing",
    "messages_of",
    "model_name",
    "thinking_type",
    "tool_call_ids",
]

#: A JSON object of a request body.

JSON = Mapping[str, Any]


def as_dicts(value: object) -> list[JSON]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def chat_is_empty(content: object) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return content == ""
    if isinstance(content, list):
        return all(
            isinstance(part, Mapping) and part.get("type") == "text" and not part.get("text") for part in content
        )
    return False


def tool_call_ids(message: JSON) -> list[str]:
    return [str(call.get("id")) for call in as_dicts(message.get("tool_calls"))]


def thinking_type(body: JSON) -> str | None:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping):
        kind = thinking.get("type")
        return kind if isinstance(kind, str) else None
    return None


def model_name(body: JSON, model: str | None) -> str:
    name = model if model is not None else body.get("model")
    return name.lower().rsplit("/", 1)[-1] if isinstance(name, str) else ""


def chat_pairing(messages: Sequence[JSON]) -> tuple[str, int, list[str]] | None:
    """The first tool-pairing defect of an OpenAI-style history.

    ``("unanswered", i, ids)``: the assistant message ``i`` has calls not answered by the tool
    messages directly after it. ``("orphan", i, [id])``: the tool message ``i`` answers no call of
    the assistant message before the run of tool messages it belongs to.
    """
    owner = -1
    expected: list[str] = []
    answered: set[str] = set()
    open_zone = False
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if not open_zone or call_id not in expected:
                return "orphan", index, [call_id]
            answered.add(call_id)
            continue
        if open_zone:
            missing = [call_id for call_id in expected if call_id not in answered]
            if missing:
                return "unanswered", owner, missing
        open_zone = False
        if role == "assistant" and message.get("tool_calls"):
            owner, expected, answered, open_zone = index, tool_call_ids(message), set(), True
    if open_zone:
        missing = [call_id for call_id in expected if call_id not in answered]
        if missing:
            return "unanswered", owner, missing
    return None


def messages_of(body: JSON) -> list[JSON]:
    return as_dicts(body.get("messages"))
