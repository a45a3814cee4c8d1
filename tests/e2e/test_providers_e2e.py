"""Per provider, through a real LiteLLM proxy: the damage the provider rejects, without and with the plugin.

Each provider is emulated by its own ``RecordingUpstream(emulate=...)`` (its real error status,
body and text; see ``litellm_governance.testing.emulation`` and docs/providers/). Two proxies share one
model list: one without callbacks, one with the governance hook. Without the plugin the client
gets the provider's error; with it the request succeeds and what reached the provider passes the
provider's rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream
from litellm_governance.testing.emulation import sign_thinking, validate

from ._proxy import ProxyProcess
from .conftest import ProxyFactory

pytestmark = pytest.mark.e2e

BEDROCK_CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0"


@dataclass(frozen=True)
class Deployment:
    """One proxy model: the emulated provider behind it and how LiteLLM reaches it."""

    name: str
    provider: str
    model: str  # LiteLLM's provider/model
    window: int = 128_000
    root: bool = False  # api_base is the server root (Anthropic, Gemini, Bedrock) instead of .../v1
    extra: dict[str, Any] = field(default_factory=dict)


DEPLOYMENTS = (
    Deployment("emu-openai", "openai", "openai/gpt-4o"),
    Deployment("emu-openai-small", "openai", "openai/gpt-4o-small", window=4_096),
    Deployment("emu-anthropic", "anthropic", "anthropic/claude-sonnet-4-5", window=200_000, root=True),
    Deployment("emu-anthropic-46", "anthropic", "anthropic/claude-opus-4-6", window=200_000, root=True),
    Deployment("emu-gemini", "gemini", "gemini/gemini-2.5-flash", window=1_000_000, root=True),
    Deployment(
        "emu-bedrock",
        "bedrock",
        f"bedrock/converse/{BEDROCK_CLAUDE}",
        window=200_000,
        root=True,
        extra={
            "aws_access_key_id": "AKIAEMULATED",
            "aws_secret_access_key": "emulated",
            "aws_region_name": "us-east-1",
        },
    ),
    Deployment("emu-mistral", "mistral", "mistral/mistral-large-latest"),
    Deployment("emu-deepseek", "deepseek", "deepseek/deepseek-chat"),
    Deployment("emu-deepseek-v4", "deepseek", "deepseek/deepseek-v4-pro"),
    Deployment("emu-kimi", "moonshot", "moonshot/kimi-k2-0905-preview"),
    Deployment("emu-kimi-thinking", "moonshot", "moonshot/kimi-k2-thinking"),
    Deployment("emu-glm", "glm", "zai/glm-4.6"),
    Deployment("emu-vllm", "vllm", "hosted_vllm/emulated-mistral-7b"),
)
BY_NAME = {d.name: d for d in DEPLOYMENTS}
PROVIDER_NAMES = sorted({d.provider for d in DEPLOYMENTS})


@pytest.fixture(scope="module")
def emulators() -> Iterator[dict[str, RecordingUpstream]]:
    """One emulating upstream per deployment (its own port), with the deployment's provider and window."""
    servers = {
        d.name: RecordingUpstream(reply="emulated reply", emulate=d.provider, window=d.window) for d in DEPLOYMENTS
    }
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def model_list(emulators: dict[str, RecordingUpstream]) -> list[dict[str, Any]]:
    entries = []
    for d in DEPLOYMENTS:
        server = emulators[d.name]
        params = {
            "model": d.model,
            "api_base": server.root_url if d.root else server.base_url,
            "api_key": "sk-emulated",
            **d.extra,
        }
        entries.append({"model_name": d.name, "litellm_params": params, "model_info": {"max_input_tokens": d.window}})
    return entries


