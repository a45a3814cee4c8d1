"""Compaction blocks (Anthropic ``compact_20260112``) and compaction items (OpenAI Responses): they
pass byte for byte, the history before the newest one is neither counted nor touched (the provider
ignores it), and `without_compaction` gives a provider that knows neither the summary text in its
place instead of the dead history."""

from __future__ import annotations

import copy
from typing import Any

from litellm_governance import GovernanceConfig, govern_anthropic, govern_responses
from litellm_governance._compaction import newest_compaction, without_compaction

from .builders import long_text
from .format_validity import anthropic_problems, responses_problems
from .test_formats import CLAUDE, GPT, a, fc, fco, msg, text, tool_result, tool_use, u

SUMMARY = "The user asked to fix the parser; tests in tests/test_parse.py fail on empty input."
COMPACTION = {"type": "compaction", "content": SUMMARY}
OPENAI_COMPACTION = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"}


def long_session(turns: int, first: int = 0) -> list[dict[str, Any]]:
    """Tool turns reading ~3k characters each."""
    messages: list[dict[str, Any]] = []
    for i in range(first, first + turns):
        messages += [a(tool_use(f"t{i}", path=f"/src/m{i}.py")), u(tool_result(f"t{i}", long_text(3_000, str(i))))]
    return messages


def compacted_conversation() -> list[dict[str, Any]]:
    """A long history, then the turn Anthropic's compaction answered with, then more work."""
    return [
        u("Fix the parser."),
        *long_session(20),
        a(COMPACTION),
        u("Go on."),
        *long_session(2, first=20),
    ]


class TestAnthropic:
    def test_the_dead_history_is_not_counted(self) -> None:
        """Tokens count from the turn holding the newest compaction block: what the provider reads."""
        config = GovernanceConfig(context_window_tokens=1_000_000)
        messages = compacted_conversation()
        live = messages[41:]
        whole = govern_anthropic(messages, model=CLAUDE, config=config).report
        alone = govern_anthropic(live, model=CLAUDE, config=config).report
        assert whole.tokens_before == alone.tokens_before

    def test_in_a_small_window_the_dead_history_goes_out_untouched(self) -> None:
        """When only the live part must fit, the messages before the compaction are the client's
        own objects, unchanged, and the compaction turn is kept whole and first."""
        messages = compacted_conversation()
        before = copy.deepcopy(messages)
        config = GovernanceConfig(context_window_tokens=9_000, max_output_tokens=1_000)
        out = govern_anthropic(messages, model=CLAUDE, config=config)
        assert messages == before
        assert all(x is y for x, y in zip(out.messages[:41], messages[:41], strict=True))
        assert out.messages[41] is messages[41]  # the compaction turn, byte for byte
        assert not out.report.over_budget
        assert anthropic_problems(out.messages, prefill=True) == []

    def test_the_compaction_turn_may_open_the_history(self) -> None:
        """A request that starts at the compaction turn gets no synthetic user message before it."""
        messages = [a(COMPACTION), u("Go on.")]
        out = govern_anthropic(messages, model=CLAUDE, config=GovernanceConfig(context_window_tokens=100_000))
        assert out.messages == messages and not out.report.changed

    def test_snipping_keeps_the_compaction_turn(self) -> None:
        """Over budget after the compaction, older live turns go; the summary turn stays."""
        messages = [a(COMPACTION), u("Go on."), *long_session(12), u("And now?")]
        config = GovernanceConfig(context_window_tokens=9_000, max_output_tokens=1_000)
        out = govern_anthropic(messages, model=CLAUDE, config=config)
        assert out.report.steps.get("snipped", 0) > 0 and not out.report.over_budget
        assert out.messages[0] is messages[0]
        assert out.messages[-1]["content"][-1] == text("And now?")  # merged with the results before it

    def test_a_failed_compaction_is_no_cut(self) -> None:
        """A compaction block with null content is a no-op for the API: the history stays live."""
        failed = {"type": "compaction", "content": None}
        messages = [u("Fix it."), a("ok", failed), u("Go on.")]
        assert newest_compaction(messages, "block") is None


