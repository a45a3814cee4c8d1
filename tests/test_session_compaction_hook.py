"""The gateway's answer to Codex's remote compaction, hook side (`integration.session_compaction`,
`integration.compaction_answers`): which requests it answers, what Codex receives — exactly one
compaction item, streamed or JSON, whatever the deployment's answer did — and what it reports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from types import MappingProxyType
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_governance import GovernanceConfig, GovernanceHook  # noqa: E402
from litellm_governance._session_compaction import TOKEN_PREFIX, decode_summary  # noqa: E402
from litellm_governance.integration import compaction_answers, routing  # noqa: E402
from litellm_governance.integration import session_compaction as sc  # noqa: E402

from .test_session_compaction import (  # noqa: E402
    CODEX_EVENTS,
    OPENAI_ITEM,
    TRIGGER,
    codex_compaction,
    codex_session,
    message,
)

pytestmark = pytest.mark.litellm


@pytest.fixture
def group(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The proxy's model group, as the hooks see it: the deployments' models (set by the test)."""
    models: list[str] = ["zai/glm-4.6"]

    def entries(_: object) -> list[dict[str, Any]]:
        return [{"litellm_params": {"model": name}} for name in models]

    monkeypatch.setattr(routing, "proxy_deployments", entries)
    return models


def planned(config: GovernanceConfig | None = None, rounds: int = 4) -> dict[str, Any]:
    """A Codex compaction request as the pre-call hook passes it on."""
    data = {**codex_compaction(rounds), "model": "codex-group", "litellm_metadata": {}}
    out = sc.before_routing(data, "responses", lambda: config or GovernanceConfig())
    assert out is not None and sc.plan_of(out) is not None
    return out


async def _stream(chunks: list[Any], error: BaseException | None = None) -> AsyncIterator[Any]:
    for chunk in chunks:
        yield chunk
    if error is not None:
        raise error


def sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def answered_text(text: str) -> list[dict[str, Any]]:
    """The events of a streamed answer with one assistant message holding `text` (and reasoning first)."""
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
    ]
    usage = {"input_tokens": 9_000, "output_tokens": 120, "total_tokens": 9_120}
    return [
        {"type": "response.created", "response": {"id": "resp_up", "output": []}},
        {"type": "response.output_text.delta", "delta": text[:5]},
        {"type": "response.output_text.delta", "delta": text[5:]},
        {"type": "response.completed", "response": {"id": "resp_up", "output": output, "usage": usage}},
    ]


def collect(request: dict[str, Any], chunks: list[Any], error: BaseException | None = None) -> list[dict[str, Any]]:
    """The events the proxy's stream carries to the client, parsed."""

    async def run() -> list[Any]:
        return [chunk async for chunk in compaction_answers.streamed(request, _stream(chunks, error))]

    events = []
    for chunk in asyncio.run(run()):
        for frame in chunk.decode().split("\n\n"):
            data = [line[5:] for line in frame.splitlines() if line.startswith("data:")]
            if data:
                events.append(json.loads(data[0]))
    return events


def items_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


