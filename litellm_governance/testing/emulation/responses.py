"""The validator of OpenAI's ``/v1/responses`` ``input`` items."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .bodies import JSON, as_dicts
from .verdicts import Violation, violation

__all__ = ["validate_responses"]


_RESPONSES_CALLS: Final[Mapping[str, tuple[str, str]]] = {
    # call type: (output type, wording in the error)
    "function_call": ("function_call_output", "function call"),
    "custom_tool_call": ("custom_tool_call_output", "custom tool call"),
}
_RESPONSES_OUTPUTS: Final[Mapping[str, str]] = {out: words for out, words in _RESPONSES_CALLS.values()}


def validate_responses(body: JSON, model: str | None) -> Violation | None:
    items = as_dicts(body.get("input"))
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for item in items:
        kind = item.get("type")
        call_id = str(item.get("call_id"))
        if kind in _RESPONSES_CALLS:
            calls[call_id] = str(kind)
        elif kind in _RESPONSES_OUTPUTS:
            if call_id not in calls and not body.get("previous_response_id"):
                return violation(
                    "openai.responses.output_without_call", "input", kind=_RESPONSES_OUTPUTS[str(kind)], call_id=call_id
                )
            answered.add(call_id)
    for call_id, kind in calls.items():
        if call_id not in answered:
            return violation(
                "openai.responses.call_without_output", "input", kind=_RESPONSES_CALLS[kind][1], call_id=call_id
            )
    return None
