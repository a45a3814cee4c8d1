"""`GovernanceReport`: what governance did to one request, as counts and token figures only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from ._steps import STAGES, STEPS

__all__ = ["GovernanceReport"]

# Steps shown in the one-line summary (header and log line), in this order (`_steps.STEPS`).
_SUMMARY_STEPS: Final = tuple(s.name for s in STEPS if s.summary)


@dataclass(frozen=True)
class GovernanceReport:
    """What was done, never what the messages say."""

    model: str
    provider: str
    profile: str
    context_window: int | None
    #: Where the window came from: config, deployment, litellm, default or unknown.
    window_source: str
    #: Input budget in provider tokens (None when no window is known: nothing was snipped).
    budget: int | None
    #: Output tokens reserved (the request's own, or the default, fitted: `_output`).
    max_output_tokens: int
    #: Estimated provider tokens (tiktoken count times the profile's ratio), tools included.
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    #: How many times each step (`_steps.STEPS`, by name) acted.
    steps: Mapping[str, int] = field(default_factory=dict)
    #: Provider tokens each stage (`_steps.STAGES`) removed, negative where it added more, listed
    #: only where non-zero; they add up to ``tokens_before - tokens_after`` unless LiteLLM
    #: translated the request between the proxy's two passes (a note says so).
    tokens_removed: Mapping[str, int] = field(default_factory=dict)
    over_budget: bool = False
    changed: bool = False
    #: Something before the last cache_control breakpoint was rewritten.
    cache_prefix_rewritten: bool = False
    notes: tuple[str, ...] = ()
    #: The request format: ``chat``, ``anthropic`` (``/v1/messages``) or ``responses``.
    format: str = "chat"
    #: Provider tokens per tiktoken token assumed for the budget, and where that figure came from
    #: (``static``: the profile's; ``given``: the caller's; ``learned, n=…``: calibration).
    token_ratio: float = 1.0
    ratio_source: str = "static"
    #: Whether the request was shrunk with ``cache_stable``.
    cache_stable: bool = False
    #: What is sent, in tiktoken tokens (what calibration compares ``usage.prompt_tokens`` with).
    estimated_tokens: int = 0
    #: Tools with results of 4,000+ characters that are not compactable, and how many.
    large_uncompacted: Mapping[str, int] = field(default_factory=dict)
    #: What the request asked for as output where its field went out lowered to `max_output_tokens`.
    max_output_lowered_from: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return {**asdict(self), "notes": list(self.notes)}

    def then(self, later: GovernanceReport) -> GovernanceReport:
        """This pass followed by `later` (run on this pass's output), as one report."""
        steps, removed = _sum(self.steps, later.steps), _sum(self.tokens_removed, later.tokens_removed)
        return replace(
            later,
            format=self.format,  # the client's (LiteLLM may have translated the request in between)
            tokens_before=self.tokens_before,
            messages_before=self.messages_before,
            steps=dict(sorted(steps.items())),
            tokens_removed={s.name: removed[s.name] for s in STAGES if removed.get(s.name)},
            changed=self.changed or later.changed,
            cache_prefix_rewritten=self.cache_prefix_rewritten or later.cache_prefix_rewritten,
            notes=tuple(dict.fromkeys((*self.notes, *later.notes))),
            max_output_lowered_from=later.max_output_lowered_from or self.max_output_lowered_from,
        )

    def summary(self) -> str:
        """One line for a response header or a log, e.g. ``compacted=3; snipped=41;
        tokens=182113->109876; removed=compaction:50000,snipping:22237; ratio=1.15 static;
        profile=strict; budget=26880``."""
        if self.changed:
            parts = [f"{name}={self.steps[name]}" for name in _SUMMARY_STEPS if self.steps.get(name)]
            if self.max_output_lowered_from is not None:
                parts.append(f"max_output={self.max_output_lowered_from}->{self.max_output_tokens}")
            parts.append(f"tokens={self.tokens_before}->{self.tokens_after}")
            if self.tokens_removed:
                parts.append("removed=" + ",".join(f"{k}:{v}" for k, v in self.tokens_removed.items()))
        else:
            parts = ["unchanged", f"tokens={self.tokens_after}"]
        # The ratio with at most three decimals, no trailing zeros.
        parts.append(f"ratio={round(self.token_ratio, 3):g} {self.ratio_source.split(',')[0]}")
        parts.append(f"profile={self.profile}")
        parts.append(f"budget={self.budget if self.budget is not None else 'none'}")
        if self.over_budget:
            parts.append("over_budget")
        return "; ".join(parts)


def _sum(first: Mapping[str, int], second: Mapping[str, int]) -> dict[str, int]:
    return {key: first.get(key, 0) + second.get(key, 0) for key in {**first, **second}}
