"""Claude Code (`/v1/messages`) and Codex (`/v1/responses`) through a real proxy: every row of the
table in docs/formats.md (request format x deployment kind), streaming and not, asserting on
what the upstream received; then whole Claude-Code- and Codex-shaped sessions sent to an
Anthropic, an OpenAI and a GLM deployment.

The upstreams emulate their provider (`litellm_governance.testing.emulation`): each checks the body it
receives against the provider's documented rules (Anthropic also checks thinking signatures) and
its context window, and answers the provider's real error when one is broken. A 200 from the
proxy therefore means the provider would have accepted what it received.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.agent_shapes import claude_code_body, codex_body
from litellm_governance.integration.passes import TRANSLATED_NOTE
from litellm_governance.testing import RecordingUpstream
from litellm_governance.testing.emulation import sign_thinking

from ..format_validity import anthropic_problems, responses_problems
from ..validity import problems as chat_problems
from ._proxy import ProxyProcess
from .conftest import ProxyFactory

pytestmark = pytest.mark.e2e

GLM_WINDOW = 32_768
THOUGHT = "The test fails because the fixture is stale."
THINKING = {"type": "thinking", "thinking": THOUGHT, "signature": sign_thinking(THOUGHT)}


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, RecordingUpstream]]:
    servers = {
        "anthropic": RecordingUpstream(emulate="anthropic", window=200_000),
        "openai": RecordingUpstream(emulate="openai", window=1_000_000),
        "glm": RecordingUpstream(emulate="glm", window=GLM_WINDOW),
        "vllm": RecordingUpstream(emulate="vllm", window=GLM_WINDOW),
        "deepseek": RecordingUpstream(),  # DeepSeek's Anthropic endpoint: recorded, Anthropic rules checked here
    }
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _entry(name: str, model: str, api_base: str, **info: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "model_name": name,
        "litellm_params": {"model": model, "api_base": api_base, "api_key": "sk-x"},
    }
    if info:
        entry["model_info"] = info
    return entry


@pytest.fixture(scope="module")
def proxy(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    return proxy_factory(
        model_list=[
            _entry("claude", "anthropic/claude-sonnet-4-5-20250929", upstreams["anthropic"].root_url),
            _entry("claude-64k", "anthropic/claude-opus-4-6", upstreams["anthropic"].root_url, max_input_tokens=64_000),
            _entry("gpt", "openai/gpt-4.1", upstreams["openai"].base_url, max_input_tokens=64_000),
            _entry("glm", "zai/glm-4.6", upstreams["glm"].base_url, max_input_tokens=GLM_WINDOW),
            # (a model of its own: what the proxy learns of it is this module's test's alone)
            _entry("glm-fit", "zai/glm-4.5", upstreams["glm"].base_url, max_input_tokens=GLM_WINDOW),
            _entry("vllm", "hosted_vllm/qwen3", upstreams["vllm"].base_url, max_input_tokens=GLM_WINDOW),
            _entry("deepseek", "deepseek/deepseek-chat", upstreams["deepseek"].root_url),
        ]
    )


def claude_code_request() -> dict[str, Any]:
    """A short Claude Code turn with the damage long sessions produce."""
    return {
        "max_tokens": 1_000,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "The test suite fails; fix it."},
            {
                "role": "assistant",
                "content": [
                    THINKING,
                    {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "/repo/tests/x.py"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "Bash", "input": {"command": "pytest -x"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>Keep the todo list current.</system-reminder>"},
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "def test_x(): ..."},
                    {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "stale result"},
                ],
            },
        ],
    }


def codex_request() -> dict[str, Any]:
    """A short Codex turn: a lost output, an orphan output, an output of the wrong kind."""
    return {
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"},
            {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"command":["pytest"]}'},
            {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call_output", "call_id": "call_2", "output": "Done!"},
            {"type": "function_call_output", "call_id": "call_gone", "output": "stale"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on."}]},
        ],
    }


def received(upstreams: dict[str, RecordingUpstream], name: str) -> tuple[str, dict[str, Any]]:
    records = [r for r in upstreams[name].requests if r.method == "POST"]
    assert records, f"{name} received nothing"
    return records[-1].path, records[-1].body


# Each row of docs/formats.md's hook map: (route, model group, upstream, path the upstream must receive).
ROWS = [
    ("/v1/messages", "claude", "anthropic", "/v1/messages"),
    ("/v1/messages", "glm", "glm", "/v1/chat/completions"),
    ("/v1/messages", "vllm", "vllm", "/v1/chat/completions"),
    ("/v1/messages", "gpt", "openai", "/v1/responses"),
    ("/v1/messages", "deepseek", "deepseek", "/anthropic/v1/messages"),
    ("/v1/responses", "gpt", "openai", "/v1/responses"),
    ("/v1/responses", "glm", "glm", "/v1/chat/completions"),
    ("/v1/responses", "claude", "anthropic", "/v1/messages"),
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(("route", "group", "target", "path"), ROWS, ids=[f"{r[0][4:]}->{r[1]}" for r in ROWS])
def test_every_route_and_deployment_kind(  # noqa: PLR0917 - fixtures and parameters
    proxy: ProxyProcess,
    upstreams: dict[str, RecordingUpstream],
    route: str,
    group: str,
    target: str,
    path: str,
    stream: bool,
) -> None:
    """Damaged Claude Code / Codex turns reach every kind of deployment repaired, in the format
    that deployment receives, and the client is told what was done."""
    for server in upstreams.values():
        server.clear()
    body = claude_code_request() if route == "/v1/messages" else codex_request()
    sent = copy.deepcopy(body)
    with proxy.client() as client:
        response = client.post(route, json={**body, "model": group, "stream": stream})
    got_path, got = received(upstreams, target)
    assert response.status_code == 200, f"{response.text[:800]}\nupstream got: {json.dumps(got)[:1500]}"
    assert got_path == path
    header = response.headers.get("x-litellm-governance", "")
    assert "orphans_dropped=1" in header and "backfilled=1" in header, header
    if path.endswith("/v1/messages"):
        assert anthropic_problems(got["messages"], prefill=False) == []
        if route == "/v1/messages":  # untranslated: the thinking block arrived as signed
            assert got["messages"][1]["content"][0] == THINKING
            assert got["system"] == sent["system"]
    elif path == "/v1/responses":
        assert responses_problems(got["input"]) == []
        if route == "/v1/responses":
            assert got["input"][1] == sent["input"][1]  # the reasoning item, verbatim
    else:
        assert chat_problems(got["messages"], "strict") == []


def test_report_reaches_the_logging_payload_on_both_routes(proxy: ProxyProcess) -> None:
    """LiteLLM's standard logging payload carries the report (spend_logs_metadata.governance) for
    /v1/messages and /v1/responses too, where LiteLLM's metadata is `litellm_metadata`."""
    with proxy.client() as client:
        client.post("/v1/messages", json={**claude_code_request(), "model": "claude", "user": "anthropic-report"})
        client.post("/v1/responses", json={**codex_request(), "model": "gpt", "user": "responses-report"})

    def governed(call_type: str, user: str) -> Any:
        def match(record: dict[str, Any]) -> bool:
            # By the request's user too: a late record of an earlier test on this proxy may carry the same call type.
            metadata = record.get("metadata") or {}
            spend = metadata.get("spend_logs_metadata") or {}
            return (
                call_type in str(record.get("call_type"))
                and record.get("end_user") == user
                and isinstance(spend.get("governance"), dict)
            )

        return proxy.wait_for_payload(match)

    for call_type, fmt, user in (
        ("anthropic_messages", "anthropic", "anthropic-report"),
        ("responses", "responses", "responses-report"),
    ):
        record = governed(call_type, user)
        assert record is not None, [r.get("call_type") for r in proxy.payloads()]
        report = record["metadata"]["spend_logs_metadata"]["governance"]
        assert report["format"] == fmt and report["steps"]["backfilled"] == 1
        assert report["stage"] == "pre_call"  # the deployment pass saw the same target and stood aside


