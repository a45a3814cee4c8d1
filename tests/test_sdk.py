"""The hook in Python: `litellm.callbacks = [GovernanceHook()]` with acompletion (streaming too),
Router.acompletion with a fallback, and the sync gap, against a local recording upstream."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

from litellm_governance import GovernanceConfig, GovernanceHook  # noqa: E402
from litellm_governance.integration import completion, govern_request  # noqa: E402
from litellm_governance.testing import RecordingUpstream  # noqa: E402

from .builders import assistant, calling, result, system, user  # noqa: E402
from .validity import problems  # noqa: E402

BROKEN = [
    system(),
    user("a"),
    user("b"),
    calling("c1", content="Reading."),
    result("c9", "orphan"),
    assistant("prefill"),
]
REPAIRED_FOR_GLM = [
    system(),
    user("a\n\nb"),
    calling("c1", content="Reading."),
    {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "read_file",
        "content": "[Tool result unavailable — call was interrupted or lost]",
    },
]

pytestmark = pytest.mark.litellm


@pytest.fixture(scope="module")
def upstream() -> Iterator[RecordingUpstream]:
    with RecordingUpstream(fail_models={"up-failing": 400}) as server:
        yield server


@pytest.fixture
def hooked(upstream: RecordingUpstream) -> Iterator[GovernanceHook]:
    upstream.clear()
    hook = GovernanceHook(GovernanceConfig())
    saved = list(litellm.callbacks)
    litellm.callbacks = [hook]
    try:
        yield hook
    finally:
        litellm.callbacks = saved


def last_messages(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    return upstream.bodies()[-1]["messages"]


def test_acompletion_is_governed(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """litellm.callbacks = [GovernanceHook()] governs litellm.acompletion."""
    asyncio.run(litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=BROKEN))
    assert last_messages(upstream) == REPAIRED_FOR_GLM


def test_streaming_acompletion_is_governed(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """stream=True is governed the same way."""

    async def run() -> str:
        stream = await litellm.acompletion(
            model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=BROKEN, stream=True
        )
        return "".join([chunk.choices[0].delta.content or "" async for chunk in stream])

    assert asyncio.run(run())
    assert last_messages(upstream) == REPAIRED_FOR_GLM


def test_caller_list_is_not_mutated(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """The caller's own message list is left as it was."""
    messages = [dict(m) for m in BROKEN]
    asyncio.run(litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=messages))
    assert messages == BROKEN


def test_report_reaches_the_logging_payload(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """Logging integrations see the report in the standard logging payload's metadata."""
    seen: list[dict[str, Any]] = []

    class Sink(litellm.integrations.custom_logger.CustomLogger):  # type: ignore[misc]
        async def async_log_success_event(
            self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            seen.append(kwargs["standard_logging_object"]["metadata"])

    litellm.callbacks = [hooked, Sink()]

    marker = {"test": "report-reaches-the-logging-payload"}

    def ours() -> list[dict[str, Any]]:
        # Logging is asynchronous: other tests' late records can arrive here too.
        return [
            m["spend_logs_metadata"] for m in seen if (m.get("spend_logs_metadata") or {}).get("test") == marker["test"]
        ]

    async def run() -> None:
        await litellm.acompletion(
            model="zai/glm-4.6",
            api_base=upstream.base_url,
            api_key="x",
            messages=BROKEN,
            metadata={"spend_logs_metadata": dict(marker)},
        )
        for _ in range(100):
            if ours():
                return
            await asyncio.sleep(0.05)

    asyncio.run(run())
    report = ours()[0]["governance"]
    assert report["profile"] == "strict" and report["steps"]["orphans_dropped"] == 1


def test_router_fallback_refits_to_the_smaller_deployment(hooked: GovernanceHook, upstream: RecordingUpstream) -> None:
    """Router.acompletion: the fallback deployment's smaller window is applied on the retry."""
    from bench.sessions import make_session

    router = litellm.Router(
        model_list=[
            {
                "model_name": "agent",
                "litellm_params": {"model": "openai/up-failing", "api_base": upstream.base_url, "api_key": "x"},
                "model_info": {"max_input_tokens": 200_000},
            },
            {
                "model_name": "agent-small",
                "litellm_params": {"model": "openai/up-small", "api_base": upstream.base_url, "api_key": "x"},
                "model_info": {"max_input_tokens": 8_000},
            },
        ],
        fallbacks=[{"agent": ["agent-small"]}],
        num_retries=0,
    )
    session = make_session(60, seed=9)
    asyncio.run(router.acompletion(model="agent", messages=session, max_tokens=256))
    big, small = upstream.bodies(model="up-failing")[-1], upstream.bodies(model="up-small")[-1]
    assert len(big["messages"]) == len(session)
    assert len(small["messages"]) < len(session)
    report = govern_request(small, model="openai/up-small", model_info={"max_input_tokens": 8_000}).report
    assert report.tokens_after <= report.budget and not report.changed


def test_sync_completion_gets_no_hook_but_the_wrapper_governs(
    hooked: GovernanceHook, upstream: RecordingUpstream
) -> None:
    """litellm.completion gives callbacks no way to change messages (documented); completion() does it."""
    litellm.completion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=BROKEN)
    assert problems(last_messages(upstream), "strict")  # sent as it was: LiteLLM's sync path has no hook
    completion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=BROKEN)
    assert last_messages(upstream) == REPAIRED_FOR_GLM


