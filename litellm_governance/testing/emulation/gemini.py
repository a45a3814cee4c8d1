"""The validator of Google Gemini's ``models/{model}:generateContent`` ``contents``."""

from __future__ import annotations

from collections.abc import Mapping

from .bodies import JSON, as_dicts, model_name
from .verdicts import Violation, violation

__all__ = ["validate_gemini"]


def _part_kind(part: JSON) -> str | None:
    """``text`` / ``call`` / ``response`` / ``data`` for a part that carries data, ``None`` when it carries none."""
    if part.get("functionCall") is not None or part.get("function_call") is not None:
        return "call"
    if part.get("functionResponse") is not None or part.get("function_response") is not None:
        return "response"
    text = part.get("text")
    if isinstance(text, str) and text != "":
        return "text"
    data_keys = (
        "inlineData",
        "inline_data",
        "fileData",
        "file_data",
        "executableCode",
        "executable_code",
        "codeExecutionResult",
        "code_execution_result",
    )
    if any(part.get(key) is not None for key in data_keys):
        return "data"
    return None


def validate_gemini(body: JSON, model: str | None) -> Violation | None:
    contents = as_dicts(body.get("contents"))
    for index, content in enumerate(contents):
        parts = as_dicts(content.get("parts"))
        if not parts:
            return violation("gemini.empty_parts", index=index)
        for position, part in enumerate(parts):
            if _part_kind(part) is None:
                return violation("gemini.empty_part", index=index, part=position)
    kinds = [[_part_kind(part) for part in as_dicts(content.get("parts"))] for content in contents]
    for index in range(len(contents)):
        calls = kinds[index].count("call")
        responses = kinds[index].count("response")
        if calls:
            previous_ok = index > 0 and contents[index - 1].get("role") in ("user", "function")
            if not previous_ok:
                return violation("gemini.call_after_user")
            if index + 1 < len(contents) and kinds[index + 1].count("response") != calls:
                return violation("gemini.response_count")
        if responses:
            if index == 0 or "call" not in kinds[index - 1]:
                return violation("gemini.response_after_call")
            if kinds[index - 1].count("call") != responses:
                return violation("gemini.response_count")
    if model_name(body, model).startswith("gemini-3"):
        current = 0
        for index, content in enumerate(contents):
            if content.get("role") == "user" and "text" in kinds[index] and "response" not in kinds[index]:
                current = index
        for index in range(current, len(contents)):
            parts = as_dicts(contents[index].get("parts"))
            first_call = next((part for part in parts if _part_kind(part) == "call"), None)
            if first_call is None:
                continue
            if not (first_call.get("thoughtSignature") or first_call.get("thought_signature")):
                call = first_call.get("functionCall") or first_call.get("function_call") or {}
                name = call.get("name") if isinstance(call, Mapping) else None
                return violation("gemini.thought_signature", name=name, position=index + 1)
    return None
