"""The agents' own summary requests, governed like any request: they fit, and their instruction
reaches the model whole, however small the window. Shapes as the real clients send them (the
real-client e2e tests run the clients themselves: tests/e2e/test_real_clients.py).

* Claude Code (``/compact``, or after a context-length rejection): the session, then a last user
  message holding the newest tool results *and* the instruction as a text block after them.
* Codex (its auto-compaction): the session with ``tools: []``, then a user message of its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from litellm_governance import GovernanceConfig, govern_request

from .builders import long_text

CLAUDE_INSTRUCTION = (
    "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\nYour task is to create a detailed summary of the "
    "conversation so far, paying close attention to the user's explicit requests."
)
CODEX_INSTRUCTION = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will "
    "resume the task."
)
TASK = "Run the scripted shell commands the model gives you, one round at a time."


def claude_summary_request(rounds: int) -> dict[str, Any]:
    reminders = [{"type": "text", "text": f"<system-reminder>\nreminder {i}\n</system-reminder>"} for i in range(8)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": [*reminders, {"type": "text", "text": TASK}]}]
    for r in range(rounds):
        uses = [
            {"type": "tool_use", "id": f"toolu_{r}_{c}", "name": "Bash", "input": {"command": "seq"}} for c in (1, 2)
        ]
        results = [
            {"type": "tool_result", "tool_use_id": use["id"], "content": long_text(10_000, use["id"])} for use in uses
        ]
        messages += [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    messages[-1]["content"].append({"type": "text", "text": CLAUDE_INSTRUCTION})
    system = [{"type": "text", "text": "You are a Claude agent.", "cache_control": {"type": "ephemeral"}}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 8_192, "system": system, "messages": messages}


def codex_summary_request(rounds: int) -> dict[str, Any]:
    def message(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    items = [message("developer", "You are Codex."), message("user", "<environment_context/>"), message("user", TASK)]
    for r in range(rounds):
        call = {"type": "function_call", "call_id": f"call_{r}", "name": "exec_command", "arguments": '{"cmd": "seq"}'}
        items += [call, {"type": "function_call_output", "call_id": f"call_{r}", "output": long_text(10_000, str(r))}]
    items.append(message("user", CODEX_INSTRUCTION))
    return {"model": "gpt-5.5", "tools": [], "input": items}


@pytest.mark.parametrize("window", [64_000, 32_000, 20_000, 14_000])  # max_tokens is 8,192
def test_claude_codes_summary_request_fits_and_keeps_its_instruction(window: int) -> None:
    """The instruction rides with the newest results: it stays, whole and last, even where those
    results must be truncated to fit."""
    body = claude_summary_request(rounds=8)
    config = GovernanceConfig(context_window_tokens=window)
    out = govern_request(body, model="zai/glm-4.6", config=config)
    assert not out.report.over_budget and out.report.tokens_after <= out.report.budget  # type: ignore[operator]
    last = out.request["messages"][-1]
    assert last["role"] == "user" and last["content"][-1] == {"type": "text", "text": CLAUDE_INSTRUCTION}
    assert TASK in json.dumps(out.request["messages"][0])


@pytest.mark.parametrize("window", [64_000, 24_000, 12_000, 6_000])
def test_codexs_summary_request_fits_and_keeps_its_instruction(window: int) -> None:
    """Codex's compaction instruction is the latest user message: the task being worked on, kept
    whole and last."""
    body = codex_summary_request(rounds=12)
    config = GovernanceConfig(context_window_tokens=window)
    out = govern_request(body, model="openai/gpt-5.5", config=config)
    assert not out.report.over_budget and out.report.tokens_after <= out.report.budget  # type: ignore[operator]
    assert out.request["input"][-1] == body["input"][-1]
