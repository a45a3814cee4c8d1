"""The context-length check: the provider's own error when a prompt (plus the output it asks for)
does not fit the emulated window."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .rules import RULES_BY_ID, WIRE_DEFAULT_PROVIDER
from .tokens import requested_output_tokens
from .verdicts import Violation, violation

__all__ = ["check_context"]


def check_context(
    provider: str | None,
    wire: str,
    body: Mapping[str, Any],
    tokens: int,
    *,
    window: int,
    default_max_tokens: int = 0,
) -> Violation | None:
    """The provider's context-length error when ``tokens`` (+ the requested output) exceed ``window``."""
    name = provider or WIRE_DEFAULT_PROVIDER.get(wire, "openai")
    requested = requested_output_tokens(wire, body)
    reserve = default_max_tokens if requested is None else requested
    limit = window - reserve
    if tokens <= limit:
        return None
    values: dict[str, object] = {
        "tokens": tokens,
        "window": window,
        "limit": max(limit, 0),
        "max_tokens": reserve,
        "total": tokens + reserve,
    }
    if name == "anthropic":
        rule = RULES_BY_ID["anthropic.context_length"]
        if tokens > window:
            return Violation(rule, rule.error.format(**values))
        message = (
            f"input length and `max_tokens` exceed context limit: {tokens} + {reserve} > {window}, decrease input "
            "length or `max_tokens` and try again"
        )
        return Violation(rule, message)
    if name == "openai" and wire == "responses":
        return violation("openai.responses.context_length", "input")
    if name == "openai":
        rule = RULES_BY_ID["openai.context_length"]
        if reserve:
            message = (
                f"This model's maximum context length is {window} tokens. However, you requested {tokens + reserve} "
                f"tokens ({tokens} in the messages, {reserve} in the completion). Please reduce the length of the "
                "messages or completion."
            )
            return Violation(rule, message, "messages")
        return Violation(rule, rule.error.format(**values), "messages")
    rule = RULES_BY_ID[f"{name}.context_length"]
    return Violation(rule, rule.error.format(**values))