def test_sync_completion_uses_the_registered_hooks_options(upstream: RecordingUpstream) -> None:
    """`completion()` governs with the options of the GovernanceHook in litellm.callbacks, as the async
    calls do: a 16k window gives a budget of 10,976 (4,000 reserved for the output: a quarter of the
    window), not the model's."""
    from bench.sessions import make_session

    session = make_session(200, seed=5)
    saved = list(litellm.callbacks)
    litellm.callbacks = [GovernanceHook(context_window_tokens=16_000, cache_stable=False)]
    try:
        completion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=session)
        sent = last_messages(upstream)
        explicit = GovernanceConfig(context_window_tokens=16_000, cache_stable=False)
        expected = govern_request({"model": "zai/glm-4.6", "messages": session}, config=explicit)
        assert expected.report.budget == 10_976 and expected.report.changed
        assert [m.get("tool_call_id") or m["role"] for m in sent] == [
            m.get("tool_call_id") or m["role"] for m in expected.request["messages"]
        ]
        litellm.callbacks = [GovernanceHook(enabled=False)]
        completion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=session)
        assert len(last_messages(upstream)) == len(session)  # a disabled hook: sent as it is
    finally:
        litellm.callbacks = saved


def test_disabled_hook_changes_nothing(upstream: RecordingUpstream) -> None:
    """enabled=False turns the hook into a no-op."""
    upstream.clear()
    saved = list(litellm.callbacks)
    litellm.callbacks = [GovernanceHook(enabled=False)]
    try:
        asyncio.run(litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=BROKEN))
    finally:
        litellm.callbacks = saved
    assert len(last_messages(upstream)) == len(BROKEN)


def test_pydantic_messages_from_a_previous_response_are_accepted(
    hooked: GovernanceHook, upstream: RecordingUpstream
) -> None:
    """Appending response.choices[0].message (an object, not a dict) still gets governed."""
    first = asyncio.run(
        litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=[user("hi")])
    )
    messages = [user("hi"), first.choices[0].message, assistant("and more")]
    asyncio.run(litellm.acompletion(model="zai/glm-4.6", api_base=upstream.base_url, api_key="x", messages=messages))
    sent = last_messages(upstream)
    assert [m["role"] for m in sent] == ["user"]  # merged trailing assistants dropped for GLM


def test_fail_open_logs_a_warning_without_content(
    upstream: RecordingUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """A deployment naming an unknown profile is a configuration error: reported as one (naming the
    field, at most once a minute), and the request goes through unchanged."""
    upstream.clear()
    hook = GovernanceHook()
    kwargs = {"model": "openai/x", "messages": BROKEN, "metadata": {"model_info": {"governance_profile": "bogus"}}}
    with caplog.at_level(logging.DEBUG, logger="litellm_governance"):
        assert asyncio.run(hook.async_pre_call_deployment_hook(dict(kwargs), "acompletion")) is None
        assert asyncio.run(hook.async_pre_call_deployment_hook(dict(kwargs), "acompletion")) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "configuration error" in message and "model_info.governance_profile" in message and "bogus" not in message
    assert "prefill" not in caplog.text and "orphan" not in caplog.text


def test_fail_closed_rejects(upstream: RecordingUpstream) -> None:
    """With fail_closed, the same failure is a 400-class error instead."""
    hook = GovernanceHook(fail_closed=True)
    kwargs = {"model": "openai/x", "messages": BROKEN, "metadata": {"model_info": {"governance_profile": "bogus"}}}
    with pytest.raises(litellm.BadRequestError, match="fail_closed"):
        asyncio.run(hook.async_pre_call_deployment_hook(kwargs, "acompletion"))
