"""Codex's remote compaction (``compaction_trigger``) through a real proxy, on each kind of route.

A ``/v1/responses`` request shaped as Codex 0.169.0 sends it (its history, its tools, and last the
trigger) goes to a GLM deployment (no compaction of its own: the plugin answers), to a failing one
(the note answers), and to OpenAI's own Responses API (the emulating upstream compacts natively:
the plugin passes everything through). The answer must be what Codex requires — exactly one
``compaction`` output item, as SSE events or the JSON ``output`` — and the item, sent back, must
reach a provider as a message holding the summary, never as the token. The real Codex runs the same
way in ``test_real_clients.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_governance.testing import RecordingUpstream, ScriptedModel

from ..test_session_compaction import CODEX_EVENTS
from ._proxy import ProxyProcess
from .conftest import GOVERNANCE_CALLBACK, ProxyFactory

TOKEN_PREFIX = "litellm-governance.compaction.v1:"  # litellm_governance._session_compaction.TOKEN_PREFIX
OPENING = "[Session summary:"  # _session_compaction.SUMMARY_OPENING, its start
NOTE_START = "[Context note:"  # the deterministic note (_trace.NOTE_START)
INSTRUCTION = "CONTEXT CHECKPOINT COMPACTION"  # the summary request's instruction (_session_compaction.INSTRUCTION)
ROUTES = {  # model group -> (LiteLLM model, emulated provider)
    "cx-zai": ("zai/glm-4.6", "glm"),
    "cx-failing": ("zai/glm-failing", "glm"),
    "cx-openai": ("openai/gpt-5.5", "openai"),
}
SHELL_TOOL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command.",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
}


def message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def session(rounds: int = 4) -> list[dict[str, Any]]:
    """A Codex session: its developer messages, the environment, the task, then `rounds` shell calls."""
    items = [message("developer", "You are Codex."), message("user", "<environment_context/>")]
    items.append(message("user", "Run the scripted shell commands, one round at a time."))
    for r in range(1, rounds + 1):
        call = {"type": "function_call", "call_id": f"call_{r}_{r}_1", "name": "exec_command", "arguments": "{}"}
        call["arguments"] = json.dumps({"cmd": f"echo MARK-r{r}-c1"})
        items += [call, {"type": "function_call_output", "call_id": call["call_id"], "output": f"MARK-r{r}-c1 " * 300}]
    return items


def codex_request(group: str, items: list[dict[str, Any]], *, stream: bool = True) -> dict[str, Any]:
    return {
        "model": group,
        "input": items,
        "tools": [SHELL_TOOL],
        "tool_choice": "auto",
        "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "stream": stream,
    }


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, RecordingUpstream]]:
    servers = {
        group: RecordingUpstream(emulate=provider, script=ScriptedModel(rounds=8), fail_models={"glm-failing": 500})
        for group, (_, provider) in ROUTES.items()
    }
    for server in servers.values():
        server.start()
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def _models(upstreams: dict[str, RecordingUpstream]) -> list[dict[str, Any]]:
    entries = []
    for group, (model, _) in ROUTES.items():
        params: dict[str, Any] = {"model": model, "api_base": upstreams[group].base_url, "api_key": "sk-upstream"}
        if model.startswith("zai/"):  # Codex's `reasoning`: GLM has no reasoning_effort (LiteLLM 1.94 refuses it)
            params["drop_params"] = True
        entries.append({"model_name": group, "litellm_params": params, "model_info": {"max_input_tokens": 32_000}})
    return entries


@pytest.fixture(scope="module")
def governed(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    return proxy_factory(
        callbacks=[GOVERNANCE_CALLBACK], payload_sink=False, model_list=_models(upstreams), router_settings={}
    )


@pytest.fixture(scope="module")
def noting(proxy_factory: ProxyFactory, upstreams: dict[str, RecordingUpstream]) -> ProxyProcess:
    return proxy_factory(
        callbacks=[GOVERNANCE_CALLBACK],
        payload_sink=False,
        model_list=_models(upstreams),
        router_settings={},
        callback_settings={"governance": {"compaction": "note"}},
    )


def send(proxy: ProxyProcess, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """POST /v1/responses: status, headers, and the JSON answer or the SSE events (payloads, in order)."""
    status, headers, raw = proxy.post("/v1/responses", body)
    if not body.get("stream"):
        return status, headers, json.loads(raw)
    events = []
    for frame in raw.decode().split("\n\n"):
        data = [line[5:].strip() for line in frame.splitlines() if line.startswith("data:")]
        if data and data[0] != "[DONE]":
            events.append(json.loads(data[0]))
    return status, headers, events


def output_of(answer: Any) -> list[dict[str, Any]]:
    """The output items Codex counts: the ``response.output_item.done`` events of a stream, or the JSON ``output``."""
    if isinstance(answer, list):
        return [e["item"] for e in answer if e.get("type") == "response.output_item.done"]
    return list(answer["output"])


def posts(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    return [r.body for r in upstream.requests if r.method == "POST" and isinstance(r.body, dict)]


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_a_deployment_without_compaction_gets_a_summary_request_and_codex_one_item(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], stream: bool
) -> None:
    """GLM cannot compact: it receives an ordinary summary request (no tools, the instruction last, no
    trigger) and the client gets exactly one compaction item holding the model's summary — in the
    event order Codex accepts, or as the JSON ``output`` — with the header saying so."""
    upstream = upstreams["cx-zai"]
    upstream.clear()
    status, headers, answer = send(
        governed, codex_request("cx-zai", [*session(), {"type": "compaction_trigger"}], stream=stream)
    )
    assert status == 200, answer
    (item,) = output_of(answer)
    assert item["type"] == "compaction" and item["id"].startswith("cmp_")
    assert item["encrypted_content"].startswith(TOKEN_PREFIX)
    if stream:
        assert [e["type"] for e in answer] == CODEX_EVENTS
        assert answer[2]["item"] == item and answer[-1]["response"]["output"] == [item]
    (sent,) = posts(upstream)
    assert not sent.get("tools") and INSTRUCTION in json.dumps(sent["messages"][-1])
    assert "compaction_trigger" not in json.dumps(sent)
    assert "compacted_session=1" in headers.get("x-litellm-governance", "")


def test_the_item_comes_back_as_a_message_holding_the_summary(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """What Codex sends after the compaction (the item, byte for byte, then new items) reaches GLM —
    and OpenAI, which could not read the token either — with the summary as a user message."""
    _, _, answer = send(governed, codex_request("cx-zai", [*session(), {"type": "compaction_trigger"}]))
    (item,) = output_of(answer)
    after = [*session(0), item, message("user", "Go on.")]
    for group in ("cx-zai", "cx-openai"):
        upstream = upstreams[group]
        upstream.clear()
        status, _, answer = send(governed, codex_request(group, after))
        assert status == 200, answer
        dump = json.dumps(posts(upstream)[-1])
        assert TOKEN_PREFIX not in dump and OPENING in dump and "ROUNDS-DONE=4" in dump, group


def test_a_failing_model_is_answered_with_the_note(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """The deployment fails (500) before its answer starts: the gateway's own fallback answers with the
    deterministic note of the session — still exactly one item; Codex would exit on an error."""
    status, _, answer = send(governed, codex_request("cx-failing", [*session(), {"type": "compaction_trigger"}]))
    assert status == 200, answer
    (item,) = output_of(answer)
    assert [e["type"] for e in answer] == CODEX_EVENTS
    assert any(r.status == 500 for r in upstreams["cx-failing"].requests)  # the model was asked, and failed
    _, _, later = send(governed, codex_request("cx-zai", [*session(0), item, message("user", "Go on.")]))
    assert later  # (what the provider received is checked below)
    assert NOTE_START in json.dumps(posts(upstreams["cx-zai"])[-1])


def test_note_mode_asks_no_model(noting: ProxyProcess, upstreams: dict[str, RecordingUpstream]) -> None:
    """``compaction: note``: the item holds the note of the whole session, and no model is asked."""
    upstream = upstreams["cx-zai"]
    upstream.clear()
    status, _, answer = send(noting, codex_request("cx-zai", [*session(), {"type": "compaction_trigger"}]))
    assert status == 200, answer
    (item,) = output_of(answer)
    assert [e["type"] for e in answer] == CODEX_EVENTS and posts(upstream) == []
    upstream.clear()
    send(noting, codex_request("cx-zai", [*session(0), item, message("user", "Go on.")]))
    dump = json.dumps(posts(upstream)[-1])
    assert NOTE_START in dump and "MARK-r4-c1" in dump and TOKEN_PREFIX not in dump


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_openais_own_compaction_passes_through_untouched(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream], stream: bool
) -> None:
    """OpenAI's Responses API compacts itself: the trigger reaches it as sent, its item reaches the
    client byte for byte, and comes back to it byte for byte (the emulated OpenAI refuses content it did
    not issue)."""
    upstream = upstreams["cx-openai"]
    upstream.clear()
    status, _, answer = send(
        governed, codex_request("cx-openai", [*session(), {"type": "compaction_trigger"}], stream=stream)
    )
    assert status == 200, answer
    (item,) = output_of(answer)
    (sent,) = posts(upstream)
    assert sent["input"][-1] == {"type": "compaction_trigger"} and sent["tools"]
    assert item["type"] == "compaction" and not item["encrypted_content"].startswith(TOKEN_PREFIX)
    upstream.clear()
    status, _, answer = send(governed, codex_request("cx-openai", [*session(0), item, message("user", "Go on.")]))
    assert status == 200, answer
    assert item in posts(upstream)[-1]["input"]


def test_compact_threshold_is_left_out_where_the_deployment_has_no_compaction(
    governed: ProxyProcess, upstreams: dict[str, RecordingUpstream]
) -> None:
    """OpenAI's ``context_management: [{"type": "compaction", "compact_threshold": N}]``: LiteLLM would
    refuse it for GLM ("zai does not support parameters"); the plugin leaves it out there (the history
    is fitted to the window instead), and OpenAI gets it as sent."""
    management = [{"type": "compaction", "compact_threshold": 1_000}]
    for group in ("cx-zai", "cx-openai"):
        upstream = upstreams[group]
        upstream.clear()
        body = {**codex_request(group, session(1), stream=False), "context_management": management}
        status, _, answer = send(governed, body)
        assert status == 200, (group, answer)
        assert ("context_management" in json.dumps(posts(upstream)[-1])) == (group == "cx-openai")


def test_codexs_websocket_is_refused_where_the_gateway_answers(governed: ProxyProcess) -> None:
    """Codex with ``openai_base_url`` first tries a Responses WebSocket, where no callback sees what is
    streamed back: on a group the gateway answers for, a session announcing remote compaction is
    refused (Codex then uses HTTP); another client's session is not."""
    from websockets.sync.client import connect

    url = governed.base_url.replace("http://", "ws://") + "/v1/responses"
    frame = json.dumps({"type": "response.create", "model": "cx-zai", "input": session(1), "stream": True})
    headers = {"Authorization": f"Bearer {governed.master_key}"}
    codex = {**headers, "x-codex-beta-features": "remote_compaction_v2"}
    with connect(url, additional_headers=codex, open_timeout=30) as socket:
        socket.send(frame)
        refused = json.loads(socket.recv(timeout=30))
    assert refused["type"] == "error" and "over HTTP only" in refused["error"]["message"]
    with connect(url, additional_headers=headers, open_timeout=30) as socket:
        socket.send(frame)
        kinds = []
        while "response.completed" not in kinds and "error" not in kinds:
            kinds.append(json.loads(socket.recv(timeout=60))["type"])
    assert kinds[-1] == "response.completed", kinds
