"""Anthropic's context editing applied by the gateway (`_context_editing`), parameter by parameter as
Anthropic documents it (https://docs.claude.com/en/docs/build-with-claude/context-editing):
``clear_tool_uses_20250919`` (trigger, keep, clear_at_least, exclude_tools, clear_tool_inputs) and
``clear_thinking_20251015`` (keep), what each reports, and what it leaves for the provider."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from litellm_governance._context_editing import (
    CLEARED_TOOL_RESULT,
    ContextEditError,
    apply_context_edits,
    prompt_counter,
)

from .builders import long_text
from .test_formats import a, text, thinking, tool_result, tool_use, u

COUNT = prompt_counter("anthropic/claude-sonnet-4-5")
THINKING_ON = {"type": "enabled", "budget_tokens": 2048}


def session(names: list[str]) -> list[dict[str, Any]]:
    """A task, then one tool use per name (each result ~2k characters), then a question."""
    messages: list[dict[str, Any]] = [u("Fix the parser.")]
    for i, name in enumerate(names):
        messages += [
            a(tool_use(f"t{i}", name=name, path=f"/src/{i}.py")),
            u(tool_result(f"t{i}", long_text(2_000, str(i)))),
        ]
    return [*messages, u("What now?")]


def results(messages: list[dict[str, Any]]) -> list[Any]:
    return [
        b["content"] for m in messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def edit(**fields: Any) -> dict[str, Any]:
    return {"edits": [{"type": "clear_tool_uses_20250919", **fields}]}


LOW = {"type": "input_tokens", "value": 100}


class TestClearToolUses:
    def test_below_the_default_trigger_nothing_is_cleared(self) -> None:
        """The default trigger is 100,000 input tokens: a small session is left as it is."""
        messages = session(["Read"] * 6)
        out = apply_context_edits(messages, edit(), count=COUNT)
        assert out.messages == messages and out.applied_edits == () and out.remaining is None

    def test_past_the_trigger_all_but_the_newest_three_results_are_cleared(self) -> None:
        """Oldest first, the newest ``keep`` (default 3) stay; the calls themselves stay visible."""
        messages = session(["Read"] * 6)
        snapshot = copy.deepcopy(messages)
        out = apply_context_edits(messages, edit(trigger=LOW), count=COUNT)
        assert results(out.messages)[:3] == [CLEARED_TOOL_RESULT] * 3
        assert results(out.messages)[3:] == results(messages)[3:]
        assert [
            b for m in out.messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"
        ] == [b for m in messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        (applied,) = out.applied_edits
        assert applied["type"] == "clear_tool_uses_20250919" and applied["cleared_tool_uses"] == 3
        assert applied["cleared_input_tokens"] == COUNT(messages) - COUNT(out.messages) > 1_000
        assert messages == snapshot  # the client's objects are never changed
        assert out.messages[0] is messages[0] and out.messages[-1] is messages[-1]

    def test_a_tool_uses_trigger_counts_tool_uses(self) -> None:
        """``trigger: {type: tool_uses}`` fires once the prompt holds more tool uses than its value."""
        messages = session(["Read"] * 4)
        quiet = apply_context_edits(messages, edit(trigger={"type": "tool_uses", "value": 4}), count=COUNT)
        fired = apply_context_edits(messages, edit(trigger={"type": "tool_uses", "value": 3}), count=COUNT)
        assert quiet.applied_edits == () and fired.applied_edits[0]["cleared_tool_uses"] == 1

    def test_keep_sets_how_many_newest_uses_stay(self) -> None:
        """``keep: {type: tool_uses, value: N}``."""
        out = apply_context_edits(
            session(["Read"] * 6), edit(trigger=LOW, keep={"type": "tool_uses", "value": 1}), count=COUNT
        )
        assert results(out.messages).count(CLEARED_TOOL_RESULT) == 5

    def test_excluded_tools_are_never_cleared(self) -> None:
        """Uses of ``exclude_tools`` keep their results, wherever they are."""
        names = ["Read", "memory", "Read", "Read", "Read", "Read"]
        out = apply_context_edits(session(names), edit(trigger=LOW, exclude_tools=["memory"]), count=COUNT)
        assert [r == CLEARED_TOOL_RESULT for r in results(out.messages)] == [True, False, True, False, False, False]

    @pytest.mark.parametrize(("inputs", "cleared"), [(True, [True, True, True]), (["Grep"], [False, True, False])])
    def test_clear_tool_inputs_clears_the_calls_inputs_too(self, inputs: Any, cleared: list[bool]) -> None:
        """``clear_tool_inputs: true`` clears every cleared use's input; a list only those tools'."""
        names = ["Read", "Grep", "Read", "Read", "Read", "Read"]
        out = apply_context_edits(session(names), edit(trigger=LOW, clear_tool_inputs=inputs), count=COUNT)
        uses = [b for m in out.messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        assert [use["input"] == {} for use in uses[:3]] == cleared
        assert all(use["input"] for use in uses[3:])

    def test_clear_at_least_holds_back_a_clearing_too_small(self) -> None:
        """``clear_at_least``: nothing is cleared unless at least that many tokens would go."""
        messages = session(["Read"] * 4)
        small = edit(trigger=LOW, clear_at_least={"type": "input_tokens", "value": 100_000})
        assert apply_context_edits(messages, small, count=COUNT).applied_edits == ()
        enough = edit(trigger=LOW, clear_at_least={"type": "input_tokens", "value": 100})
        assert apply_context_edits(messages, enough, count=COUNT).applied_edits

    def test_cleared_results_are_not_cleared_twice(self) -> None:
        """A second pass over its own output finds nothing to clear (idempotent)."""
        once = apply_context_edits(session(["Read"] * 6), edit(trigger=LOW), count=COUNT)
        twice = apply_context_edits(once.messages, edit(trigger=LOW), count=COUNT)
        assert twice.messages == once.messages and twice.applied_edits == ()

    @pytest.mark.parametrize(
        "bad",
        [
            {"trigger": {"type": "messages", "value": 3}},
            {"keep": {"type": "input_tokens", "value": 3}},
            {"clear_at_least": {"type": "input_tokens", "value": -1}},
            {"exclude_tools": "Read"},
            {"clear_tool_inputs": "yes"},
        ],
    )
    def test_what_anthropic_refuses_is_an_error(self, bad: dict[str, Any]) -> None:
        """A malformed parameter is refused, not guessed at."""
        with pytest.raises(ContextEditError):
            apply_context_edits(session(["Read"]), edit(**bad), count=COUNT)


def thinking_session(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [u("Fix the parser.")]
    for i in range(turns):
        messages += [a(thinking(f"step {i}"), tool_use(f"t{i}")), u(tool_result(f"t{i}", "ok"))]
    return messages


def thinking_kept(messages: list[dict[str, Any]]) -> list[bool]:
    return [
        any(isinstance(b, dict) and b.get("type") == "thinking" for b in m["content"])
        for m in messages
        if m["role"] == "assistant"
    ]


class TestClearThinking:
    def test_by_default_only_the_last_turns_thinking_stays(self) -> None:
        """No ``keep``: the thinking of the newest assistant turn only (``thinking_turns: 1``)."""
        out = apply_context_edits(
            thinking_session(4), {"edits": [{"type": "clear_thinking_20251015"}]}, count=COUNT, thinking=THINKING_ON
        )
        assert thinking_kept(out.messages) == [False, False, False, True]
        assert out.applied_edits[0]["type"] == "clear_thinking_20251015"
        assert out.applied_edits[0]["cleared_thinking_turns"] == 3

    def test_keep_thinking_turns(self) -> None:
        """``keep: {type: thinking_turns, value: 2}``."""
        keep = {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}]}
        out = apply_context_edits(thinking_session(4), keep, count=COUNT, thinking=THINKING_ON)
        assert thinking_kept(out.messages) == [False, False, True, True]

    @pytest.mark.parametrize("keep", ["all", {"type": "all"}])
    def test_keep_all_is_a_no_op(self, keep: Any) -> None:
        """Claude Code's ``keep: "all"`` keeps every thinking block: nothing applied, nothing reported."""
        messages = thinking_session(3)
        out = apply_context_edits(
            messages, {"edits": [{"type": "clear_thinking_20251015", "keep": keep}]}, count=COUNT, thinking=THINKING_ON
        )
        assert out.messages == messages and out.applied_edits == () and out.remaining is None

    def test_it_needs_thinking_on_and_to_come_first(self) -> None:
        """Anthropic refuses clear_thinking without thinking, or after another edit."""
        clear = {"type": "clear_thinking_20251015"}
        with pytest.raises(ContextEditError, match="requires `thinking` to be enabled"):
            apply_context_edits(thinking_session(1), {"edits": [clear]}, count=COUNT)
        with pytest.raises(ContextEditError, match="first"):
            apply_context_edits(
                thinking_session(1),
                {"edits": [{"type": "clear_tool_uses_20250919"}, clear]},
                count=COUNT,
                thinking=THINKING_ON,
            )


class TestWhatIsLeft:
    def test_edits_not_applied_here_are_left_for_the_provider(self) -> None:
        """compact_20260112 (which needs a model) and unknown types stay in context_management."""
        compact = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150_000}}
        unknown = {"type": "clear_everything_20990101"}
        spec = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": LOW}, compact, unknown]}
        out = apply_context_edits(session(["Read"] * 5), spec, count=COUNT)
        assert out.remaining == {"edits": [compact, unknown]}
        assert [e["type"] for e in out.applied_edits] == ["clear_tool_uses_20250919"]

    def test_a_turn_of_thinking_alone_keeps_it(self) -> None:
        """An assistant turn holding nothing but thinking is not emptied (an empty turn is refused)."""
        messages = [u("q"), a(thinking("only")), u("q2"), a(thinking("last"), text("answer")), u("q3")]
        out = apply_context_edits(
            messages, {"edits": [{"type": "clear_thinking_20251015"}]}, count=COUNT, thinking=THINKING_ON
        )
        assert out.messages == messages