class TestWithoutCompaction:
    def test_anthropic_summary_replaces_the_block_and_the_dead_history(self) -> None:
        """For a provider without compaction: the summary as text in the compaction's turn, and
        nothing before it."""
        messages = compacted_conversation()
        out = without_compaction(messages, "block")
        assert out is not None
        assert out[0] == {"role": "assistant", "content": [text(SUMMARY)]}
        assert out[1:] == messages[42:]
        assert all(x is y for x, y in zip(out[1:], messages[42:], strict=True))

    def test_blocks_before_the_block_in_its_turn_go_too(self) -> None:
        """Within its own turn, what comes before the compaction block was summarised as well."""
        messages = [u("hi"), a(text("earlier"), COMPACTION, text("and then")), u("next")]
        assert without_compaction(messages, "block") == [
            {"role": "assistant", "content": [text(SUMMARY), text("and then")]},
            u("next"),
        ]

    def test_no_compaction_nothing_to_do(self) -> None:
        """A history without compaction blocks or items is left as it is."""
        assert without_compaction([u("hi")], "block") is None
        assert without_compaction([msg("user", "hi")], "item") is None

    def test_opaque_openai_compaction_is_removed_and_the_history_kept(self) -> None:
        """An OpenAI compaction item is readable only by OpenAI: elsewhere it goes, and the history
        it stood for stays (the only record of that context such a provider can read)."""
        items = [msg("user", "go"), fc("c1"), fco("c1"), OPENAI_COMPACTION, msg("user", "next")]
        assert without_compaction(items, "item") == [msg("user", "go"), fc("c1"), fco("c1"), msg("user", "next")]

    def test_readable_responses_summary_replaces_the_item(self) -> None:
        """A compaction item that carries readable summary text becomes an assistant message."""
        readable = {"type": "compaction", "summary": [{"type": "summary_text", "text": SUMMARY}]}
        items = [msg("user", "go"), fc("c1"), fco("c1"), readable, msg("user", "next")]
        assert without_compaction(items, "item") == [msg("assistant", SUMMARY), msg("user", "next")]


class TestResponses:
    def test_the_items_before_the_newest_compaction_are_not_counted_or_touched(self) -> None:
        """Native Responses: the compaction item and everything before it go out as they came,
        and only what follows is counted and governed."""
        old: list[dict[str, Any]] = [msg("user", "THE OLD TASK")]
        for i in range(30):
            old += [fc(f"c{i}"), fco(f"c{i}", long_text(2_000, str(i)))]
        items = [*old, OPENAI_COMPACTION, msg("user", "next"), fc("n1"), fco("n1", "fine")]
        config = GovernanceConfig(context_window_tokens=4_000, max_output_tokens=500)
        out = govern_responses(items, model=GPT, config=config)
        assert not out.report.over_budget
        assert all(x is y for x, y in zip(out.input, items, strict=True))
        assert responses_problems(out.input) == []

    def test_an_output_sent_after_an_assistant_message_goes_right_after_its_call(self) -> None:
        """A client that writes text between a call and its output (an assistant message after the
        call): the output goes right after its call, the client's own items otherwise as they came."""
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-x"}
        turn = [reasoning, fc("c1"), msg("assistant", "Running it."), fco("c1")]
        items = [msg("user", "go"), fco("ghost"), *turn, msg("user", "next")]
        out = govern_responses(items, model=GPT, config=GovernanceConfig(context_window_tokens=1_000_000))
        assert out.report.steps == {"orphans_dropped": 1, "results_moved": 1}
        expected = [items[0], reasoning, turn[1], turn[3], turn[2], items[-1]]
        assert out.input == expected and all(x is y for x, y in zip(out.input, expected, strict=True))
