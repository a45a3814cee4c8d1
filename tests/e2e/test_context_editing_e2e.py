"""Anthropic context editing and compaction blocks through a real proxy, on every kind of route.

``/v1/messages`` requests asking for ``clear_tool_uses_20250919`` (every parameter) go to a native
``anthropic/`` deployment, a chat provider LiteLLM translates to (``zai/``) and OpenAI's Responses
API (``openai/``), each behind its own emulating upstream. Native: the field reaches the provider
untouched and the emulated Anthropic applies it. Translated: the plugin applies the edits itself —
clearing what the emulated Anthropic clears for the same request (written from Anthropic's docs, not
from the plugin) — removes the field, and answers ``context_management.applied_edits``, streaming
included. Without the plugin LiteLLM's own polyfill runs on the chat route (in 1.108 ``trigger`` and
``keep`` only); with it, nothing is cleared twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream
from litellm_governance.testing.emulation import count_prompt_tokens
from litellm_governance.testing.emulation.editing import effective_request

from ._proxy import ProxyProcess
from .conftest import GOVERNANCE_CALLBACK, ProxyFactory

LITELLM_PLACEHOLDER = "[Cleared by context management]"  # LiteLLM 1.108's polyfill
OURS = "[Tool result cleared by context editing]"  # litellm_governance._context_editing.CLEARED_TOOL_RESULT
EDITS = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "tool_uses", "value": 2},
            "keep": {"type": "tool_uses", "value": 2},
            "clear_at_least": {"type": "input_tokens", "value": 100},
            "exclude_tools": ["Read"],
            "clear_tool_inputs": True,
        }
    ]
}
ROUTES = {  # model group -> (LiteLLM model, emulated provider, api_base at the root?)
    "cm-anthropic": ("anthropic/claude-sonnet-4-5", "anthropic", True),
    "cm-zai": ("zai/glm-4.6", "glm", False),
    "cm-openai": ("openai/gpt-5.1", "openai", False),
}


def request(group: str, *, stream: bool = False, context_management: Any = EDITS, **extra: Any) -> dict[str, Any]:
    """Six tool uses (the second a Read), each result ~2k characters, a question with the last."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the parser."}]
    for i in range(6):
        name = "Read" if i == 1 else "Bash"
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {"command": f"cat part{i}.txt"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"RESULT-{i} " + "data " * 400}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    messages[-1]["content"].append({"type": "text", "text": "What now?"})
    body: dict[str, Any] = {"model": group, "max_tokens": 1024, "stream": stream, "messages": messages, **extra}
    if context_management is not None:
        body["context_management"] = context_management
    return body


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, RecordingUpstream]]:
    servers = {group: RecordingUpstream(reply="fine", emulate=provider) for group, (_, provider, _) in ROUTES.items()}
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _models(upstreams: dict[str, RecordingUpstream]) -> list[dict[str, Any]]:
    # A group of two: GLM first, Claude behind it (order 2). Before routing the plugin cannot tell
    # which one serves the request (one has context editing): it is left to the deployment hook.
    mixed = [
        {**entry, "model_name": "cm-mixed", "litellm_params": {**entry["litellm_params"], "order": order}}
        for order, entry in enumerate(_entries(upstreams, ("cm-zai", "cm-anthropic")), 1)
    ]
    return [*_entries(upstreams, tuple(ROUTES)), *mixed]


def _entries(upstreams: dict[str, RecordingUpstream], groups: tuple[str, ...]) -> list[dict[str, Any]]:
    entries = []
    for group in groups:
        model, _, root = ROUTES[group]
        server = upstreams[group]
        params = {"model": model, "api_base": server.root_url if root else server.base_url, "api_key": "sk-upstream"}
        if model.startswith("zai/"):  # GLM has no reasoning_effort, LiteLLM's mapping of `thinking`: dropped
            params["drop_params"] = True
        entries.append({"model_name": group, "litellm_params": params, "model_info": {"max_input_tokens": 200_000}})
    return entries