@pytest.mark.parametrize("route", ["/v1/messages", "/v1/responses"])
def test_a_translated_request_is_governed_once_as_the_provider_receives_it(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream], route: str
) -> None:
    """Claude Code and Codex sessions sent to GLM: LiteLLM translates them to chat, and the plugin
    governs that translation, once, as GLM receives it (no pass on the client's body before it: its
    budget would be the wrong one). The header and the logging payload report it in the client's
    format, down to the messages GLM received, and the one note GLM received stands for every turn cut."""
    user_id = f"translated{route.replace('/', '-')}"
    body = (
        claude_code_body(300, seed=5, model="glm") if route == "/v1/messages" else codex_body(400, seed=5, model="glm")
    )
    with proxy.client(timeout=120) as client:
        response = client.post(route, json={**body, "user": user_id})
    _, got = received(upstreams, "glm")
    assert response.status_code == 200, response.text[:800]

    def mine(record: dict[str, Any]) -> bool:
        spend = (record.get("metadata") or {}).get("spend_logs_metadata") or {}
        return record.get("end_user") == user_id and isinstance(spend.get("governance"), dict)

    record = proxy.wait_for_payload(mine)
    assert record is not None
    report = record["metadata"]["spend_logs_metadata"]["governance"]
    assert report["stage"] == "deployment", report["notes"]
    assert report["format"] == ("anthropic" if route == "/v1/messages" else "responses")  # the client's
    assert TRANSLATED_NOTE in report["notes"]
    assert report["messages_after"] == len(got["messages"])
    assert response.headers["x-litellm-governance"] == report["summary"]
    assert report["steps"]["noted"] == 1 and report["tokens_after"] <= report["budget"]
    notes = [t for m in got["messages"] if m["role"] == "user" for t in _texts(m["content"]) if "[Context note:" in t]
    assert len(notes) == 1, notes
    assert chat_problems(got["messages"], "strict") == []


