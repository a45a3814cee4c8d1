"""The hook in Python for the other two formats: `litellm.anthropic.messages.acreate` and
`litellm.aresponses` with `litellm.callbacks = [GovernanceHook()]`, native and translated,
streaming too, against a local recording upstream."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_governance import GovernanceHook  # noqa: E402
from litellm_governance.testing import RecordingUpstream  # noqa: E402

from .format_validity import anthropic_problems, responses_problems  # noqa: E402
from .validity import problems as chat_problems  # noqa: E402

THINKING = {"type": "thinking", "thinking": "Check the test first.", "signature": "c2lnbmVk"}
CLAUDE_CODE = [
    {"role": "user", "content": "Fix the failing test."},
    {
        "role": "assistant",
        "content": [
            THINKING,
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "t.py"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pytest"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def test(): ..."},
            {"type": "tool_result", "tool_use_id": "toolu_zz", "content": "orphan"},
        ],
    },
]
CODEX = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the failing test."}]},
    {"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"},
    {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"command":["pytest"]}'},
    {"type": "function_call_output", "call_id": "call_zz", "output": "orphan"},
]

pytestmark = pytest.mark.litellm


@pytest.fixture(scope="module")
def upstream() -> Iterator[RecordingUpstream]:
    with RecordingUpstream() as server:
        yield server


@pytest.fixture
def hooked(upstream: RecordingUpstream) -> Iterator[GovernanceHook]:
    upstream.clear()
    hook = GovernanceHook()
    saved = list(litellm.callbacks)
    litellm.callbacks = [hook]
    try:
        yield hook
    finally:
        litellm.callbacks = saved


def last(upstream: RecordingUpstream) -> tuple[str, dict[str, Any]]:
    record = [r for r in upstream.requests if r.method == "POST"][-1]
    return record.path, record.body


async def _drain(response: Any) -> None:
    if hasattr(response, "__aiter__"):
        async for _ in response:
            pass


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_anthropic_messages_native(hooked: GovernanceHook, upstream: RecordingUpstream, stream: bool) -> None:
    """acreate to an Anthropic deployment: governed in Anthropic format, thinking untouched, and
    nothing of ours in the request's `metadata` (Anthropic's own field)."""

    async def run() -> None:
        response = await litellm.anthropic.messages.acreate(
            model="anthropic/claude-sonnet-4-5-20250929",
            api_base=upstream.root_url,
            api_key="x",
            max_tokens=100,
            messages=CLAUDE_CODE,
            stream=stream,
        )
        await _drain(response)

    asyncio.run(run())
    path, body = last(upstream)
    assert path == "/v1/messages"
    assert anthropic_problems(body["messages"], prefill=False) == []
    assert body["messages"][1]["content"][0] == THINKING
    assert body["messages"][2]["content"][1]["is_error"] is True
    assert "governance" not in str(body.get("metadata"))


def test_anthropic_messages_translated_to_chat(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """acreate to GLM: LiteLLM translates to chat; the inner call is governed for GLM's rules."""
    asyncio.run(
        litellm.anthropic.messages.acreate(
            model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", max_tokens=100, messages=CLAUDE_CODE
        )
    )
    path, body = last(upstream)
    assert path == "/v1/chat/completions"
    assert chat_problems(body["messages"], "strict") == []


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_responses_native(hooked: GovernanceHook, upstream: RecordingUpstream, stream: bool) -> None:
    """aresponses to OpenAI: governed in Responses format; the reasoning item is verbatim."""

    async def run() -> None:
        response = await litellm.aresponses(
            model="openai/gpt-4.1", api_base=upstream.base_url, api_key="x", input=CODEX, stream=stream
        )
        await _drain(response)

    asyncio.run(run())
    path, body = last(upstream)
    assert path == "/v1/responses"
    assert responses_problems(body["input"]) == []
    assert body["input"][1] == CODEX[1]
    assert "governance" not in str(body.get("metadata"))


def test_responses_bridged_to_chat(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """aresponses to GLM: LiteLLM bridges to chat; the inner call is governed for GLM's rules."""
    asyncio.run(litellm.aresponses(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", input=CODEX))
    path, body = last(upstream)
    assert path == "/v1/chat/completions"
    assert chat_problems(body["messages"], "strict") == []
