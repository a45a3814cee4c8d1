"""Operators configure the plugin in the proxy's own YAML; clients may override only what the
operator allows, within bounds; internal failures never break a request unless fail_closed."""

from __future__ import annotations

from typing import Any

import pytest

from bench.sessions import make_session
from litellm_governance.testing import RecordingUpstream

from ..builders import calling, long_text, result, system, user
from ._proxy import ProxyProcess
from .conftest import ProxyFactory, model_entry


def models(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    return [model_entry("agent", "openai/up-agent", upstream.base_url, max_input_tokens=100_000)]


@pytest.fixture(scope="module")
def configured(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> ProxyProcess:
    return proxy_factory(
        # "agent-chat": a chat-only deployment, to which LiteLLM translates /v1/messages requests.
        model_list=[*models(upstream), model_entry("agent-chat", "hosted_vllm/up-agent-chat", upstream.base_url)],
        # Literal rules: these tests count the results compaction leaves whole (cache_stable,
        # the default at this 100k window, compacts twenty at a time instead).
        callback_settings={"governance": {"keep_recent": 2, "allow_request_overrides": True, "cache_stable": False}},
    )


@pytest.fixture(scope="module")
def fail_closed(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> ProxyProcess:
    return proxy_factory(model_list=models(upstream), callback_settings={"governance": {"fail_closed": True}})


READS = [system(), user("task")] + [
    m for i in range(6) for m in (calling(f"r{i}", content="Reading."), result(f"r{i}", long_text(2_000, f"f{i}")))
]


def post(proxy: ProxyProcess, body: dict[str, Any]) -> Any:
    with proxy.client() as client:
        return client.post("/v1/chat/completions", json=body)


def whole_results(upstream: RecordingUpstream, model: str) -> int:
    messages = upstream.bodies(model=model)[-1]["messages"]
    return sum(1 for m in messages if m["role"] == "tool" and "omitted from context" not in m["content"])


def test_options_come_from_the_proxy_yaml(configured: ProxyProcess, upstream: RecordingUpstream) -> None:
    """callback_settings.governance.keep_recent: 2 keeps two whole results instead of ten."""
    response = post(configured, {"model": "agent", "messages": READS})
    assert response.status_code == 200
    assert whole_results(upstream, "up-agent") == 2
    assert "compacted=4" in response.headers["x-litellm-governance"]


def test_allowed_client_override(configured: ProxyProcess, upstream: RecordingUpstream) -> None:
    """Where the operator allows it, a client can disable governance or change keep_recent."""
    assert (
        post(
            configured, {"model": "agent", "messages": READS, "metadata": {"governance": {"disable": True}}}
        ).status_code
        == 200
    )
    assert whole_results(upstream, "up-agent") == 6
    post(configured, {"model": "agent", "messages": READS, "metadata": {"governance": {"keep_recent": 4}}})
    assert whole_results(upstream, "up-agent") == 4


READS_ANTHROPIC = {
    "max_tokens": 1_000,
    "system": "You are a coding agent.",
    "messages": [{"role": "user", "content": "task"}]
    + [
        m
        for i in range(6)
        for m in (
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"r{i}", "name": "read_file", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"r{i}", "content": long_text(2_000, f"f{i}")}],
            },
        )
    ],
}


@pytest.mark.parametrize(("overrides", "whole"), [(None, 2), ({"keep_recent": 4}, 4), ({"disable": True}, 6)])
def test_overrides_hold_on_the_call_litellm_translates(
    configured: ProxyProcess, upstream: RecordingUpstream, overrides: dict[str, Any] | None, whole: int
) -> None:
    """/v1/messages to a chat deployment: LiteLLM translates the request into a chat call, which the
    plugin governs. The client's overrides (in ``litellm_metadata``) hold there too."""
    body: dict[str, Any] = {**READS_ANTHROPIC, "model": "agent-chat"}
    if overrides is not None:
        body["litellm_metadata"] = {"governance": overrides}
    with configured.client() as client:
        response = client.post("/v1/messages", json=body)
    assert response.status_code == 200, response.text[:500]
    assert whole_results(upstream, "up-agent-chat") == whole


