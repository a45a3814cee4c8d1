"""With thinking on, Claude needs the last assistant turn of an open tool loop to start with its
thinking block ("Expected `thinking` or `redacted_thinking`, but found `text`... To avoid this
requirement, disable `thinking`"): where the client or a bridge lost that block, the request goes
with thinking off, and where it is there nothing changes."""

from __future__ import annotations

from typing import Any

import pytest

from litellm_governance import GovernanceConfig, govern_request
from litellm_governance.testing.emulation import sign_thinking, validate

from .test_formats import a, text, thinking, tool_result, tool_use, u

BIG = GovernanceConfig(context_window_tokens=1_000_000)
SIGNED = {"type": "thinking", "thinking": "Plan.", "signature": sign_thinking("Plan.")}


def anthropic_body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": list(messages), **extra}


ON = {"type": "enabled", "budget_tokens": 2048}


class TestAnthropicFormat:
    def test_a_tool_turn_without_its_thinking_goes_with_thinking_off(self) -> None:
        """The emulated Anthropic refuses the request as it came and accepts the governed one."""
        body = anthropic_body(u("Fix it."), a(text("Running it."), tool_use("t1")), u(tool_result("t1")), thinking=ON)
        assert validate("anthropic", "messages", body).rule.id == "anthropic.thinking_first"  # type: ignore[union-attr]
        out = govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG)
        assert "thinking" not in out.request and out.report.steps["thinking_off"] == 1
        assert any("thinking turned off" in note for note in out.report.notes)
        assert validate("anthropic", "messages", out.request) is None
        assert out.request["messages"] == body["messages"]

    def test_a_turn_that_starts_with_its_thinking_is_left_alone(self) -> None:
        """Claude Code sends the thinking back: the request is the client's own."""
        body = anthropic_body(u("Fix it."), a(SIGNED, tool_use("t1")), u(tool_result("t1")), thinking=ON)
        out = govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG)
        assert out.request is body and not out.report.changed

    @pytest.mark.parametrize(
        "messages",
        [
            [u("Fix it."), a(text("Running it."), tool_use("t1")), u(tool_result("t1")), a("Done."), u("Thanks")],
            [u("Fix it.")],
        ],
        ids=["loop closed", "no loop"],
    )
    def test_no_open_tool_loop_no_requirement(self, messages: list[dict[str, Any]]) -> None:
        """The rule is about the last turn of an open tool loop only."""
        body = anthropic_body(*messages, thinking=ON)
        out = govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG)
        assert "thinking" in out.request

    def test_thinking_off_already_nothing_to_do(self) -> None:
        body = anthropic_body(u("Fix it."), a(text("Running it."), tool_use("t1")), u(tool_result("t1")))
        assert govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG).request is body


def chat_loop(**extra: Any) -> dict[str, Any]:
    """What LiteLLM's Responses bridge hands the chat call for Codex → Claude: the reasoning as
    text, the signature lost."""
    call = {"id": "toolu_1", "type": "function", "function": {"name": "exec_command", "arguments": "{}"}}
    return {
        "model": "claude-sonnet-4-5",
        "messages": [
            {"role": "user", "content": "Fix it."},
            {"role": "assistant", "content": "Running it.", "reasoning_content": "Plan.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "ok"},
        ],
        **extra,
    }


class TestChatFormat:
    def test_reasoning_effort_goes_when_the_signed_block_is_lost(self) -> None:
        """Chat to Claude with reasoning_effort (LiteLLM makes it thinking): dropped when the turn
        carries no thinking_blocks."""
        body = chat_loop(reasoning_effort="medium")
        out = govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG, format="chat")
        assert "reasoning_effort" not in out.request and out.report.steps["thinking_off"] == 1

    def test_thinking_blocks_kept_by_litellm_keep_thinking_on(self) -> None:
        """A turn whose thinking_blocks LiteLLM kept still has its thinking: nothing changes."""
        body = chat_loop(reasoning_effort="medium")
        body["messages"][1] = {**body["messages"][1], "thinking_blocks": [SIGNED]}
        out = govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG, format="chat")
        assert out.request["reasoning_effort"] == "medium"

    @pytest.mark.parametrize("model", ["openai/gpt-5.1", "zai/glm-4.6"])
    def test_other_providers_keep_their_reasoning_settings(self, model: str) -> None:
        """Only Claude has the rule: reasoning_effort means something else elsewhere."""
        out = govern_request(chat_loop(reasoning_effort="medium"), model=model, config=BIG, format="chat")
        assert out.request.get("reasoning_effort") == "medium"

    def test_idempotent(self) -> None:
        once = govern_request(chat_loop(reasoning_effort="high"), model="anthropic/claude-sonnet-4-5", config=BIG)
        twice = govern_request(once.request, model="anthropic/claude-sonnet-4-5", config=BIG)
        assert twice.request == once.request and not twice.report.changed


def test_the_thinking_of_a_kept_block_is_the_clients_object() -> None:
    """Sanity: `thinking()` test blocks are unsigned; the rule looks at the type, not the signature."""
    body = anthropic_body(u("Fix it."), a(thinking(), tool_use("t1")), u(tool_result("t1")), thinking=ON)
    assert govern_request(body, model="anthropic/claude-sonnet-4-5", config=BIG).request is body
