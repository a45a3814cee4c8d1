"""The plugin in a real LiteLLM proxy (loaded from its config file), asserting on what the
upstream provider actually received."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.sessions import make_session, make_tools
from litellm_governance import GovernanceConfig, govern
from litellm_governance._backfill import BACKFILL_CONTENT
from litellm_governance.testing import RecordingUpstream

from ..builders import assistant, calling, result, system, user
from ..validity import problems
from ._proxy import ProxyProcess
from .conftest import ProxyFactory, model_entry

SMALL_WINDOW = 8_192
TINY_GLM_WINDOW = 6_000


def governance_models(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    base = upstream.base_url
    return [
        model_entry("small", "openai/up-small", base, max_input_tokens=SMALL_WINDOW),
        model_entry("big", "openai/up-big", base, max_input_tokens=128_000),
        model_entry("glm", "zai/glm-4.6", base),
        model_entry("tiny-glm", "zai/glm-4.6", base, max_input_tokens=TINY_GLM_WINDOW),
        model_entry("big-failing", "openai/up-failing", base, max_input_tokens=128_000),
    ]


@pytest.fixture(scope="module")
def gproxy(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> ProxyProcess:
    """A proxy with the governance hook and a fallback from a big window to a small one."""
    return proxy_factory(
        model_list=governance_models(upstream),
        router_settings={"fallbacks": [{"big-failing": ["small"]}], "num_retries": 0},
    )


def chat(proxy: ProxyProcess, body: dict[str, Any]) -> Any:
    with proxy.client() as client:
        response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text[:500]
    return response


def sent(upstream: RecordingUpstream, model: str) -> list[dict[str, Any]]:
    bodies = upstream.bodies(model=model)
    assert bodies, f"the upstream received no request for {model}"
    return bodies[-1]["messages"]


BROKEN = [
    system("You are a coding agent."),
    user("Fix the failing test."),
    user("It is in tests/test_api.py."),
    calling("call_1", "call_2"),
    result("call_1", "def test_api(): ..."),
    result("call_1", "def test_api(): ... (again)"),
    result("call_9", "an orphan"),
    assistant("Let me also"),
]


def test_missing_orphan_and_duplicate_results_are_repaired(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """OpenAI rejects a call without its result and a result without its call: the upstream gets neither."""
    chat(gproxy, {"model": "big", "messages": BROKEN})
    messages = sent(upstream, "up-big")
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant", "tool", "tool", "assistant"]
    assert messages[4] == result("call_1", "def test_api(): ...")
    assert messages[5]["tool_call_id"] == "call_2" and messages[5]["content"] == BACKFILL_CONTENT
    assert problems(messages, "permissive") == []


def test_strict_provider_gets_alternating_roles(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """GLM (zai) gets the user run merged and no trailing assistant; OpenAI keeps both."""
    chat(gproxy, {"model": "glm", "messages": BROKEN})
    messages = sent(upstream, "glm-4.6")
    assert messages[1] == user("Fix the failing test.\n\nIt is in tests/test_api.py.")
    assert messages[-1]["role"] == "tool"
    assert problems(messages, "strict") == []


def test_small_window_deployment_gets_at_most_its_budget(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """A 120-message agent session into an 8,192-token deployment: what arrives fits, and keeps the task."""
    session = make_session(120, seed=3)
    chat(gproxy, {"model": "small", "messages": session, "tools": make_tools(), "max_tokens": 512})
    messages = sent(upstream, "up-small")
    assert len(messages) < len(session)
    assert messages[0] == session[0] and messages[1] == session[1]
    assert messages[-1] == session[-1]
    check = govern(
        messages,
        model="openai/up-small",
        tools=make_tools(),
        max_output_tokens=512,
        config=GovernanceConfig(context_window_tokens=SMALL_WINDOW),
    ).report
    assert check.tokens_after <= check.budget and not check.changed


def test_streaming_request_is_governed(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """stream=True goes through the same governance."""
    session = make_session(120, seed=4)
    with gproxy.client() as client:
        response = client.post(
            "/v1/chat/completions", json={"model": "tiny-glm", "messages": session, "stream": True, "max_tokens": 256}
        )
        assert response.status_code == 200
        assert "data: [DONE]" in response.text
    messages = sent(upstream, "glm-4.6")
    assert len(messages) < len(session)
    assert problems(messages, "strict") == []


def test_fallback_to_a_smaller_window_refits_the_request(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """big-failing (128k) fails; the fallback deployment (8k) receives a request fitted to 8k."""
    session = make_session(60, seed=5)
    chat(gproxy, {"model": "big-failing", "messages": session, "max_tokens": 512, "user": "fallback-test"})
    first = sent(upstream, "up-failing")
    fallback = sent(upstream, "up-small")
    assert len(first) > len(fallback)
    check = govern(
        fallback,
        model="openai/up-small",
        max_output_tokens=512,
        config=GovernanceConfig(context_window_tokens=SMALL_WINDOW),
    ).report
    assert check.tokens_after <= check.budget
    record = gproxy.wait_for_payload(lambda r: r.get("end_user") == "fallback-test" and r.get("event") == "success")
    assert record is not None, gproxy.log_tail()
    report = record["metadata"]["spend_logs_metadata"]["governance"]
    assert report["stage"] == "deployment" and report["context_window"] == SMALL_WINDOW
    assert report["tokens_before"] > report["tokens_after"]


def test_header_and_logging_payload_carry_the_report(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """The response says what was done; LiteLLM's standard logging payload holds the full report."""
    session = make_session(80, seed=6)
    response = chat(gproxy, {"model": "small", "messages": session, "max_tokens": 512, "user": "header-test"})
    header = response.headers.get("x-litellm-governance")
    assert header is not None and "snipped=" in header and "tokens=" in header
    record = gproxy.wait_for_payload(lambda r: r.get("end_user") == "header-test")
    assert record is not None, gproxy.log_tail()
    report = record["metadata"]["spend_logs_metadata"]["governance"]
    assert report["changed"] and report["steps"]["snipped"] > 0 and report["tokens_after"] <= report["budget"]
    assert report["summary"] == header
    # One deployment: the pass after routing found the pre-call pass's work for the same target
    # and returned at once, so the report is still the pre-call pass's.
    assert report["stage"] == "pre_call"
    text = json.dumps(report)
    assert session[1]["content"][:40] not in text  # counts and figures, never content


def test_other_endpoints_are_left_alone(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """/v1/completions (prompt) and /v1/responses (input) pass through untouched."""
    with gproxy.client() as client:
        assert client.post("/v1/completions", json={"model": "small", "prompt": "say hi"}).status_code == 200
        response = client.post("/v1/responses", json={"model": "small", "input": "say hi"})
        assert response.status_code == 200, response.text[:300]
    assert upstream.bodies(model="up-small", kind="completions")[-1]["prompt"] == "say hi"
    assert upstream.bodies(model="up-small", kind="responses")[-1]["input"] == "say hi"


def test_unchanged_request_reaches_the_upstream_as_sent(gproxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """A valid request within budget is not touched."""
    messages = [system(), user(), calling("a", content="Reading."), result("a", "x"), assistant("done"), user("thanks")]
    response = chat(gproxy, {"model": "big", "messages": messages})
    assert sent(upstream, "up-big") == messages
    assert response.headers["x-litellm-governance"].startswith("unchanged; tokens=")
    assert "profile=permissive; budget=" in response.headers["x-litellm-governance"]