@pytest.mark.parametrize(
    "override",
    [
        {"context_window_tokens": 10**12},
        {"context_window_tokens": -5},
        {"keep_recent": -1},
        {"safety_buffer_tokens": 0},
        {"fail_closed": True},
        "not an object",
    ],
)
def test_absurd_overrides_are_ignored(configured: ProxyProcess, upstream: RecordingUpstream, override: Any) -> None:
    """Negative or huge budgets and operator-only options are ignored; the operator's settings apply."""
    response = post(configured, {"model": "agent", "messages": READS, "metadata": {"governance": override}})
    assert response.status_code == 200
    assert whole_results(upstream, "up-agent") == 2


def test_client_can_only_lower_the_window(configured: ProxyProcess, upstream: RecordingUpstream) -> None:
    """A smaller window from the client is honoured (spend less); a larger one than the model's is capped."""
    session = make_session(200, seed=11)
    post(
        configured,
        {"model": "agent", "messages": session, "metadata": {"governance": {"context_window_tokens": 20_000}}},
    )
    lowered = len(upstream.bodies(model="up-agent")[-1]["messages"])
    post(
        configured,
        {"model": "agent", "messages": session, "metadata": {"governance": {"context_window_tokens": 5_000_000}}},
    )
    capped = len(upstream.bodies(model="up-agent")[-1]["messages"])
    post(configured, {"model": "agent", "messages": session})
    default = len(upstream.bodies(model="up-agent")[-1]["messages"])
    assert lowered < capped == default


def test_overrides_need_the_operators_permission(proxy: ProxyProcess, upstream: RecordingUpstream) -> None:
    """On a proxy that does not allow overrides, metadata.governance changes nothing."""
    with proxy.client() as client:
        client.post(
            "/v1/chat/completions",
            json={
                "model": "big",
                "messages": READS * 1,
                "metadata": {"governance": {"disable": True, "keep_recent": 0}},
            },
        )
    messages = upstream.bodies(model="up-big")[-1]["messages"]
    assert sum(1 for m in messages if m["role"] == "tool") == 6  # keep_recent=10 default: all whole
    assert all("omitted" not in m["content"] for m in messages if m["role"] == "tool")


def test_fail_closed_rejects_with_a_clear_400(fail_closed: ProxyProcess, upstream: RecordingUpstream) -> None:
    """With fail_closed: true, a request governance cannot read gets a 400 that says why, and nothing
    reaches the provider."""
    response = post(fail_closed, {"model": "agent", "messages": [["not", "a", "message"]]})
    assert response.status_code == 400
    assert "fail_closed" in response.text
    assert not upstream.bodies(model="up-agent")


def test_start_up_says_the_plugin_is_on_and_flags_a_misspelled_section(
    proxy_factory: ProxyFactory, upstream: RecordingUpstream
) -> None:
    """One line at start-up with the effective options; `governence:` gets a "did you mean"."""
    proxy = proxy_factory(
        model_list=models(upstream), callback_settings={"governence": {"keep_recent": 2}, "other_plugin": {}}
    )
    log = proxy.log_path.read_text(encoding="utf-8", errors="replace")
    active = [line for line in log.splitlines() if "litellm-governance" in line and "active" in line]
    assert len(active) == 1 and "keep_recent=10" in active[0] and "compactable_tools=agents" in active[0]
    assert "compact_batch=1 (20 with cache_stable)" in active[0] and "snip_watermark=derived" in active[0]
    warned = [line for line in log.splitlines() if "did you mean callback_settings.governance" in line]
    assert len(warned) == 1 and "callback_settings.governence is not read" in warned[0]
    assert "other_plugin" not in log