@pytest.fixture(scope="module")
def proxies(proxy_factory: ProxyFactory, emulators: dict[str, RecordingUpstream]) -> dict[str, ProxyProcess]:
    """The same models behind a proxy without callbacks and a proxy with the governance hook."""
    models = model_list(emulators)
    router = {"num_retries": 0}
    return {
        "bare": proxy_factory(callbacks=[], model_list=models, router_settings=router),
        "governed": proxy_factory(model_list=models, router_settings=router),
    }


# ---- chat-message builders ----------------------------------------------------------------------------


def user(text: str = "What is the weather in Paris?") -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str = "You are a terse assistant.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def assistant(text: str | None = "Let me check.", *call_ids: str, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, **extra}
    if call_ids:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            for i in call_ids
        ]
    return message


def tool(call_id: str, text: str = "Sunny, 21 C.") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
ANTHROPIC_TOOLS = [
    {"name": "get_weather", "description": "Current weather.", "input_schema": TOOLS[0]["function"]["parameters"]}
]


def a_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "get_weather", "input": {"city": "Paris"}}


def a_result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "Sunny, 21 C."}


def a_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def r_call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": '{"city": "Paris"}'}


def r_output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "Sunny, 21 C."}


def r_msg(role: str, text: str) -> dict[str, Any]:
    kind = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


LONG_HISTORY = (
    [system()]
    + [m for i in range(12) for m in (user(f"Question {i}: " + "lorem ipsum dolor " * 120), assistant(f"Answer {i}."))]
    + [user("And now?")]
)


# ---- the table -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Damage:
    id: str
    deployment: str
    body: dict[str, Any]  # without "model"
    expect: str  # distinctive text of the provider's error
    endpoint: str = "/v1/chat/completions"
    status: int = 400


M1, M2 = "abcDEF123", "ghiJKL456"
SIGNED = {
    "type": "thinking",
    "thinking": "The user wants the weather.",
    "signature": sign_thinking("The user wants the weather."),
}

