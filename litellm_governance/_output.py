"""The output reservation: the tokens of the window kept for the answer, and the request fields
lowered where the reserve is below what the request asked for.

Providers reject input plus ``max_tokens`` above the window, and Claude Code asks for 32,000 output
tokens on every request, which would leave a 32k deployment no history. So the reserve is the
smallest of what the request asks (else the configured default), the deployment's
``model_info.max_output_tokens`` and ``max_output_share`` of the window, never below `FLOOR` (twice
that with Anthropic's extended thinking, whose ``budget_tokens`` of at least 1,024 must stay below
``max_tokens``). The request's field (and thinking budget) is lowered to it unless ``fit_max_output``
is off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._config import GovernanceConfig
from ._errors import InvalidRequestError

__all__ = ["FLOOR", "Reserve", "lowered_fields", "reserve_for", "thinking_budget"]

#: The fewest output tokens the reserve leaves an answer.
FLOOR: Final = 1_024
#: Anthropic's smallest ``thinking.budget_tokens``.
_MIN_THINKING: Final = 1_024


@dataclass(frozen=True)
class Reserve:
    """The output tokens reserved, and what the request asked for (None: it named none)."""

    tokens: int
    asked: int | None = None

    @property
    def lowered(self) -> bool:
        """The reserve is below what the request asked for: its field goes out lowered."""
        return self.asked is not None and self.tokens < self.asked


def thinking_budget(request: Mapping[str, Any]) -> int | None:
    """``thinking.budget_tokens`` of a request with Anthropic's extended thinking enabled (adaptive
    thinking and ``output_config`` are left alone: they name no budget)."""
    thinking = request.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    return budget if isinstance(budget, int) and not isinstance(budget, bool) else None


def reserve_for(
    asked: object, *, window: int | None, stated: int | None, config: GovernanceConfig, thinking: int | None = None
) -> Reserve:
    """The output reservation of a request asking for `asked` tokens (None: none named) for a
    deployment with `window` input tokens and an operator-`stated` ``max_output_tokens``."""
    if asked is not None and (isinstance(asked, bool) or not isinstance(asked, int) or asked < 0):
        raise InvalidRequestError(f"max_output_tokens must be a non-negative integer, got {asked!r}")
    wanted = config.max_output_tokens if asked is None else asked
    if asked is not None and not config.fit_max_output:
        return Reserve(asked, asked)
    caps = [stated] if stated is not None else []
    if window is not None:
        caps.append(int(window * config.max_output_share))
    if not caps:
        return Reserve(wanted, asked)
    floor = 2 * FLOOR if thinking is not None else FLOOR
    return Reserve(min(wanted, max(floor, min(caps))), asked)


def lowered_fields(request: Mapping[str, Any], fields: Sequence[str], reserve: Reserve) -> dict[str, Any]:
    """The request fields to send instead, where the reserve is below what the request asked for:
    each of its output fields (`fields`, `FormatSpec.max_output`) above the reserve, and an extended
    thinking budget that would no longer stay below it."""
    if not reserve.lowered:
        return {}
    changed: dict[str, Any] = {
        key: reserve.tokens
        for key in fields
        if isinstance(request.get(key), int) and not isinstance(request[key], bool) and request[key] > reserve.tokens
    }
    budget = thinking_budget(request)
    if budget is not None and budget >= reserve.tokens:
        thinking = request["thinking"]
        changed["thinking"] = {**thinking, "budget_tokens": max(_MIN_THINKING, reserve.tokens - FLOOR)}
    return changed
