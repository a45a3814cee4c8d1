"""Prompt-cache stability (cache_stable) and cache_control breakpoints, on realistic agent loops."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from bench.cache import replay_session
from bench.sessions import make_session
from litellm_governance import GovernanceConfig, govern
from litellm_governance._tokens import TokenCache, TokenCounter

from .builders import long_text, result, system, user


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("cl100k_base", TokenCache(200_000))


class TestReplay:
    def test_literal_rules_rewrite_the_prefix_most_turns(self, counter: TokenCounter) -> None:
        """Nanobot's rules at 24k: each request repeats well under half of the previous one."""
        series = replay_session(GovernanceConfig(context_window_tokens=24_000), seed=0, rounds=120, counter=counter)
        assert statistics.fmean(series["reuse"]) < 0.6
        assert sum(series["over"]) == 0

    def test_cache_stable_repeats_the_prefix(self, counter: TokenCounter) -> None:
        """cache_stable at 24k: most of each request repeats the previous one; never over budget; task kept."""
        config = GovernanceConfig(context_window_tokens=24_000, cache_stable=True)
        series = replay_session(config, seed=0, rounds=120, counter=counter)
        assert statistics.fmean(series["reuse"]) >= 0.93
        assert sum(series["over"]) == 0
        assert min(series["task"]) == 1.0

    def test_cache_stable_is_cheaper(self, counter: TokenCounter) -> None:
        """Counting a repeated prefix at the cache price, cache_stable bills a fraction of literal."""
        literal = replay_session(GovernanceConfig(context_window_tokens=32_000), seed=1, rounds=80, counter=counter)
        stable = replay_session(
            GovernanceConfig(context_window_tokens=32_000, cache_stable=True), seed=1, rounds=80, counter=counter
        )
        assert statistics.fmean(stable["billed"]) < 0.5 * statistics.fmean(literal["billed"])


def breakpoint_user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]}


@pytest.mark.parametrize("stable", [False, True])
class TestCacheControl:
    def session_with_breakpoint(self) -> tuple[list[dict[str, Any]], int]:
        messages = make_session(80, seed=4)
        marked = len(messages) - 8
        messages.insert(marked, breakpoint_user("Checkpoint: summarise progress."))
        return messages, marked

    def test_nothing_before_the_breakpoint_is_rewritten_when_it_fits(self, stable: bool) -> None:
        """Old results before the last breakpoint stay whole when the budget allows."""
        messages, marked = self.session_with_breakpoint()
        config = GovernanceConfig(context_window_tokens=200_000, cache_stable=stable)
        out = govern(messages, model="openai/gpt-4o", config=config)  # no role rules to apply
        assert out.messages[: marked + 1] == messages[: marked + 1]
        if not stable:  # literal compacts on every request; stable only every twenty results
            assert out.report.steps.get("compaction_skipped_for_cache", 0) > 0
        assert not out.report.cache_prefix_rewritten

    def test_the_budget_may_force_it_and_the_report_says_so(self, stable: bool) -> None:
        """When only rewriting before the breakpoint fits the window, it is done and reported."""
        messages, _ = self.session_with_breakpoint()
        out = govern(
            messages, model="zai/glm-4.6", config=GovernanceConfig(context_window_tokens=24_000, cache_stable=stable)
        )
        assert out.report.tokens_after <= out.report.budget
        assert out.report.cache_prefix_rewritten

    def test_compaction_is_preferred_to_cutting_at_the_breakpoint(self, stable: bool) -> None:
        """If compacting results before the breakpoint avoids a cut, results are compacted, not turns dropped."""
        big = [system(), user("task")]
        for i in range(14):
            big.append({"role": "assistant", "content": None, "tool_calls": [_call(f"c{i}")]})
            big.append(result(f"c{i}", long_text(4_000, f"f{i}")))
        big.append(breakpoint_user("go on"))
        whole = govern(big, model="openai/gpt-4o", config=GovernanceConfig(context_window_tokens=10**6)).report
        # Room for everything but about two of the fourteen results.
        window = whole.tokens_before - 1_500 + 1_000 + 1_024
        config = GovernanceConfig(context_window_tokens=window, max_output_tokens=1_000, cache_stable=stable)
        out = govern(big, model="openai/gpt-4o", config=config)
        assert "snipped" not in out.report.steps
        assert out.report.steps["compacted"] > 0 and out.report.cache_prefix_rewritten


def _call(ident: str) -> dict[str, Any]:
    return {"id": ident, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