DAMAGES = (
    # --- OpenAI chat and Responses
    Damage(
        "openai-unanswered-tool-call",
        "emu-openai",
        {"messages": [user(), assistant(None, "call_a1"), user("Never mind, thanks.")], "tools": TOOLS},
        "The following tool_call_ids did not have response messages: call_a1",
    ),
    Damage(
        "openai-orphan-tool-result",
        "emu-openai",
        {"messages": [user(), tool("call_gone"), user("Thanks.")], "tools": TOOLS},
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'",
    ),
    Damage(
        "openai-context-window",
        "emu-openai-small",
        {"messages": LONG_HISTORY},
        "This model's maximum context length is 4096 tokens",
    ),
    Damage(
        "responses-call-without-output",
        "emu-openai",
        {"input": [r_msg("user", "Weather?"), r_call("call_r1"), r_msg("user", "Never mind.")], "tools": []},
        "No tool output found for function call call_r1.",
        endpoint="/v1/responses",
    ),
    Damage(
        "responses-output-without-call",
        "emu-openai",
        {"input": [r_msg("user", "Weather?"), r_output("call_r9"), r_msg("user", "Thanks.")]},
        "No tool call found for function call output with call_id call_r9.",
        endpoint="/v1/responses",
    ),
    # --- Anthropic (/v1/messages, the client speaks Anthropic)
    Damage(
        "anthropic-orphan-tool-result",
        "emu-anthropic",
        {
            "max_tokens": 512,
            "tools": ANTHROPIC_TOOLS,
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [SIGNED, a_text("I would need a tool for that.")]},
                {"role": "user", "content": [a_result("toolu_gone"), a_text("Here is an old result.")]},
            ],
        },
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_gone",
        endpoint="/v1/messages",
    ),
    Damage(
        "anthropic-unanswered-tool-use",
        "emu-anthropic",
        {
            "max_tokens": 512,
            "tools": ANTHROPIC_TOOLS,
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [a_text("Checking."), a_use("toolu_a1")]},
                {"role": "user", "content": "Never mind, thanks."},
            ],
        },
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a1",
        endpoint="/v1/messages",
    ),
    Damage(
        "anthropic-prefill-on-4-6",
        "emu-anthropic-46",
        {
            "max_tokens": 512,
            "messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "The weather is"}],
        },
        "This model does not support assistant message prefill.",
        endpoint="/v1/messages",
    ),
    # --- Gemini (the client speaks OpenAI chat; LiteLLM translates to contents)
    Damage(
        "gemini-unanswered-function-call",
        "emu-gemini",
        {"messages": [user(), assistant(None, "call_g1"), user("Never mind, thanks.")], "tools": TOOLS},
        "the number of function response parts is equal to the number of function call parts",
    ),
    Damage(
        "gemini-empty-user-message",
        "emu-gemini",
        {"messages": [user(), assistant("Sunny."), user("")]},
        "required oneof field 'data' must have one initialized field",
    ),
    # --- Bedrock Converse
    Damage(
        "bedrock-starts-with-assistant",
        "emu-bedrock",
        {"messages": [assistant("Hello! How can I help?"), user()]},
        "A conversation must start with a user message.",
    ),
    Damage(
        "bedrock-unanswered-tool-use",
        "emu-bedrock",
        {"messages": [user(), assistant(None, "call_b1")], "tools": TOOLS},
        "Expected toolResult blocks at messages.2.content for the following Ids: call_b1",
    ),
    Damage(
        "bedrock-tool-result-and-text-in-one-turn",
        "emu-bedrock",
        {"messages": [user(), assistant(None, "call_b2"), tool("call_b2"), user("Thanks!")], "tools": TOOLS},
        "Conversation blocks and tool result blocks cannot be provided in the same turn.",
    ),
    # --- Mistral
    Damage(
        "mistral-orphan-tool-result",
        "emu-mistral",
        {"messages": [user(), tool(M1)], "tools": TOOLS},
        "Unexpected role 'tool' after role 'user'",
    ),
    Damage(
        "mistral-unanswered-tool-call",
        "emu-mistral",
        {"messages": [user(), assistant(None, M1, M2), tool(M1)], "tools": TOOLS},
        "Not the same number of function calls and responses",
    ),
    Damage(
        "mistral-tool-call-id-shape",
        "emu-mistral",
        {"messages": [user(), assistant(None, "call_m1"), tool("call_m1")], "tools": TOOLS},
        "Tool call id was call_m1 but must be a-z, A-Z, 0-9, with a length of 9.",
    ),
    Damage(
        "mistral-user-after-tool",
        "emu-mistral",
        {"messages": [user(), assistant(None, M1), tool(M1), user("And tomorrow?")], "tools": TOOLS},
        "Unexpected role 'user' after role 'tool'",
    ),
    # --- DeepSeek
    Damage(
        "deepseek-unanswered-tool-call",
        "emu-deepseek",
        {"messages": [user(), assistant(None, "call_d1"), user("Never mind, thanks.")], "tools": TOOLS},
        "(insufficient tool messages following tool_calls message)",
    ),
    Damage(
        "deepseek-v4-reasoning-content",
        "emu-deepseek-v4",
        {"messages": [user(), assistant(None, "call_d2"), tool("call_d2")], "tools": TOOLS},
        "The `reasoning_content` in the thinking mode must be passed back to the API.",
    ),
    # --- Moonshot (Kimi)
    Damage(
        "kimi-unanswered-tool-call",
        "emu-kimi",
        {"messages": [user(), assistant(None, "call_k1"), user("Never mind, thanks.")], "tools": TOOLS},
        "did not have response messages: call_k1",
    ),
    Damage(
        "kimi-thinking-reasoning-content",
        "emu-kimi-thinking",
        {"messages": [user(), assistant(None, "call_k2"), tool("call_k2")], "tools": TOOLS},
        "reasoning_content is missing in assistant tool call message at index 1",
    ),
    # --- GLM (Z.ai)
    Damage(
        "glm-unanswered-tool-call",
        "emu-glm",
        {"messages": [user(), assistant(None, "call_z1"), user("Never mind, thanks.")], "tools": TOOLS},
        "The messages parameter is illegal.",
    ),
    Damage(
        "glm-consecutive-assistant",
        "emu-glm",
        {"messages": [user(), assistant("Sunny."), assistant("And warm."), user("Thanks.")]},
        "The messages parameter is illegal.",
    ),
    Damage(
        "glm-no-user-message",
        "emu-glm",
        {"messages": [system(), assistant("Hello! How can I help?")]},
        "The messages parameter is illegal.",
    ),
    Damage(
        "glm-mid-conversation-system",
        "emu-glm",
        {"messages": [system(), user(), assistant("Sunny."), system("Answer in French."), user("Tomorrow?")]},
        "The messages parameter is illegal.",
    ),
    # --- vLLM with an alternation-enforcing chat template
    Damage(
        "vllm-consecutive-user",
        "emu-vllm",
        {"messages": [system(), user("First question."), user("Second question.")]},
        "conversation roles must alternate user/assistant/user/assistant/...",
    ),
    Damage(
        "vllm-mid-conversation-system",
        "emu-vllm",
        {"messages": [system(), user(), assistant("Sunny."), system("Answer in French."), user("Tomorrow?")]},
        "System message must be at the beginning.",
    ),
)


