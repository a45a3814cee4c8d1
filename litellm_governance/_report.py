"""`GovernanceReport`: what governance did to one request, as counts and token figures only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["GovernanceReport"]

# Step counters shown in the one-line summary (header and log line), in this order.
_SUMMARY_KEYS = (
    ("compacted", "compacted"),
    ("superseded", "superseded"),
    ("snipped", "snipped"),
    ("noted", "noted"),
    ("summarized", "summarized"),
    ("truncated", "truncated"),
    ("orphans_dropped", "orphans"),
    ("duplicates_dropped", "duplicates"),
    ("backfilled", "backfilled"),
    ("results_moved", "moved"),
    ("merged", "merged"),
    ("trailing_assistant_dropped", "trailing"),
    ("recovered_as_user", "recovered"),
    ("synthetic_user_inserted", "synthetic_user"),
    ("tool_call_ids_renamed", "ids_renamed"),
    ("malformed_calls_dropped", "malformed"),
    ("empty_messages_dropped", "empty"),
    ("empty_user_kept", "empty_user_kept"),
    ("blank_text_dropped", "blank_text"),
    ("system_converted", "system_notes"),
    ("system_hoisted", "system_hoisted"),
    ("assistant_bridge_inserted", "bridges"),
    ("reasoning_content_filled", "reasoning"),
    ("outputs_retyped", "retyped"),
)


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
    max_output_tokens: int
    #: Estimated provider tokens (tiktoken count times the profile's ratio), tools included.
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    steps: Mapping[str, int] = field(default_factory=dict)
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
    #: What is sent, in tiktoken tokens (before the ratio): what calibration compares the
    #: provider's ``usage.prompt_tokens`` with.
    estimated_tokens: int = 0
    #: Tools with results of 4,000+ characters that are not compactable, and how many: candidates
    #: for ``compactable_tools``.
    large_uncompacted: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of every field."""
        return {
            "model": self.model,
            "provider": self.provider,
            "profile": self.profile,
            "context_window": self.context_window,
            "window_source": self.window_source,
            "budget": self.budget,
            "max_output_tokens": self.max_output_tokens,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_before": self.messages_before,
            "messages_after": self.messages_after,
            "steps": dict(self.steps),
            "over_budget": self.over_budget,
            "changed": self.changed,
            "cache_prefix_rewritten": self.cache_prefix_rewritten,
            "notes": list(self.notes),
            "format": self.format,
            "token_ratio": self.token_ratio,
            "ratio_source": self.ratio_source,
            "cache_stable": self.cache_stable,
            "estimated_tokens": self.estimated_tokens,
            "large_uncompacted": dict(self.large_uncompacted),
        }

    def then(self, later: GovernanceReport) -> GovernanceReport:
        """This pass followed by `later` (run on this pass's output), as one report."""
        steps = dict(self.steps)
        for key, count in later.steps.items():
            steps[key] = steps.get(key, 0) + count
        return replace(
            later,
            tokens_before=self.tokens_before,
            messages_before=self.messages_before,
            steps=dict(sorted(steps.items())),
            changed=self.changed or later.changed,
            cache_prefix_rewritten=self.cache_prefix_rewritten or later.cache_prefix_rewritten,
            notes=tuple(dict.fromkeys((*self.notes, *later.notes))),
        )

    def summary(self) -> str:
        """One line for a response header or a log: what changed (or ``unchanged``), the tokens,
        the profile and the budget, e.g. ``compacted=3; snipped=41; tokens=182113->109876;
        profile=strict; budget=26880``."""
        parts = [f"{label}={self.steps[key]}" for key, label in _SUMMARY_KEYS if self.steps.get(key)]
        if self.changed:
            parts.append(f"tokens={self.tokens_before}->{self.tokens_after}")
        else:
            parts = ["unchanged", f"tokens={self.tokens_after}"]
        parts.append(f"profile={self.profile}")
        parts.append(f"budget={self.budget if self.budget is not None else 'none'}")
        if self.over_budget:
            parts.append("over_budget")
        return "; ".join(parts)
