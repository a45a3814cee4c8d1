"""The hook's side of context editing (`integration.context_editing`): which deployments have which
feature, what the SDK path applies and answers, and how a streamed answer gets its applied edits."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from bench.formats import FORMATS as BODIES  # noqa: E402
from bench.sessions import make_session  # noqa: E402
from litellm_governance import GovernanceHook  # noqa: E402
from litellm_governance._context_editing import CLEARED_TOOL_RESULT  # noqa: E402
from litellm_governance._models import Deployment  # noqa: E402
from litellm_governance.integration import context_editing  # noqa: E402
from litellm_governance.integration.fields import EDITS_KEY, METADATA  # noqa: E402
from litellm_governance.testing import RecordingUpstream  # noqa: E402

pytestmark = pytest.mark.litellm

EVERYTHING = {"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"}
EDITS = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "tool_uses", "value": 1},
            "keep": {"type": "tool_uses", "value": 1},
        }
    ]
}


def tool_loop(uses: int = 3) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix it."}]
    for i in range(uses):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"step {i}"}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"OUT-{i} " + "x " * 300}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    return messages


class TestNativeFeatures:
    @pytest.mark.parametrize(
        ("model", "expected"),
        [
            ("anthropic/claude-sonnet-4-5", EVERYTHING),
            ("anthropic/claude-3-haiku-20240307", EVERYTHING),  # native: passes untouched, the provider answers
            ("bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0", {"clear_tool_uses_20250919", "compact_20260112"}),
            ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", set()),  # refuses the field
            ("bedrock/claude_platform/claude-sonnet-4-5", set()),  # LiteLLM drops the field
            ("vertex_ai/claude-opus-4-1@20250805", EVERYTHING),
            ("vertex_ai/claude-3-7-sonnet@20250219", set()),
            ("deepseek/deepseek-chat", set()),
        ],
    )
    def test_what_each_deployment_does_itself(self, model: str, expected: set[str]) -> None:
        """Anthropic has everything; Bedrock keeps clear_tool_uses and compaction (Claude 4 and
        later); Vertex passes the field to models that have it; the rest has nothing."""
        assert context_editing.native_features(Deployment(model), "anthropic", translated=False) == expected

    def test_a_translated_route_has_nothing(self) -> None:
        """Whatever the provider, a route LiteLLM translates has none of it."""
        assert context_editing.native_features(Deployment("openai/gpt-5.1"), "anthropic", translated=True) == set()
        assert context_editing.native_features(Deployment("openai/gpt-5.1"), "responses", translated=False) == {
            "compact_20260112"
        }
        assert context_editing.native_features(Deployment("zai/glm-4.6"), "responses", translated=True) == set()


class TestPrepare:
    def test_chat_requests_are_not_looked_at(self) -> None:
        """Chat completions carry none of it: decided without asking for the deployments."""

        def never() -> list[tuple[Deployment, bool]]:
            raise AssertionError("asked for the deployments")

        assert context_editing.prepare({"messages": [{"role": "user", "content": "hi"}]}, "chat", never) is None

    def test_a_request_anthropic_would_refuse_is_left_as_it_came(self) -> None:
        """clear_thinking without thinking: nothing applied, the field left for the provider to answer."""
        body = {
            "model": "m",
            "messages": tool_loop(),
            "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
        }
        assert context_editing.prepare(body, "anthropic", lambda: [(Deployment("zai/glm-4.6"), True)]) is None

    def test_applied_edits_are_remembered_for_the_answer_and_the_log(self) -> None:
        """The edited request holds the applied edits in LiteLLM's metadata (never the provider's)."""
        body = {"model": "m", "messages": tool_loop(), "context_management": EDITS, "metadata": {"user_id": "u"}}
        edited = context_editing.prepare(body, "anthropic", lambda: [(Deployment("zai/glm-4.6"), True)])
        assert edited is not None and "context_management" not in edited and "context_management" in body
        assert edited["metadata"] == {"user_id": "u"}
        (applied,) = edited["litellm_metadata"][context_editing.APPLIED_KEY]
        assert applied["cleared_tool_uses"] == 2
        logged = edited["litellm_metadata"]["spend_logs_metadata"][EDITS_KEY]
        assert logged == {"applied_edits": [applied]}


async def _chunks(*chunks: Any) -> AsyncIterator[Any]:
    for chunk in chunks:
        yield chunk


def _collect(request: dict[str, Any], *chunks: Any) -> list[Any]:
    async def run() -> list[Any]:
        return [c async for c in context_editing.streamed(request, _chunks(*chunks))]

    return asyncio.run(run())


APPLIED = {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 900}
REQUEST = {"litellm_metadata": {context_editing.APPLIED_KEY: (APPLIED,)}}


class TestStreamed:
    def test_the_message_delta_event_gets_the_applied_edits(self) -> None:
        """Split anywhere, bytes or text: the message_delta event carries the edits, the rest is as it came."""
        delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}
        stream = (
            "event: message_start\ndata: {}\n\n"
            f"event: message_delta\ndata: {json.dumps(delta)}\n\n"
            'event: message_stop\ndata: {"type": "message_stop"}\n\n'
        ).encode()
        out = b"".join(_collect(REQUEST, stream[:30], stream[30:77], stream[77:]))
        events = [json.loads(line[5:]) for line in out.decode().splitlines() if line.startswith("data:")]
        assert events[1]["context_management"] == {"applied_edits": [APPLIED]}
        assert out.decode().startswith("event: message_start\ndata: {}\n\n")
        assert out.decode().endswith('event: message_stop\ndata: {"type": "message_stop"}\n\n')

    def test_litellms_own_applied_edits_are_kept(self) -> None:
        """An edit LiteLLM applied (compact_20260112) stays, ours is added after it."""
        theirs = {"type": "compact_20260112", "error": "summary_model_not_configured"}
        delta = {"type": "message_delta", "context_management": {"applied_edits": [theirs]}}
        (out,) = _collect(REQUEST, f"data: {json.dumps(delta)}\n\n")
        assert json.loads(out[6:])["context_management"]["applied_edits"] == [theirs, APPLIED]

    def test_nothing_applied_nothing_touched(self) -> None:
        """Without applied edits every chunk goes through as the very object it was."""
        chunk = object()
        assert _collect({}, chunk) == [chunk]


@pytest.fixture
def hooked(request: pytest.FixtureRequest) -> Iterator[RecordingUpstream]:
    """An upstream, with ``GovernanceHook(**param)`` as LiteLLM's callback (default options)."""
    saved = list(litellm.callbacks)
    litellm.callbacks = [GovernanceHook(**getattr(request, "param", {}))]
    try:
        with RecordingUpstream(reply="fine") as upstream:
            yield upstream
    finally:
        litellm.callbacks = saved