def test_a_codex_session_translated_for_glm_gets_the_room_glm_has(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """LiteLLM's translation of a Codex body to chat drops the reasoning items' encrypted content (only
    OpenAI reads it). Fitted before the translation, GLM received a fraction of its budget; fitted as GLM
    receives it, each turn of a long session uses most of the budget, and none goes over."""
    reports = _session_reports(
        proxy, "/v1/responses", [codex_body(240 + 2 * t, seed=7, model="glm-fit") for t in range(4)]
    )
    used = [r["tokens_after"] / r["budget"] for r in reports]
    assert all(0.6 < share <= 1.0 for share in used), used


def _session_reports(proxy: ProxyProcess, route: str, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send a session's `bodies` one after the other; the reports the logging payload got for them,
    in the order of the session's growth (they are logged asynchronously)."""
    user_id = f"session{route.replace('/', '-')}-{len(bodies)}"
    with proxy.client(timeout=120) as client:
        for body in bodies:
            response = client.post(route, json={**body, "user": user_id})
            assert response.status_code == 200, response.text[:800]

    def mine(record: dict[str, Any]) -> bool:
        spend = (record.get("metadata") or {}).get("spend_logs_metadata") or {}
        return record.get("end_user") == user_id and isinstance(spend.get("governance"), dict)

    deadline = time.monotonic() + 20
    while len(records := [r for r in proxy.payloads() if mine(r)]) < len(bodies) and time.monotonic() < deadline:
        time.sleep(0.05)
    reports = [r["metadata"]["spend_logs_metadata"]["governance"] for r in records]
    assert len(reports) == len(bodies)
    return sorted(reports, key=lambda report: int(report["messages_before"]))


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content if isinstance(b, dict)]


def _responses_turns(items: list[dict[str, Any]]) -> int:
    """Assistant turns in a Responses input: runs of assistant-side items (as the chat bridge groups them)."""
    turns, run = 0, False
    for item in items:
        assistant = item.get("role") == "assistant" or item.get("type") in (
            "reasoning",
            "function_call",
            "custom_tool_call",
            "local_shell_call",
        )
        turns += assistant and not run
        run = assistant
    return turns


def _task_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


@pytest.mark.parametrize("group", ["claude-64k", "glm"])
def test_a_claude_code_session_reaches_anthropic_and_glm_valid_and_within_budget(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream], group: str
) -> None:
    """A 400-message Claude Code session (long system prompt with breakpoints, Read/Bash/Grep/Edit,
    signed thinking, reminders) fits Claude at 64k and GLM at 32k: accepted, task kept."""
    body = claude_code_body(400, seed=11, model=group)
    task = [m for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str)][-1]
    for server in upstreams.values():
        server.clear()
    with proxy.client(timeout=120) as client:
        response = client.post("/v1/messages", json=body)
    _, got = received(upstreams, "anthropic" if group.startswith("claude") else "glm")
    assert response.status_code == 200, response.text[:800]
    report = response.headers["x-litellm-governance"]
    assert "snipped=" in report and "over_budget" not in report
    history = got["messages"]
    if group == "glm":
        assert chat_problems(history, "strict") == []
        assert history[0]["role"] == "system"
        assert any(task["content"] in _task_text(m["content"]) for m in history if m["role"] == "user")
    else:
        assert anthropic_problems(history) == []
        assert got["system"] == body["system"]
        assert any(task["content"] in _task_text(m["content"]) for m in history if m["role"] == "user")


@pytest.mark.parametrize("group", ["gpt", "glm"])
def test_a_codex_session_reaches_openai_natively_and_glm_bridged(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream], group: str
) -> None:
    """A 400-message Codex session (reasoning with encrypted content, shell, apply_patch) fits GPT
    at 64k through the native Responses API and GLM at 32k through the chat bridge."""
    body = codex_body(400, seed=11, model=group)
    for server in upstreams.values():
        server.clear()
    with proxy.client(timeout=120) as client:
        response = client.post("/v1/responses", json=body)
    _, got = received(upstreams, "openai" if group == "gpt" else "glm")
    assert response.status_code == 200, response.text[:800]
    assert "over_budget" not in response.headers["x-litellm-governance"]
    if group == "gpt":
        assert responses_problems(got["input"]) == []
        reasoning = [i for i in got["input"] if i.get("type") == "reasoning"]
        originals = [i for i in body["input"] if i.get("type") == "reasoning"]
        assert reasoning and all(r in originals for r in reasoning)
    else:
        assert chat_problems(got["messages"], "strict") == []


def test_an_output_after_assistant_text_reaches_openai_right_after_its_call(
    proxy: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """A client wrote text between a call and its output (two assistant messages): the output reaches
    OpenAI right after its call, the messages after it, every item the client's own."""
    said = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Step {i}."}]}
        for i in range(2)
    ]
    call = {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"command": ["ls"]}'}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "README.md"}
    task = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List the files."}]}
    with proxy.client(timeout=60) as client:
        response = client.post("/v1/responses", json={"model": "gpt", "input": [task, call, *said, output]})
    assert response.status_code == 200, response.text[:500]
    _, got = received(upstreams, "openai")
    assert got["input"] == [task, call, output, *said]
