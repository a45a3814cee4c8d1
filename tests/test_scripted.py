"""The scripted model (`litellm_governance.testing.ScriptedModel`): what it answers, and how the
upstream sends it on each wire — tool calls, signed thinking, sealed reasoning and usage, streamed
or not — so that a real agent can run a whole task against it."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream, ScriptedModel
from litellm_governance.testing.emulation import sign_thinking

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
SCRIPT = ScriptedModel(rounds=4, chars=1_000)
BASH = {
    "name": "Bash",
    "input_schema": {"type": "object", "properties": {"command": {}, "description": {}, "timeout": {}}},
}
EXEC = {
    "type": "function",
    "name": "exec_command",
    "parameters": {"type": "object", "properties": {"cmd": {}, "yield_time_ms": {}}},
}
CHAT_SHELL = {"type": "function", "function": {"name": "shell", "parameters": {"properties": {"command": {}}}}}


def post(server: RecordingUpstream, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST `body`; the JSON answer, or the list of SSE data payloads when streaming."""
    request = urllib.request.Request(
        server.root_url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with _OPENER.open(request, timeout=10) as response:
        text = response.read().decode()
    if not body.get("stream"):
        return response.status, json.loads(text)
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    return response.status, [json.loads(e) for e in events if e != "[DONE]"]


@pytest.fixture
def server() -> Iterator[RecordingUpstream]:
    with RecordingUpstream(script=SCRIPT) as upstream:
        yield upstream


class TestPlan:
    def test_every_third_round_makes_two_calls(self) -> None:
        """Rounds 3, 6, … call the tool twice; the others once."""
        assert [SCRIPT.calls_in_round(r) for r in range(1, 7)] == [1, 1, 2, 1, 1, 2]
        assert ScriptedModel(rounds=6).total_calls() == 8

    def test_results_map_back_to_rounds(self) -> None:
        """A count of tool results says which rounds are complete."""
        assert [SCRIPT.rounds_done(n) for n in range(7)] == [0, 1, 2, 2, 3, 4, 4]

    @pytest.mark.parametrize("style", ["seq", "python"])
    def test_the_command_prints_its_marker_on_every_line(self, style: str) -> None:
        """The command prints about `chars` characters, every numbered line tagged, framed by BEGIN/END."""
        script = ScriptedModel(chars=2_000, command_style=style)  # type: ignore[arg-type]
        output = subprocess.run(["bash", "-c", script.command(2, 1)], capture_output=True, text=True, check=True).stdout
        lines = output.splitlines()
        assert lines[0] == "MARK-r2-c1-BEGIN" and lines[-1] == "MARK-r2-c1-END"
        assert all(line.startswith("MARK-r2-c1") for line in lines)
        assert script.first_line(2, 1) in output and script.last_line(2, 1) in output
        assert 1_900 <= len(output) <= 2_100


class TestAnswers:
    def test_first_request_calls_the_shell_tool_with_arguments_from_its_schema(self) -> None:
        """Claude Code's Bash gets command, description and timeout; Codex's exec_command gets cmd."""
        claude = SCRIPT.answer("messages", {"tools": [BASH], "messages": [{"role": "user", "content": "go"}]}, 7)
        assert claude.kind == "round" and claude.round == 1
        (call,) = claude.calls
        assert call.id == "call_7_1_1" and call.name == "Bash"
        assert set(call.arguments) == {"command", "description", "timeout"}
        codex = SCRIPT.answer("responses", {"tools": [EXEC], "input": "go"}, 8)
        assert set(codex.calls[0].arguments) == {"cmd", "yield_time_ms"}

    def test_progress_comes_from_call_ids_summaries_or_results(self) -> None:
        """The round is read from the newest call id, a summary's ROUNDS-DONE, or the result count."""
        by_id = {"tools": [CHAT_SHELL], "messages": [{"role": "tool", "tool_call_id": "call_3_2_1", "content": "x"}]}
        assert SCRIPT.answer("chat", by_id, 9).round == 3
        by_summary = {"tools": [CHAT_SHELL], "messages": [{"role": "user", "content": "ROUNDS-DONE=3"}]}
        turn = SCRIPT.answer("chat", by_summary, 9)
        assert turn.round == 4 and len(turn.calls) == 1

    def test_after_the_last_round_the_model_answers_a_final_text(self) -> None:
        """Once every round is done, no more calls: the closing text."""
        done = {"tools": [CHAT_SHELL], "messages": [{"role": "tool", "tool_call_id": "call_1_4_1", "content": "x"}]}
        turn = SCRIPT.answer("chat", done, 10)
        assert turn.kind == "final" and not turn.calls and "DONE" in turn.text

    @pytest.mark.parametrize(
        "prompt",
        ["Your task is to create a detailed summary of the conversation so far", "CONTEXT CHECKPOINT COMPACTION"],
    )
    def test_the_agents_summary_requests_get_a_summary(self, prompt: str) -> None:
        """Claude Code's and Codex's compaction prompts get a summary that records the progress."""
        body = {
            "tools": [CHAT_SHELL],
            "messages": [
                {"role": "tool", "tool_call_id": "call_1_2_1", "content": "x"},
                {"role": "user", "content": prompt},
            ],
        }
        turn = SCRIPT.answer("chat", body, 11)
        assert turn.kind == "summary" and not turn.calls and "ROUNDS-DONE=2" in turn.text

    def test_side_requests_without_the_shell_get_short_answers(self) -> None:
        """A title request gets a JSON title; anything else without a shell tool gets ``ok``."""
        title = SCRIPT.answer(
            "messages", {"system": "Generate a title", "messages": [{"role": "user", "content": "x"}]}, 1
        )
        assert json.loads(title.text) == {"title": "Scripted shell loop"}
        assert SCRIPT.answer("chat", {"messages": [{"role": "user", "content": "hi"}]}, 1).text == "ok"

    def test_the_newest_result_is_recognised_whole_or_cut(self) -> None:
        """`newest_result` says whether the newest round's output arrived whole."""
        whole = f"{SCRIPT.first_line(1, 1)} ... {SCRIPT.last_line(1, 1)}"
        body = {"messages": [{"role": "tool", "tool_call_id": "call_1_1_1", "content": whole}]}
        assert SCRIPT.newest_result(body) == "intact"
        body["messages"][0]["content"] = SCRIPT.first_line(1, 1)
        assert SCRIPT.newest_result(body) == "head-only"
        assert SCRIPT.newest_result({"messages": []}) == "-"


class TestWires:
    @pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
    def test_chat_sends_tool_calls_and_usage(self, server: RecordingUpstream, stream: bool) -> None:
        """Chat completions: ``tool_calls`` (streamed as deltas), ``finish_reason`` and ``usage``."""
        body = {"model": "m", "tools": [CHAT_SHELL], "messages": [{"role": "user", "content": "go"}], "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        _, answer = post(server, "/v1/chat/completions", body)
        if stream:
            deltas = [c["choices"][0]["delta"] for c in answer if c["choices"]]
            name = next(d["tool_calls"][0]["function"]["name"] for d in deltas if d.get("tool_calls"))
            arguments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas if d.get("tool_calls"))
            usage = answer[-1]["usage"]
        else:
            (call,) = answer["choices"][0]["message"]["tool_calls"]
            name, arguments, usage = call["function"]["name"], call["function"]["arguments"], answer["usage"]
            assert answer["choices"][0]["finish_reason"] == "tool_calls"
        assert name == "shell" and "MARK-r1-c1" in json.loads(arguments)["command"]
        assert usage["prompt_tokens"] > 0
        assert server.requests[-1].answer == "round 1: 1 call"

    @pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
    def test_messages_sends_signed_thinking_when_thinking_is_on(self, server: RecordingUpstream, stream: bool) -> None:
        """/v1/messages with thinking on: a thinking block signed as the emulated Anthropic signs it,
        then the tool_use (streamed as input_json_delta), and ``usage``."""
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "thinking": {"type": "enabled", "budget_tokens": 512},
            "tools": [BASH],
            "messages": [{"role": "user", "content": "go"}],
            "stream": stream,
        }
        _, answer = post(server, "/v1/messages", body)
        if stream:
            kinds = [e["content_block"]["type"] for e in answer if e["type"] == "content_block_start"]
            signature = next(
                e["delta"]["signature"] for e in answer if e.get("delta", {}).get("type") == "signature_delta"
            )
            thinking = "".join(
                e["delta"]["thinking"] for e in answer if e.get("delta", {}).get("type") == "thinking_delta"
            )
            assert answer[0]["message"]["usage"]["input_tokens"] > 0
        else:
            kinds = [b["type"] for b in answer["content"]]
            signature, thinking = answer["content"][0]["signature"], answer["content"][0]["thinking"]
            assert answer["stop_reason"] == "tool_use" and answer["usage"]["input_tokens"] > 0
        assert kinds == ["thinking", "text", "tool_use"]
        assert signature == sign_thinking(thinking)

    @pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
    def test_responses_sends_sealed_reasoning_to_a_reasoning_model(
        self, server: RecordingUpstream, stream: bool
    ) -> None:
        """/v1/responses asking for encrypted reasoning from a reasoning model: a sealed reasoning
        item, then the function_call, each closed by ``response.output_item.done`` when streaming."""
        body = {
            "model": "gpt-5.5",
            "include": ["reasoning.encrypted_content"],
            "tools": [EXEC],
            "input": "go",
            "stream": stream,
        }
        _, answer = post(server, "/v1/responses", body)
        if stream:
            output = [e["item"] for e in answer if e["type"] == "response.output_item.done"]
            assert answer[-1]["type"] == "response.completed" and answer[-1]["response"]["usage"]["input_tokens"] > 0
        else:
            output = answer["output"]
        assert [item["type"] for item in output] == ["reasoning", "function_call"]
        assert output[0]["encrypted_content"].startswith("emu-rs:")
        plain = {**body, "model": "gpt-4.1"}
        _, again = post(server, "/v1/responses", {**plain, "stream": False})
        assert [item["type"] for item in again["output"]] == ["function_call"]

    def test_the_emulator_checks_what_the_model_sent_when_it_comes_back(self) -> None:
        """With emulation on, the thinking the model signed and the reasoning it sealed are
        accepted back unaltered and refused once edited."""
        with RecordingUpstream(script=SCRIPT, emulate="openai") as server:
            body = {"model": "gpt-5.5", "include": ["reasoning.encrypted_content"], "tools": [EXEC], "input": "go"}
            _, first = post(server, "/v1/responses", body)
            reasoning, call = first["output"]
            output = {"type": "function_call_output", "call_id": call["call_id"], "output": "done"}
            history = [{"type": "message", "role": "user", "content": "go"}, reasoning, call, output]
            status, _ = post(server, "/v1/responses", {**body, "input": history})
            assert status == 200
            tampered = {**reasoning, "encrypted_content": reasoning["encrypted_content"] + "x"}
            with pytest.raises(urllib.error.HTTPError) as refused:
                post(server, "/v1/responses", {**body, "input": [history[0], tampered, call, output]})
            assert "could not be verified" in refused.value.read().decode()


def test_the_command_line_plays_the_script() -> None:
    """``python -m litellm_governance.testing --script-rounds 2`` answers as the scripted model."""
    import os
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "litellm_governance.testing", "--port", "0", "--script-rounds", "2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        body = {"model": "m", "tools": [CHAT_SHELL], "messages": [{"role": "user", "content": "go"}]}
        request = urllib.request.Request(
            base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
        with _OPENER.open(request, timeout=10) as response:
            answer = json.loads(response.read())
        (call,) = answer["choices"][0]["message"]["tool_calls"]
        assert "MARK-r1-c1" in json.loads(call["function"]["arguments"])["command"]
    finally:
        process.terminate()
        process.wait(timeout=10)
