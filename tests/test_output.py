"""The output reservation is fitted like the input (`_output`): a request asking for more output than
its share of the window (Claude Code's 32,000 on a 32k deployment) goes out with its own field lowered,
so the history keeps the rest; and the report, the header and ``explain`` say so."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_governance import ConfigError, GovernanceConfig, govern_request
from litellm_governance.__main__ import render

from .builders import assistant, call, examples, result, system, user

WINDOW = 32_768
CONFIG = GovernanceConfig(context_window_tokens=WINDOW)


def loop(rounds: int = 30) -> list[dict[str, Any]]:
    history = [system(), user("Fix the parser.")]
    for i in range(rounds):
        history += [assistant(None, call(f"c{i}", "Read", file_path=f"m{i}.py")), result(f"c{i}", f"line {i}\n" * 400)]
    return history


def claude_code(max_tokens: int = 32_000, thinking: dict[str, Any] | None = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Fix the parser."}]}]
    for i in range(30):
        use = {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": f"m{i}.py"}}
        answer = {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"line {i}\n" * 400}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}]
    messages += [{"role": "assistant", "content": "Read them all."}, {"role": "user", "content": "Now fix it."}]
    body: dict[str, Any] = {"model": "anthropic/claude-sonnet-4-5", "system": "Agent.", "messages": messages}
    body["max_tokens"] = max_tokens
    if thinking is not None:
        body["thinking"] = thinking
    return body


class TestTheRequestCarriesTheReserve:
    def test_claude_codes_32000_is_lowered_to_a_quarter_of_a_32k_window(self) -> None:
        out = govern_request(claude_code(), config=CONFIG)
        assert out.request["max_tokens"] == WINDOW // 4
        assert out.report.max_output_tokens == WINDOW // 4 and out.report.max_output_lowered_from == 32_000
        assert out.report.budget == WINDOW - WINDOW // 4 - CONFIG.safety_buffer_tokens
        assert f"max_output=32000->{WINDOW // 4}" in out.report.summary()

    @pytest.mark.parametrize(
        ("body", "fields"),
        [
            ({"messages": loop(), "max_tokens": 32_000}, ("max_tokens",)),
            (
                {"messages": loop(), "max_completion_tokens": 32_000, "max_tokens": 30_000},
                ("max_completion_tokens", "max_tokens"),
            ),
            ({"input": [{"role": "user", "content": "go"}], "max_output_tokens": 32_000}, ("max_output_tokens",)),
        ],
        ids=["chat", "chat-both-fields", "responses"],
    )
    def test_each_format_has_its_own_field_lowered(self, body: dict[str, Any], fields: tuple[str, ...]) -> None:
        out = govern_request({**body, "model": "zai/glm-4.6"}, config=CONFIG)
        assert all(out.request[key] == WINDOW // 4 for key in fields)
        assert all(body[key] > WINDOW // 4 for key in fields)  # the input untouched

    def test_nothing_is_lowered_where_it_fits(self) -> None:
        body = claude_code(max_tokens=4_096)
        out = govern_request(body, config=CONFIG)
        assert out.request["max_tokens"] == 4_096 and out.report.max_output_lowered_from is None
        assert "max_output=" not in out.report.summary()

    def test_the_operators_stated_limit_caps_the_reserve(self) -> None:
        out = govern_request(claude_code(), config=CONFIG, model_info={"max_output_tokens": 4_096})
        assert out.request["max_tokens"] == 4_096 and out.report.max_output_lowered_from == 32_000

    def test_the_operator_may_keep_the_clients_value(self) -> None:
        config = GovernanceConfig(context_window_tokens=WINDOW, fit_max_output=False)
        out = govern_request(claude_code(), config=config)
        assert out.request["max_tokens"] == 32_000 and out.report.max_output_tokens == 32_000
        assert out.report.budget == 0 and out.report.over_budget
        assert any("no budget left" in note for note in out.report.notes)

    def test_a_share_of_its_own(self) -> None:
        config = GovernanceConfig(context_window_tokens=WINDOW, max_output_share=0.5)
        assert govern_request(claude_code(), config=config).request["max_tokens"] == WINDOW // 2


class TestThinking:
    def test_a_thinking_budget_that_fits_the_reserve_stays(self) -> None:
        thinking = {"type": "enabled", "budget_tokens": 4_095}
        out = govern_request(claude_code(thinking=thinking), config=CONFIG)
        assert out.request["thinking"] == thinking and out.request["max_tokens"] == WINDOW // 4

    def test_a_thinking_budget_is_lowered_with_max_tokens_where_needed(self) -> None:
        """An 8k window: a quarter is 2,048, which a 4,095-token thinking budget would fill."""
        config = GovernanceConfig(context_window_tokens=8_192)
        out = govern_request(claude_code(thinking={"type": "enabled", "budget_tokens": 4_095}), config=config)
        assert out.request["max_tokens"] == 2_048
        assert out.request["thinking"] == {"type": "enabled", "budget_tokens": 1_024}

    def test_adaptive_thinking_and_output_config_are_left_alone(self) -> None:
        body = {**claude_code(thinking={"type": "adaptive"}), "output_config": {"effort": "high"}}
        out = govern_request(body, config=CONFIG)
        assert out.request["thinking"] == {"type": "adaptive"} and out.request["output_config"] == {"effort": "high"}
        assert out.request["max_tokens"] == WINDOW // 4  # (a floor of 1,024: no budget to stay above)


def test_explain_says_the_max_output_was_lowered() -> None:
    from litellm_governance._explain import explain

    explained = explain(claude_code(), model="anthropic/claude-sonnet-4-5", config=CONFIG)
    assert f"(max_output 32,000->{WINDOW // 4:,}: lowered to fit)" in render(explained, table=False)


def test_a_default_max_output_that_fills_the_window_is_capped_too() -> None:
    """``max_output_tokens: 40000`` on a 32,768-token window: the reservation is a quarter of the window,
    and the history keeps a budget (it once got 0, and every request was stripped)."""
    config = GovernanceConfig(context_window_tokens=WINDOW, max_output_tokens=40_000)
    out = govern_request({"model": "zai/glm-4.6", "messages": loop(60)}, config=config)
    assert out.report.max_output_tokens == WINDOW // 4 and out.report.budget == WINDOW - WINDOW // 4 - 1_024
    assert not out.report.over_budget and "max_tokens" not in out.request  # (nothing asked: nothing to lower)


def test_the_share_is_validated() -> None:
    with pytest.raises(ConfigError, match="max_output_share"):
        GovernanceConfig(max_output_share=1.0)


@settings(max_examples=examples(60), deadline=None)
@given(
    window=st.sampled_from([8_192, 16_384, 32_768, 128_000]),
    asked=st.integers(min_value=256, max_value=64_000),
    model=st.sampled_from(["zai/glm-4.6", "anthropic/claude-sonnet-4-5", "openai/gpt-4.1", "mistral/mistral-large"]),
    fmt=st.sampled_from(["chat", "anthropic", "responses"]),
)
def test_input_plus_max_output_fits_the_window(window: int, asked: int, model: str, fmt: str) -> None:
    """Every profile and format: the estimate of what is sent plus the max output that goes with it
    stays within the window whenever the smallest request fits; a max output that already fitted is
    sent as asked."""
    config = GovernanceConfig(context_window_tokens=window)
    if fmt == "chat":
        body: dict[str, Any] = {"messages": loop(20), "max_tokens": asked}
    elif fmt == "anthropic":
        body = claude_code(max_tokens=asked)
    else:
        body = {"input": [{"role": "user", "content": "go " * 5_000}], "max_output_tokens": asked}
    key = {"chat": "max_tokens", "anthropic": "max_tokens", "responses": "max_output_tokens"}[fmt]
    out = govern_request({**body, "model": model}, config=config)
    sent = out.request[key]
    if not out.report.over_budget:
        assert out.report.tokens_after + sent <= window
    if asked <= window // 4:
        assert sent == asked