class TestWhichRequestsTheGatewayAnswers:
    def test_a_group_without_compaction_gets_a_summary_request(self, group: list[str]) -> None:
        """GLM: the trigger becomes a summary request with a plan (in LiteLLM's metadata, where the answer
        hooks find it); the client's history and tools are untouched."""
        data = {**codex_compaction(4), "model": "codex-group", "litellm_metadata": {}}
        before = json.dumps([data["input"], data["tools"]])
        out = sc.before_routing(data, "responses", GovernanceConfig)
        assert json.dumps([data["input"], data["tools"]]) == before
        plan = sc.plan_of(out)
        assert out is not None and plan is not None and plan.mode == "model" and plan.tokens_before > 10_000
        assert out["tools"] == [] and TRIGGER not in out["input"]

    @pytest.mark.parametrize("models", [["openai/gpt-5.5"], ["azure/gpt-5.5", "openai/gpt-5.5"]])
    def test_a_group_that_compacts_natively_gets_the_request_as_sent(self, group: list[str], models: list[str]) -> None:
        """OpenAI's and Azure's own Responses API: nothing to answer, nothing changed."""
        group[:] = models
        data = {**codex_compaction(4), "model": "codex-group", "litellm_metadata": {}}
        assert sc.before_routing(data, "responses", GovernanceConfig) is None

    def test_a_mixed_group_is_answered_by_the_gateway(self, group: list[str]) -> None:
        """One deployment without compaction is enough: before routing no one knows which serves it."""
        group[:] = ["openai/gpt-5.5", "zai/glm-4.6"]
        assert sc.plan_of(sc.before_routing({**codex_compaction(2), "model": "g"}, "responses", GovernanceConfig))

    def test_our_items_are_read_back_for_every_group(self, group: list[str]) -> None:
        """OpenAI cannot read the gateway's token either: its items become messages there too; OpenAI's
        own item passes as it came."""
        group[:] = ["openai/gpt-5.5"]
        ours = planned_item()
        data = {"model": "g", "input": [*codex_session(0), OPENAI_ITEM, ours, message("user", "Go on.")]}
        out = sc.before_routing(data, "responses", GovernanceConfig)
        assert out is not None and out["input"][3] is OPENAI_ITEM and out["input"][4]["role"] == "user"
        assert TOKEN_PREFIX not in json.dumps(out)

    def test_the_summary_model_writes_the_summary(self, group: list[str]) -> None:
        """``summary_model``: the summary request goes to that group instead."""
        out = planned(GovernanceConfig(summary_model="summarizer"))
        assert out["model"] == "summarizer"

    def test_a_failure_lets_the_request_through(self, group: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """Fail open: an internal error leaves the request as it came (and says so once)."""
        monkeypatch.setattr(sc, "session_note", lambda *a, **k: 1 / 0)
        assert sc.before_routing({**codex_compaction(2), "model": "g"}, "responses", GovernanceConfig) is None


def planned_item() -> dict[str, Any]:
    from litellm_governance._session_compaction import compaction_item

    return compaction_item("ROUNDS-DONE=4. Next: round 5.")


class TestWhatCodexReceives:
    def test_the_stream_is_exactly_one_compaction_item(self, group: list[str]) -> None:
        """The events Codex accepts, in order; the model's ``<summary>`` in the one item; none of the
        deployment's own events (its reasoning, its message) counted as output; its usage reported."""
        request = planned()
        events = collect(request, sse(answered_text("<summary>ROUNDS-DONE=4.</summary>")))
        assert [e["type"] for e in events] == CODEX_EVENTS
        (item,) = items_of(events)
        assert decode_summary(item["encrypted_content"]) == "ROUNDS-DONE=4."
        assert events[2]["item"] == item and events[-1]["response"]["output"] == [item]
        assert events[-1]["response"]["usage"]["input_tokens"] == 9_000
        assert [e["sequence_number"] for e in events] == list(range(5))

    @pytest.mark.parametrize("form", ["pydantic", "dicts", "sse-split"])
    def test_any_form_of_the_deployments_stream_is_read(self, group: list[str], form: str) -> None:
        """LiteLLM hands the hook events as pydantic objects, dicts or SSE bytes (cut anywhere)."""
        from litellm.types.llms.openai import OutputTextDeltaEvent, ResponseCompletedEvent

        events = answered_text("<summary>FROM THE STREAM</summary>")
        if form == "pydantic":
            completed = {**events[3], "response": {**events[3]["response"], "object": "response", "created_at": 1}}
            chunks: list[Any] = [
                *(
                    OutputTextDeltaEvent.model_validate({**e, "item_id": "m", "output_index": 0, "content_index": 0})
                    for e in events[1:3]
                ),
                ResponseCompletedEvent.model_validate(
                    {**completed, "response": {**completed["response"], "model": "m"}}
                ),
            ]
        elif form == "dicts":
            chunks = events
        else:
            raw = b"".join(sse(events))
            chunks = [raw[i : i + 7] for i in range(0, len(raw), 7)]
        (item,) = items_of(collect(planned(), chunks))
        assert decode_summary(item["encrypted_content"]) == "FROM THE STREAM"

    @pytest.mark.parametrize(
        ("chunks", "error"),
        [
            (sse(answered_text("<summary>half")[:2]), RuntimeError("upstream went away")),
            ([], None),  # nothing at all
            (sse(answered_text("   ")), None),  # an empty answer
            (sse([{"type": "response.failed", "response": {"error": {"message": "overloaded"}}}]), None),
        ],
        ids=["broken-off", "empty-stream", "empty-text", "failed"],
    )
    def test_a_failed_answer_is_answered_with_the_note(
        self, group: list[str], chunks: list[Any], error: BaseException | None
    ) -> None:
        """Whatever went wrong with the model's answer, Codex gets one item — holding the note."""
        request = planned()
        events = collect(request, chunks, error)
        assert [e["type"] for e in events] == CODEX_EVENTS
        (item,) = items_of(events)
        assert decode_summary(item["encrypted_content"]) == sc.plan_of(request).note  # type: ignore[union-attr]

    def test_note_mode_answers_with_the_note_whatever_came(self, group: list[str]) -> None:
        request = planned(GovernanceConfig(compaction="note"))
        (item,) = items_of(collect(request, sse(answered_text("<summary>not this</summary>"))))
        assert decode_summary(item["encrypted_content"]).startswith("[Context note:")  # type: ignore[union-attr]

    def test_another_request_streams_as_it_came(self) -> None:
        """No plan: every chunk passes, the same objects, in order."""
        chunks = [object(), b"data: {}\n\n", "text"]

        async def run() -> list[Any]:
            return [c async for c in compaction_answers.streamed({"litellm_metadata": {}}, _stream(chunks))]

        assert asyncio.run(run()) == chunks

    @pytest.mark.parametrize("shape", ["pydantic", "dict"])
    def test_the_json_answer_is_exactly_one_compaction_item(self, group: list[str], shape: str) -> None:
        """``stream: false``: the response with ``output: [item]`` (its other fields as they were);
        a second hook finds it answered and leaves it."""
        from litellm.types.llms.openai import ResponsesAPIResponse

        events = answered_text("<summary>JSON SUMMARY</summary>")
        body = {**events[-1]["response"], "object": "response", "created_at": 1, "model": "glm-4.6"}
        response = ResponsesAPIResponse.model_validate(body) if shape == "pydantic" else body
        request = planned()
        answer = compaction_answers.answered(request, response)
        output = answer["output"] if isinstance(answer, dict) else answer.output
        (item,) = output
        assert item["type"] == "compaction" and decode_summary(item["encrypted_content"]) == "JSON SUMMARY"
        figures = request["litellm_metadata"]["spend_logs_metadata"]["governance_compaction"]  # logged, no content
        assert figures["outcome"] and figures["tokens_after"] > 0 and "JSON SUMMARY" not in json.dumps(figures)
        assert compaction_answers.answered(request, answer) is None
        assert compaction_answers.answered({"litellm_metadata": {}}, response) is None


class TestAtDeployment:
    def test_note_mode_answers_the_translated_call_with_litellms_mock(self, group: list[str]) -> None:
        """The chat call LiteLLM makes for GLM carries the note as ``mock_response``: no model is asked."""
        request = planned(GovernanceConfig(compaction="note"))
        inner = {"model": "zai/glm-4.6", "messages": [], "litellm_metadata": request["litellm_metadata"]}
        out = sc.at_deployment(inner, "chat")
        assert out is not None and out["mock_response"] == sc.NOTE_ANSWER
        assert sc.at_deployment(inner | {"litellm_metadata": {}}, "chat") is None

    def test_the_gateways_own_fallback_is_answered_with_the_note(self, group: list[str]) -> None:
        """Model mode: the request's fallbacks end with the same group, marked; that attempt's plan (in its
        own copy of the metadata) is the note's, and the mark never reaches LiteLLM."""
        request = planned()
        (chain,) = request["fallbacks"]
        last = chain["codex-group"][-1]
        assert last == {"model": "codex-group", sc.NOTE_FALLBACK: True}
        attempt = {**request, **last, "litellm_metadata": dict(request["litellm_metadata"])}
        out = sc.at_deployment(attempt, "responses")
        assert out is not None and sc.NOTE_FALLBACK not in out
        assert sc.plan_of(out).mode == sc.FALLBACK and sc.plan_of(request).mode == "model"  # type: ignore[union-attr]
        inner = sc.at_deployment({"model": "zai/glm-4.6", "litellm_metadata": out["litellm_metadata"]}, "chat")
        assert inner is not None and "mock_response" in inner

    def test_the_operators_fallbacks_come_first(self) -> None:
        """The chain is the client's (or the proxy's) for the group — its own, else the generic one — then the note."""
        mark = {"model": "g", sc.NOTE_FALLBACK: True}
        assert sc._with_note_fallback([{"g": ["backup"]}, {"h": ["x"]}], "g") == [{"h": ["x"]}, {"g": ["backup", mark]}]
        assert sc._with_note_fallback([{"*": ["any"]}], "g") == [{"*": ["any"]}, {"g": ["any", mark]}]
        assert sc._with_note_fallback(["backup"], "g") == [{"g": ["backup", mark]}]
        assert sc._with_note_fallback(None, "g") == [{"g": [mark]}]

    def test_compact_threshold_is_left_out_only_where_there_is_no_compaction(self) -> None:
        """OpenAI's ``context_management`` goes to OpenAI; GLM would refuse it (LiteLLM: "does not support")."""
        management = [{"type": "compaction", "compact_threshold": 1_000}]
        glm = {"model": "zai/glm-4.6", "input": codex_session(1), "context_management": management}
        out = sc.at_deployment(glm, "responses")
        assert out is not None and "context_management" not in out and out["input"] is glm["input"]
        assert sc.at_deployment({**glm, "model": "openai/gpt-5.5"}, "responses") is None


class TestWebSocket:
    @pytest.mark.parametrize(
        ("headers", "models", "refused"),
        [
            ({"x-codex-beta-features": "remote_compaction_v2"}, ["zai/glm-4.6"], True),
            ({"X-Codex-Beta-Features": "other,remote_compaction_v2"}, ["anthropic/claude-sonnet-4-5"], True),
            ({"x-codex-beta-features": "remote_compaction_v2"}, ["openai/gpt-5.5"], False),  # OpenAI compacts
            ({"user-agent": "another-client"}, ["zai/glm-4.6"], False),  # no compaction trigger to answer
        ],
    )
    def test_codexs_session_is_refused_where_the_gateway_answers(
        self, group: list[str], headers: dict[str, str], models: list[str], refused: bool
    ) -> None:
        group[:] = models
        data = {"model": "g", "proxy_server_request": {"headers": MappingProxyType(headers)}}
        hook = GovernanceHook()
        call = hook.async_pre_call_hook(None, None, data, "_aresponses_websocket")
        if refused:
            with pytest.raises(sc.WebSocketRefused, match="over HTTP only"):
                asyncio.run(call)
        else:
            assert asyncio.run(call) is None


def _call(ident: str) -> dict[str, object]:
    return {"id": ident, "type": "function", "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}


def test_the_report_says_compacted_session(group: list[str]) -> None:
    """Through the pre-call hook: the summary request is governed, and its report (the header's
    summary) names the step; the deployment hook's pass builds on it."""
    data = {**codex_compaction(12), "model": "codex-group", "litellm_metadata": {}}
    hook = GovernanceHook(context_window_tokens=16_000)
    out = asyncio.run(hook.async_pre_call_hook(None, None, data, "aresponses"))
    assert out is not None
    report = out["litellm_metadata"]["spend_logs_metadata"]["governance"]
    assert report["steps"]["compacted_session"] == 1 and report["summary"].startswith("compacted_session=1")
    # LiteLLM translates the request for GLM: the call it makes is fitted to the window, once.
    rounds = [
        message
        for n in range(10)
        for message in (
            {"role": "assistant", "content": None, "tool_calls": [_call(f"c{n}")]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "x" * 8_000},
        )
    ]
    messages = [{"role": "user", "content": "task"}, *rounds, {"role": "user", "content": "summarize"}]
    inner = {**out, "model": "zai/glm-4.6", "messages": messages}
    inner = asyncio.run(hook.async_pre_call_deployment_hook(inner, "acompletion")) or inner
    report = inner["litellm_metadata"]["spend_logs_metadata"]["governance"]
    assert "compacted_session=1" in report["summary"], report
    assert report["tokens_after"] <= report["budget"]


def test_the_metrics_outcome_is_compacted_session(group: list[str]) -> None:
    """A compaction request the gateway answered counts as ``compacted_session``, whatever else its pass did."""
    from litellm_governance.integration.metrics import OUTCOMES, outcome_of

    request = planned()
    sc.reported(request, "responses")
    entry = request["litellm_metadata"]["spend_logs_metadata"]["governance"]
    assert "compacted_session" in OUTCOMES and outcome_of(entry) == "compacted_session"
    assert outcome_of({"changed": True, "steps": {"snipped": 3}}) == "governed"


def test_reporting_and_the_websocket_check_fail_open(group: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An internal error in either lets the request (or the session) through: never a failed request."""
    monkeypatch.setattr(sc, "_report", lambda *a: 1 / 0)
    sc.reported(planned(), "responses")  # no exception
    monkeypatch.setattr(sc, "group_deployments", lambda *a: 1 / 0)
    headers = MappingProxyType({"x-codex-beta-features": "remote_compaction_v2"})
    sc.refuse_websocket({"model": "g", "proxy_server_request": {"headers": headers}}, "_aresponses_websocket")