@pytest.fixture(scope="module")
def governed(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    return proxy_factory(callbacks=[GOVERNANCE_CALLBACK], payload_sink=False, model_list=_models(upstreams))


@pytest.fixture(scope="module")
def plain(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    return proxy_factory(callbacks=[], payload_sink=False, model_list=_models(upstreams))


def send(proxy: ProxyProcess, body: dict[str, Any]) -> tuple[int, Any]:
    """POST /v1/messages; the JSON answer, or the SSE events' payloads when streaming."""
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "context-management-2025-06-27"}
    with proxy.client(timeout=120) as client:
        response = client.post("/v1/messages", json=body, headers=headers)
    if not body.get("stream"):
        return response.status_code, response.json()
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    return response.status_code, [e for e in events if isinstance(e, dict)]


def applied_edits(answer: Any) -> list[dict[str, Any]]:
    """``context_management.applied_edits`` of a JSON answer or of a stream's ``message_delta``."""
    if isinstance(answer, list):
        deltas = [e for e in answer if e.get("type") == "message_delta"]
        managed = deltas[-1].get("context_management") if deltas else None
    else:
        managed = answer.get("context_management")
    return list((managed or {}).get("applied_edits") or [])


def received(upstream: RecordingUpstream) -> dict[str, Any]:
    bodies = [r.body for r in upstream.requests if r.method == "POST" and isinstance(r.body, dict)]
    assert bodies, "the upstream received nothing"
    return bodies[-1]


def cleared_by_the_emulated_anthropic(body: dict[str, Any]) -> set[int]:
    """Which results Anthropic clears for this request, per the emulator (written from its docs)."""
    effective, _ = effective_request(body, lambda b: count_prompt_tokens("messages", b))
    dump = json.dumps(effective)
    return {i for i in range(6) if f"RESULT-{i} " not in dump}


def cleared_in(body: dict[str, Any]) -> set[int]:
    dump = json.dumps(body)
    return {i for i in range(6) if f"RESULT-{i} " not in dump}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("group", ["cm-zai", "cm-openai"])
def test_translated_routes_get_the_edits_applied_by_the_plugin(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], group: str, stream: bool
) -> None:
    """A provider without context editing: the plugin clears what Anthropic would (exclude_tools,
    clear_tool_inputs and clear_at_least included), removes the field, and answers applied_edits."""
    upstream = upstreams[group]
    upstream.clear()
    body = request(group, stream=stream)
    status, answer = send(governed, body)
    assert status == 200, answer
    got = received(upstream)
    assert "context_management" not in got
    assert cleared_in(got) == cleared_by_the_emulated_anthropic(body) == {0, 2, 3}
    dump = json.dumps(got)
    assert LITELLM_PLACEHOLDER not in dump and dump.count(OURS) == 3
    assert "cat part0.txt" not in dump and "cat part1.txt" in dump  # inputs cleared, the Read kept
    (edit,) = applied_edits(answer)
    assert edit["type"] == "clear_tool_uses_20250919" and edit["cleared_tool_uses"] == 3
    assert edit["cleared_input_tokens"] > 1_000


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_native_anthropic_gets_the_field_untouched(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], stream: bool
) -> None:
    """``anthropic/`` has context editing: the request reaches it with the field as sent, nothing
    cleared on the way; the provider applies the edits and reports them."""
    upstream = upstreams["cm-anthropic"]
    upstream.clear()
    body = request("cm-anthropic", stream=stream)
    status, answer = send(governed, body)
    assert status == 200, answer
    got = received(upstream)
    assert got["context_management"] == EDITS and cleared_in(got) == set()
    (edit,) = applied_edits(answer)
    assert edit["cleared_tool_uses"] == 3