def test_a_misspelled_option_stops_start_up_with_a_clear_error(
    upstream: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`keep_recnt` stops the proxy, and the first error line says which option and what was meant."""
    from ._proxy import ProxyStartError, start_proxy

    config = {
        "model_list": models(upstream),
        "litellm_settings": {"callbacks": ["litellm_governance.proxy_handler_instance"]},
        "callback_settings": {"governance": {"keep_recnt": 3}},
    }
    with pytest.raises(ProxyStartError):
        start_proxy(config, workdir=tmp_path_factory.mktemp("bad_option"), timeout=90)
    log = next(tmp_path_factory.getbasetemp().glob("bad_option*/proxy.log")).read_text(errors="replace")
    first_error = next(line for line in log.splitlines() if "ERROR" in line)
    assert "litellm-governance cannot start" in first_error
    assert "'keep_recnt' (did you mean 'keep_recent'?)" in first_error


@pytest.mark.parametrize(
    ("model_info", "expected", "meant"),
    [
        ({"governance_profile": "stirct"}, "model_info.governance_profile is not one of", "strict"),
        ({"governance_profle": "strict"}, "model_info.governance_profle is not a field", "governance_profile"),
    ],
    ids=["profile", "field"],
)
def test_a_misspelled_deployment_field_stops_start_up_too(
    upstream: RecordingUpstream,
    tmp_path_factory: pytest.TempPathFactory,
    model_info: dict[str, Any],
    expected: str,
    meant: str,
) -> None:
    """`governance_profile: stirct` used to start the proxy and send that model's requests ungoverned
    (GLM then answers 1214): like a misspelled option, it stops start-up, naming the deployment, the
    field, and what was meant."""
    from ._proxy import ProxyStartError, start_proxy

    config = {
        "model_list": [
            *models(upstream),
            model_entry("glm", "zai/glm-4.6", upstream.base_url, max_input_tokens=32_768, **model_info),
        ],
        "litellm_settings": {"callbacks": ["litellm_governance.proxy_handler_instance"]},
    }
    workdir = tmp_path_factory.mktemp("bad_deployment")
    with pytest.raises(ProxyStartError):
        start_proxy(config, workdir=workdir, timeout=90)
    log = (workdir / "proxy.log").read_text(errors="replace")
    first_error = next(line for line in log.splitlines() if "ERROR" in line)
    assert "litellm-governance cannot start" in first_error and "model_list[1] (model_name 'glm')" in first_error
    assert expected in first_error and f"(did you mean {meant!r}?)" in first_error


def test_a_max_output_that_fills_a_deployments_window_is_said_at_start_up(
    upstream: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``max_output_tokens: 40000`` with a 32,768-token deployment used to start the proxy silently and
    then strip every request to a budget of 0: start-up now says so, naming the option and the
    deployment, and a long request keeps three quarters of the window less the safety buffer."""
    from ._proxy import start_proxy

    config = {
        "model_list": [
            *models(upstream),
            model_entry("glm", "zai/glm-4.6", upstream.base_url, max_input_tokens=32_768),
        ],
        "litellm_settings": {"callbacks": ["litellm_governance.proxy_handler_instance"], "num_retries": 0},
        "callback_settings": {"governance": {"max_output_tokens": 40_000}},
    }
    with start_proxy(config, workdir=tmp_path_factory.mktemp("max_output"), timeout=90) as proxy:
        warned = [line for line in proxy.log_tail(400).splitlines() if "WARNING" in line and "max_output" in line]
        assert warned and "model_list[1] (model_name 'glm')" in warned[0]
        assert "max_output_tokens (40000) is not below its window (32768)" in warned[0]
        status, headers, _ = proxy.post("/v1/chat/completions", {"model": "glm", "messages": make_session(240, seed=3)})
    assert status == 200
    assert "budget=23552" in headers["x-litellm-governance"] and "over_budget" not in headers["x-litellm-governance"]
