"""The agent keeps what it needs, through a real proxy: the newest result whole, older ones stubbed
by name, and a note for cut turns — in what the provider actually received, on all three routes.

The upstreams emulate their provider (window and rules, with the real error bodies): a 200 means
the provider would have accepted what it received."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream

from ..format_validity import anthropic_problems, responses_problems
from ..validity import problems
from ._proxy import ProxyProcess
from .conftest import ProxyFactory

NOTE = "[Context note: "


def run_output(lines: int, label: str) -> str:
    """A test run's output: `lines` lines, about 14 tokens each, marked with `label`."""
    return "".join(f"{label} tests/test_mod_{i % 37}.py::test_case_{i} PASSED [{i % 100:3d}%]\n" for i in range(lines))


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, RecordingUpstream]]:
    servers = {
        "anthropic": RecordingUpstream(emulate="anthropic", window=40_000),
        "glm": RecordingUpstream(emulate="glm", window=32_768),
        "openai": RecordingUpstream(emulate="openai", window=40_000),
    }
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="module")
def proxy(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    def entry(name: str, model: str, base: str, window: int) -> dict[str, Any]:
        return {
            "model_name": name,
            "litellm_params": {"model": model, "api_base": base, "api_key": "sk-x"},
            "model_info": {"max_input_tokens": window},
        }

    return proxy_factory(
        model_list=[
            entry("claude-40k", "anthropic/claude-sonnet-4-5-20250929", upstreams["anthropic"].root_url, 40_000),
            entry("glm", "zai/glm-4.6", upstreams["glm"].base_url, 32_768),
            entry("gpt-40k", "openai/gpt-4.1", upstreams["openai"].base_url, 40_000),
        ]
    )


def test_claude_code_gets_the_output_it_just_asked_for(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """The issue's case: Claude Code, a 40k-window Anthropic deployment, six ~14.6k-token Bash
    outputs. Anthropic receives the newest tool_result whole (it was stubbed before), the older
    ones named in stubs or in the note, and accepts the request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Make the suite pass."}]}]
    newest = ""
    for i in range(6):
        newest = run_output(1_050, f"round{i}")
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Bash",
                        "input": {"command": f"pytest -k round{i}"},
                    }
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": newest}]}
        )
    body = {"model": "claude-40k", "max_tokens": 4_096, "system": "You are Claude Code.", "messages": messages}
    with proxy.client() as client:
        response = client.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text[:500]
    header = response.headers["x-litellm-governance"]
    got = upstreams["anthropic"].bodies(kind="messages")[-1]
    assert got["messages"][-1]["content"][0]["content"] == newest, header
    assert anthropic_problems(got["messages"], prefill=True) == []
    sent = json.dumps(got)
    for i in range(5):  # every earlier call is still named: in a stub or in the note
        assert f'Bash(command=\\"pytest -k round{i}\\")' in sent, (i, header)


def test_a_long_glm_loop_keeps_a_trace_of_every_cut_turn(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """600 rounds into GLM's 32k window: accepted, the task and the note in its first user turn
    (GLM takes no two user turns in a row), every cut call named, the newest result whole."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Make the suite pass."},
    ]
    for i in range(600):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{i}.py"})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": run_output(60, f"m{i}")})
    with proxy.client() as client:
        response = client.post("/v1/chat/completions", json={"model": "glm", "messages": messages, "max_tokens": 2_000})
    assert response.status_code == 200, response.text[:500]
    got = upstreams["glm"].bodies(model="glm-4.6")[-1]["messages"]
    assert problems(got, "strict") == []
    assert got[1]["content"].startswith("Make the suite pass.\n\n" + NOTE)
    assert got[-1]["content"] == messages[-1]["content"]
    sent = json.dumps(got)
    named = sum(1 for i in range(600) if f"src/m{i}.py" in sent)
    folded = re.search(r"- \(\+(\d+) earlier: read_file x\d+\)", got[1]["content"])
    # Every call is named (kept, stubbed or in the note) or counted in the note's fold line.
    assert named + (int(folded.group(1)) if folded else 0) == 600, (named, folded)
    assert "noted=1" in response.headers["x-litellm-governance"]


def test_codex_keeps_its_newest_output(proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream]) -> None:
    """/v1/responses to OpenAI: the newest function_call_output is the client's own item, whole."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}
    ]
    for i in range(6):
        items.append(
            {
                "type": "function_call",
                "call_id": f"c{i}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"pytest -k r{i}"}),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": run_output(1_050, f"r{i}")})
    with proxy.client() as client:
        response = client.post(
            "/v1/responses",
            json={"model": "gpt-40k", "input": items, "instructions": "You are Codex.", "max_output_tokens": 4_096},
        )
    assert response.status_code == 200, response.text[:500]
    got = upstreams["openai"].bodies(kind="responses")[-1]["input"]
    assert got[-1] == items[-1]
    assert responses_problems(got) == []


def test_a_summary_model_of_the_proxy_writes_the_cut_turns_summary(proxy_factory: ProxyFactory) -> None:
    """``summary_model: summariser`` (a model group of the same proxy): the first request goes out
    with the note; a summary request reaches the summariser's upstream in the background, and once
    the cut point moves the note opens with that summary."""
    summary = "The agent read the modules m0 to m40 looking for the parser bug."

    def reply(body: Any) -> str:
        first = (body.get("messages") or [{}])[0]
        return summary if "Summarize them for the agent" in str(first.get("content")) else "ok"

    def session(rounds: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "go"},
        ]
        for i in range(rounds):
            arguments = json.dumps({"file_path": f"src/m{i}.py"})
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": arguments}}
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"{i} = compute()\n" * 90})
        return messages

    with RecordingUpstream(reply=reply) as upstream:
        base = upstream.base_url
        proxy = proxy_factory(
            model_list=[
                {
                    "model_name": "glm-10k",
                    "litellm_params": {"model": "zai/glm-4.6", "api_base": base, "api_key": "x"},
                    "model_info": {"max_input_tokens": 10_000},
                },
                {
                    "model_name": "summariser",
                    "litellm_params": {"model": "openai/summ", "api_base": base, "api_key": "x"},
                },
            ],
            callback_settings={"governance": {"summary_model": "summariser", "cache_stable": True}},
        )
        seen: list[str] = []
        with proxy.client() as client:
            for rounds in range(90, 230):  # from the first request on, compaction alone does not fit
                response = client.post("/v1/chat/completions", json={"model": "glm-10k", "messages": session(rounds)})
                assert response.status_code == 200, response.text[:300]
                seen.append(upstream.bodies(model="glm-4.6")[-1]["messages"][1]["content"])
                if summary in seen[-1]:
                    break
                time.sleep(0.05)
        assert "[Context note: " in seen[0]
        assert summary in seen[-1] and "[Context summary: " in seen[-1]
        asked = [
            b
            for b in upstream.bodies(model="summ")
            if "Summarize them for the agent" in str(b["messages"][0]["content"])
        ]
        assert asked and all(
            b.get("metadata") is None or "_governance_summary" not in str(b.get("metadata")) for b in asked
        )