def test_without_the_plugin_litellms_own_polyfill_runs(
    plain: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """Without the plugin, LiteLLM's own polyfill clears results on the chat route — in 1.108 with
    ``trigger`` and ``keep`` only (exclude_tools ignored, the Read cleared too, and it says so); the
    plugin, running before it, is what applies every parameter."""
    upstream = upstreams["cm-zai"]
    upstream.clear()
    status, answer = send(plain, request("cm-zai"))
    assert status == 200, answer
    got = received(upstream)
    assert LITELLM_PLACEHOLDER in json.dumps(got) and "context_management" not in got
    (edit,) = applied_edits(answer)
    if "exclude_tools_ignored" in edit.get("warnings", []):  # LiteLLM 1.108 (the pinned version)
        assert cleared_in(got) == {0, 1, 2, 3}
    else:  # a LiteLLM that honours exclude_tools (1.110)
        assert 1 not in cleared_in(got)


@pytest.mark.parametrize("group", ["cm-zai", "cm-openai"])
def test_claude_codes_keep_all_clears_nothing_and_the_field_goes(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], group: str
) -> None:
    """What Claude Code sends on every request (clear_thinking, keep all): nothing to clear, the
    provider never sees the field, the answer reports no edit."""
    upstream = upstreams[group]
    upstream.clear()
    keep_all = {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}
    thinking = {"type": "enabled", "budget_tokens": 8191, "display": "omitted"}  # as Claude Code sends it
    body = request(group, context_management=keep_all, thinking=thinking)
    status, answer = send(governed, body)
    assert status == 200, answer
    got = received(upstream)
    assert "context_management" not in got and cleared_in(got) == set()
    assert applied_edits(answer) == []


SUMMARY = "SUMMARY-TEXT: the parser fix is half done; tests/test_parse.py still fails."


def compacted(group: str) -> dict[str, Any]:
    """The request after Anthropic compacted the first four tool uses: their turns, then the turn
    holding the compaction block, then the fifth and sixth tool uses."""
    body = request(group, context_management=None)
    compaction = {"role": "assistant", "content": [{"type": "compaction", "content": SUMMARY}]}
    messages = body["messages"]
    body["messages"] = [*messages[:9], compaction, {"role": "user", "content": "Continue."}, *messages[11:]]
    return body


@pytest.mark.parametrize("group", ["cm-zai", "cm-openai"])
def test_a_compaction_block_reaches_a_translated_route_as_its_summary(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], group: str
) -> None:
    """The provider gets the summary text where the compaction block was, and none of the history
    before it (LiteLLM's own handling, a system-prompt prefix, does not run: no block is left)."""
    upstream = upstreams[group]
    upstream.clear()
    body = compacted(group)
    status, answer = send(governed, body)
    assert status == 200, answer
    dump = json.dumps(received(upstream))
    assert SUMMARY in dump and '"compaction"' not in dump
    assert "Previous conversation summary" not in dump
    assert all(f"RESULT-{i} " not in dump for i in range(4)) and "RESULT-5 " in dump


def test_a_compaction_block_reaches_anthropic_byte_for_byte(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """``anthropic/`` reads compaction blocks itself: the whole history goes, block and all."""
    upstream = upstreams["cm-anthropic"]
    upstream.clear()
    body = compacted("cm-anthropic")
    status, answer = send(governed, body)
    assert status == 200, answer
    assert received(upstream)["messages"] == body["messages"]


def test_a_compaction_block_in_a_group_with_a_native_deployment_is_replaced_after_routing(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """Before routing the history is not looked at for compaction blocks (Claude, in the group, reads
    them); the deployment hook looks, for GLM, which the group routes to: the summary, not the block."""
    upstream = upstreams["cm-zai"]
    upstream.clear()
    status, answer = send(governed, compacted("cm-mixed"))
    assert status == 200, answer
    dump = json.dumps(received(upstream))
    assert SUMMARY in dump and '"compaction"' not in dump
    assert all(f"RESULT-{i} " not in dump for i in range(4)) and "RESULT-5 " in dump


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_group_with_a_native_deployment_is_decided_after_routing(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], stream: bool
) -> None:
    """GLM and Claude in one group: the pre-call hook leaves the edits alone (Claude has them); the
    deployment hook applies them for GLM, and the answer — streamed too — reports them."""
    upstream = upstreams["cm-zai"]
    upstream.clear()
    status, answer = send(governed, request("cm-mixed", stream=stream))
    assert status == 200, answer
    got = received(upstream)
    assert "context_management" not in got and cleared_in(got) == {0, 2, 3}
    (edit,) = applied_edits(answer)
    assert edit["cleared_tool_uses"] == 3
