"""`Emulator`: one emulated provider (its rules, a context window, a tokenizer ratio) deciding what it
answers to a request body received on one wire."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checks import validate
from .context import check_context
from .rules import NATIVE_WIRES, PROVIDERS, RULES, Rule
from .tokens import count_prompt_tokens
from .verdicts import Rejection, error_response

__all__ = ["Emulator"]


@dataclass(frozen=True)
class Emulator:
    """One emulated provider: its rules, a context window and a tokenizer ratio.

    ``provider`` ``None`` enforces no rules, only the window (answered in the format of the
    endpoint the request came to). ``window`` ``None`` disables the context-length check.
    ``default_max_tokens`` is the output reserve when the request states none.
    """

    provider: str | None = None
    window: int | None = None
    token_rate: float = 1.0
    default_max_tokens: int = 0

    def __post_init__(self) -> None:
        if self.provider is not None and self.provider not in PROVIDERS:
            raise ValueError(f"unknown provider {self.provider!r}; known: {', '.join(PROVIDERS)}")
        if self.token_rate <= 0:
            raise ValueError("token_rate must be positive")
        if self.window is not None and self.window <= 0:
            raise ValueError("window must be positive")

    def applies_to(self, wire: str) -> bool:
        """Whether the provider's rules cover requests on ``wire``."""
        return self.provider is None or wire in NATIVE_WIRES[self.provider]

    def count(self, wire: str, body: Mapping[str, Any]) -> int:
        """The prompt's size as this provider counts it."""
        return count_prompt_tokens(wire, body, self.token_rate)

    def check(self, wire: str, body: Mapping[str, Any], model: str | None = None) -> tuple[Rejection | None, int]:
        """``(rejection or None, prompt tokens)`` for a request received on ``wire``."""
        tokens = self.count(wire, body)
        if not self.applies_to(wire):
            return None, tokens
        if self.provider is not None:
            violation = validate(self.provider, wire, body, model)
            if violation is not None:
                return error_response(self.provider, wire, violation), tokens
        if self.window is not None:
            violation = check_context(
                self.provider, wire, body, tokens, window=self.window, default_max_tokens=self.default_max_tokens
            )
            if violation is not None:
                return error_response(self.provider, wire, violation), tokens
        return None, tokens

    def rules(self) -> list[Rule]:
        """The rules this emulator enforces (all providers' when ``provider`` is ``None``: none)."""
        return [rule for rule in RULES if rule.provider == self.provider]