def _edited_call_to_glm(upstream: RecordingUpstream) -> Any:
    """``litellm.anthropic.messages.acreate`` of a tool loop asking for `EDITS`, to GLM at `upstream`."""
    return asyncio.run(
        litellm.anthropic.messages.acreate(
            model="zai/glm-4.6",
            api_base=upstream.base_url,
            api_key="x",
            max_tokens=100,
            messages=tool_loop(),
            context_management=EDITS,
        )
    )


def test_sdk_translated_call_applies_the_edits_and_answers_them(hooked: RecordingUpstream) -> None:
    """``litellm.anthropic.messages.acreate`` to GLM with the hook: the edits are applied before
    LiteLLM translates the call, and the answer reports them."""
    response = _edited_call_to_glm(hooked)
    body = hooked.requests[-1].body
    assert "context_management" not in body
    assert "OUT-0" not in json.dumps(body) and "OUT-2" in json.dumps(body)
    (applied,) = response["context_management"]["applied_edits"]
    assert applied["cleared_tool_uses"] == 2 and "warnings" not in applied


@pytest.mark.parametrize("hooked", [{"enabled": False}], indirect=True)
def test_a_hook_the_operator_turned_off_does_nothing(
    hooked: RecordingUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``enabled: false`` makes the hook a no-op, as documented: the same call as above goes out with
    its ``context_management`` left to LiteLLM (no tool result cleared by the plugin)."""
    _edited_call_to_glm(hooked)
    sent = json.dumps(hooked.requests[-1].body)
    assert CLEARED_TOOL_RESULT not in sent and "OUT-2" in sent  # (LiteLLM 1.108 clears the others itself)


class TestBothHooks:
    """The proxy's two hooks on one request: context editing before routing where no deployment of the
    group has the feature, after routing for the deployment chosen; big histories governed off the
    event loop."""

    COMPACTED = [
        {"role": "user", "content": "Fix the parser."},
        *tool_loop(3)[1:],
        {"role": "assistant", "content": [{"type": "compaction", "content": "The parser fails on empty input."}]},
        {"role": "user", "content": "Go on."},
    ]

    @staticmethod
    def _both_hooks(
        body: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch,
        *,
        model: str = "zai/glm-4.6",
        call_type: str = "anthropic_messages",
        group: list[str] | None = None,
    ) -> dict[str, Any]:
        """The pre-call hook, then the deployment hook on what it passed on (as a proxy runs them; the
        model group's deployments `group`, or none the hook can see)."""
        from litellm_governance.integration import fields, routing

        entries = [{"litellm_params": {"model": name}} for name in group or ()]
        monkeypatch.setattr(routing, "proxy_deployments", lambda _: entries)
        metadata = METADATA[fields.format_of(call_type) or "chat"]
        governance = GovernanceHook()
        data = {**body, "model": model, metadata: {}}  # (a group named as its model)
        passed = asyncio.run(governance.async_pre_call_hook(None, None, data, call_type)) or data
        kwargs = {**passed, "model": model}
        return asyncio.run(governance.async_pre_call_deployment_hook(kwargs, call_type)) or kwargs

    @pytest.mark.parametrize(
        ("model", "call_type", "fmt"),
        [
            ("anthropic/claude-sonnet-4-5", "anthropic_messages", "anthropic"),
            ("openai/gpt-4.1", "responses", "responses"),
            ("zai/glm-4.6", "acompletion", "chat"),
        ],
    )
    def test_a_request_to_native_deployments_is_governed_before_routing(
        self, model: str, call_type: str, fmt: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Claude Code to Anthropic, Codex to OpenAI, chat to anything: governed before routing, and the
        deployment hook, which sees the same history for the same target, stands aside."""
        body = BODIES[fmt](make_session(60, seed=0))
        deployed = self._both_hooks(body, monkeypatch, model=model, call_type=call_type, group=[model])
        report = deployed[METADATA[fmt]]["spend_logs_metadata"]["governance"]
        assert report["stage"] == "pre_call" and report["format"] == fmt

    def test_compaction_is_replaced_before_routing_where_no_deployment_has_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A request to a group whose deployments have no compaction (GLM): the pre-call hook replaces the
        compaction block with its summary before routing, and nothing before it goes out."""
        body = {"messages": self.COMPACTED, "max_tokens": 1024}
        sent = self._both_hooks(body, monkeypatch, group=["zai/glm-4.6"])["messages"]
        assert {"type": "text", "text": "The parser fails on empty input."} in sent[-2]["content"]  # the summary
        assert '"compaction"' not in json.dumps(sent) and "OUT-0" not in json.dumps(sent)  # nothing before it

    @pytest.mark.parametrize(("chars", "off_loop"), [(600_000, True), (6_000, False)])
    def test_a_big_history_is_governed_off_the_event_loop(
        self, chars: int, off_loop: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A history with more text than `passes.OFF_LOOP_CHARS` is governed in a worker thread."""
        threads: list[bool] = []
        to_thread = asyncio.to_thread

        def recording(function: Any, *args: Any, **kwargs: Any) -> Any:
            def run() -> Any:
                threads.append(threading.current_thread() is not threading.main_thread())
                return function(*args, **kwargs)

            return to_thread(run)

        monkeypatch.setattr(asyncio, "to_thread", recording)
        body = {"messages": [{"role": "user", "content": "x " * (chars // 2)}], "max_tokens": 100}
        self._both_hooks(body, monkeypatch, call_type="acompletion")
        assert threads == ([True] if off_loop else [])

    def test_compaction_the_pre_call_pass_left_is_replaced_by_the_deployment_hook(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A history holding a compaction block is looked at again after routing, and the block replaced for
        the deployment that has no compaction (GLM: the summary as text, nothing before it)."""
        deployed = self._both_hooks({"messages": self.COMPACTED, "max_tokens": 1024}, monkeypatch)
        assert deployed["messages"][0] == {
            "role": "assistant",
            "content": [{"type": "text", "text": "The parser fails on empty input."}],
        }
        assert deployed["messages"][1:] == self.COMPACTED[-1:]

    def test_after_a_group_that_compacts_natively_the_deployment_checks_its_own(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The pre-call hook replaced no compaction (every deployment of the group has it), so the
        deployment hook does, for a deployment that has not (a fallback elsewhere): the block replaced."""
        body = {"messages": self.COMPACTED, "max_tokens": 1024}
        deployed = self._both_hooks(body, monkeypatch, group=["anthropic/claude-sonnet-4-5"])
        assert deployed["messages"][0]["content"] == [{"type": "text", "text": "The parser fails on empty input."}]


class TestHistoryFacts:
    def test_size_and_compaction_per_format(self) -> None:
        from litellm_governance.integration.fields import history_chars, holds_compaction

        blocks = [{"type": "text", "text": "abc"}, {"type": "tool_result", "content": "de"}, {"type": "compaction"}]
        assert history_chars([{"role": "user", "content": blocks}]) == 5
        assert holds_compaction([{"role": "user", "content": blocks}], "anthropic")
        items = [{"type": "function_call_output", "output": "xyz"}, {"type": "compaction", "encrypted_content": "e"}]
        assert history_chars(items) == 3 and holds_compaction(items, "responses")
        # a compaction *block* inside a Responses message item is no compaction item
        assert not holds_compaction([{"type": "message", "content": blocks}], "responses")
        assert history_chars("hello") == 5 and not holds_compaction("hello", "responses")
        assert history_chars(None) == 0 and not holds_compaction(None, "chat")

    def test_odd_values_are_not_sized(self) -> None:
        """A block whose text is a number made the size estimate raise (the pass then failed open, ungoverned)."""
        from litellm_governance.integration.fields import history_chars, holds_compaction

        odd = [{"role": "user", "content": [{"type": "text", "text": 5}, "bare", None]}, "not a message", 7]
        assert history_chars(odd) == 0 and not holds_compaction(odd, "anthropic")

    def test_a_request_with_an_odd_block_is_governed_not_skipped(self) -> None:
        """Before one walk sized the history, `len(5)` raised in the hook and the pass failed open:
        "governance skipped (internal error, TypeError ...)", the request sent ungoverned."""
        history = [{"role": "user", "content": [{"type": "text", "text": 5}]}]
        history += [{"role": "assistant", "content": "ok " * 300}, {"role": "user", "content": "more " * 300}] * 5
        data = {"model": "anthropic/claude-sonnet-4-5-20250929", "messages": history, "max_tokens": 100}
        data["litellm_metadata"] = {}
        hook = GovernanceHook(context_window_tokens=2_000)
        governed = asyncio.run(hook.async_pre_call_hook(None, None, data, "anthropic_messages"))
        assert governed is not None
        report = governed["litellm_metadata"]["spend_logs_metadata"]["governance"]
        assert "skipped" not in report["summary"] and report["steps"]["snipped"] > 0