def send(proxy: ProxyProcess, damage: Damage) -> tuple[int, str]:
    status, _, raw = proxy.post(damage.endpoint, {"model": damage.deployment, **damage.body})
    return status, raw.decode(errors="replace")


def last_request(emulators: dict[str, RecordingUpstream], damage: Damage) -> Any:
    server = emulators[damage.deployment]
    assert server.requests, "nothing reached the emulated provider"
    return server.requests[-1]


def test_every_provider_is_covered() -> None:
    assert {BY_NAME[d.deployment].provider for d in DAMAGES} == set(PROVIDER_NAMES)


def litellm_fills_it_itself(damage: Damage) -> bool:
    """LiteLLM up to 1.100 marks kimi-k2-thinking as a reasoning model in its bundled map and fills
    `reasoning_content` on its own; from 1.108 the model is missing from the map and nothing is."""
    if damage.id != "kimi-thinking-reasoning-content":
        return False
    import litellm

    return bool(litellm.supports_reasoning(model="kimi-k2-thinking", custom_llm_provider="moonshot"))


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.id for d in DAMAGES])
def test_without_plugin_the_provider_rejects(
    proxies: dict[str, ProxyProcess], emulators: dict[str, RecordingUpstream], damage: Damage
) -> None:
    if litellm_fills_it_itself(damage):
        pytest.skip("this LiteLLM fills reasoning_content for kimi-k2-thinking itself")
    for server in emulators.values():
        server.clear()
    status, text = send(proxies["bare"], damage)
    assert status == damage.status, text
    assert damage.expect in text.replace('\\"', '"'), text
    recorded = last_request(emulators, damage)
    assert recorded.status == damage.status and recorded.rule is not None


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.id for d in DAMAGES])
def test_with_plugin_the_provider_accepts(
    proxies: dict[str, ProxyProcess], emulators: dict[str, RecordingUpstream], damage: Damage
) -> None:
    for server in emulators.values():
        server.clear()
    status, text = send(proxies["governed"], damage)
    recorded = last_request(emulators, damage)
    assert status == 200, f"{text}\nupstream got: {json.dumps(recorded.body)[:2000]}"
    assert recorded.status == 200 and recorded.rule is None
    deployment = BY_NAME[damage.deployment]
    assert validate(deployment.provider, str(recorded.kind), recorded.body, recorded.model) is None
    if damage.id == "anthropic-orphan-tool-result":  # the signed thinking block reached the provider untouched
        assert SIGNED in recorded.body["messages"][1]["content"]
