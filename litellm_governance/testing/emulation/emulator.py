"""`Emulator`: one emulated provider (its rules, a context window, a tokenizer ratio) deciding what it
answers to a request body received on one wire."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .bodies import model_name
from .checks import validate
from .context import check_context
from .editing import EDITING_BETA, effective_request
from .rules import NATIVE_WIRES, PROVIDERS, RULES, Rule
from .tokens import count_prompt_tokens
from .verdicts import Rejection, error_response, violation

__all__ = ["Emulator", "Verdict"]

#: Claude models with context editing (Anthropic's supported-models list: Claude 4 and later).
_EDITING_MODELS: Final = re.compile(r"claude-(?:opus|sonnet|haiku)-(?:[4-9]|\d\d)|claude-(?:fable|[5-9])")


@dataclass(frozen=True)
class Verdict:
    """What the emulated provider makes of a request: its rejection (None: accepted), the prompt's
    size as it counts it, and (Anthropic) the ``context_management`` it answers with."""

    rejection: Rejection | None
    tokens: int
    context_management: Mapping[str, Any] | None = field(default=None)


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
        verdict = self.answer(wire, body, model)
        return verdict.rejection, verdict.tokens

    def answer(
        self, wire: str, body: Mapping[str, Any], model: str | None = None, headers: Mapping[str, str] | None = None
    ) -> Verdict:
        """The `Verdict` on a request received on ``wire`` with these (lower-case) ``headers``.

        The emulated Anthropic reads a request as the API does: from the newest compaction block
        on, with the ``context_management`` edits applied (`editing`), which it reports back.
        """
        managed: Mapping[str, Any] | None = None
        if self.provider == "anthropic" and wire == "messages" and self.applies_to(wire):
            if "context_management" in body:
                betas = (headers or {}).get("anthropic-beta", "")
                if EDITING_BETA not in betas or not _EDITING_MODELS.search(model_name(body, model)):
                    refused = violation("anthropic.context_management_beta")
                    return Verdict(error_response(self.provider, wire, refused), self.count(wire, body))
            body, applied = effective_request(body, lambda b: self.count(wire, b))
            managed = {"applied_edits": applied} if applied else None
        tokens = self.count(wire, body)
        if not self.applies_to(wire):
            return Verdict(None, tokens)
        if self.provider is not None:
            broken = validate(self.provider, wire, body, model)
            if broken is not None:
                return Verdict(error_response(self.provider, wire, broken), tokens)
        if self.window is not None:
            broken = check_context(
                self.provider, wire, body, tokens, window=self.window, default_max_tokens=self.default_max_tokens
            )
            if broken is not None:
                return Verdict(error_response(self.provider, wire, broken), tokens)
        return Verdict(None, tokens, managed)

    def rules(self) -> list[Rule]:
        """The rules this emulator enforces (all providers' when ``provider`` is ``None``: none)."""
        return [rule for rule in RULES if rule.provider == self.provider]
