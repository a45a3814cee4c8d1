"""The plugin under load and abuse in a real proxy (issue #5): 200 concurrent requests each reach the
provider exactly as `govern()` computes them in-process; the bounded token cache stays bounded and
thread-safe; and a malformed request is never turned into a 500 by the plugin."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from bench.sessions import make_session
from litellm_governance import GovernanceConfig, govern
from litellm_governance._tokens import token_cache
from litellm_governance.testing import RecordingUpstream

from ..validity import problems
from ._proxy import ProxyProcess
from .conftest import GOVERNANCE_CALLBACK, ProxyFactory, model_entry

CACHE_SIZE = 500
CONFIG = GovernanceConfig(token_cache_size=CACHE_SIZE)
TAG = re.compile(r"\[request (\d+)\]")


@dataclass(frozen=True)
class Deployment:
    """A proxy model group with one deployment: what governance computes for it in-process."""

    group: str
    model: str  # LiteLLM's provider/model
    upstream_model: str  # what the upstream sees
    window: int
    profile: str


DEPLOYMENTS = [
    Deployment("conc-glm-tiny", "zai/glm-4.6", "glm-4.6", 6_000, "strict"),
    Deployment("conc-vllm-small", "hosted_vllm/up-conc-strict", "up-conc-strict", 9_000, "strict"),
    Deployment("conc-openai-small", "openai/up-conc-small", "up-conc-small", 8_192, "permissive"),
    Deployment("conc-openai-big", "openai/up-conc-big", "up-conc-big", 128_000, "permissive"),
]


@pytest.fixture(scope="module")
def busy_upstream() -> Iterator[RecordingUpstream]:
    """A recording upstream of this module's own, taking 200 simultaneous connections."""
    with RecordingUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def cproxy(proxy_factory: ProxyFactory, busy_upstream: RecordingUpstream) -> ProxyProcess:
    """One proxy serving every deployment, with a 500-entry token cache from its YAML."""
    return proxy_factory(
        model_list=[
            model_entry(d.group, d.model, busy_upstream.base_url, max_input_tokens=d.window) for d in DEPLOYMENTS
        ],
        # Calibration off: what a deployment learns from the first answers would change the budget of
        # the later requests, and this test compares each with govern() at the profile's ratio.
        callback_settings={"governance": {"token_cache_size": CACHE_SIZE, "calibrate": False}},
        router_settings={"num_retries": 0},
    )


def conversation(i: int) -> list[dict[str, Any]]:
    """Request `i`'s messages: an agent session of varied length, its latest user message tagged."""
    n = (12, 40, 90, 160)[i % 4] + i % 7
    messages = make_session(n, seed=i, users_every=(None, 5)[i % 2])
    last_user = max(k for k, m in enumerate(messages) if m["role"] == "user")
    messages[last_user] = {**messages[last_user], "content": f"{messages[last_user]['content']} [request {i}]"}
    if i % 5 == 0:
        messages.append({"role": "assistant", "content": f"Trailing note {i}."})  # dropped for strict
    return messages


def request_body(i: int) -> tuple[Deployment, dict[str, Any]]:
    deployment = DEPLOYMENTS[i % len(DEPLOYMENTS)]
    body: dict[str, Any] = {"model": deployment.group, "messages": conversation(i)}
    max_tokens = (256, 512, None, 1_024)[(i // len(DEPLOYMENTS)) % 4]
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return deployment, body


def expected(deployment: Deployment, body: dict[str, Any]) -> Any:
    """What the deployment should receive: `govern()` for its model, window and the request's max_tokens."""
    return govern(
        body["messages"],
        model=deployment.model,
        max_output_tokens=body.get("max_tokens"),
        config=CONFIG,
        model_info={"max_input_tokens": deployment.window},
    )


def as_sent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as LiteLLM forwards them: some providers' transformations (zai's) leave out null fields."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


async def send_all(proxy: ProxyProcess, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(
        base_url=proxy.base_url, headers=proxy.headers, timeout=180, limits=limits, trust_env=False
    ) as client:
        return await asyncio.gather(*(client.post("/v1/chat/completions", json=b) for b in bodies))


@pytest.mark.scale
class TestConcurrentRequests:
    @pytest.mark.timeout(300)
    def test_two_hundred_concurrent_requests_each_get_their_own_governance(
        self, cproxy: ProxyProcess, busy_upstream: RecordingUpstream
    ) -> None:
        """200 different conversations at once, strict and permissive, tiny to large windows: every
        upstream body equals govern() of its own request, and its header reports that governance."""
        busy_upstream.clear()
        requests = [request_body(i) for i in range(200)]
        responses = asyncio.run(send_all(cproxy, [body for _, body in requests]))
        failed = [(i, r.status_code, r.text[:300]) for i, r in enumerate(responses) if r.status_code != 200]
        assert failed == [], cproxy.log_tail(40)

        received: dict[int, list[dict[str, Any]]] = {}
        models: dict[int, str] = {}
        for body in busy_upstream.bodies():
            tags = {int(t) for m in body["messages"] if m.get("role") == "user" for t in TAG.findall(str(m["content"]))}
            assert len(tags) == 1, f"an upstream body carries tags {tags}"
            (tag,) = tags
            assert tag not in received, f"request {tag} reached the upstream twice"
            received[tag], models[tag] = body["messages"], body["model"]
        assert sorted(received) == list(range(200))

        steps: set[str] = set()
        for i, (deployment, body) in enumerate(requests):
            want = expected(deployment, body)
            assert models[i] == deployment.upstream_model
            assert received[i] == as_sent(want.messages), f"request {i} ({deployment.group}) differs from govern()"
            assert problems(received[i], deployment.profile) == []
            assert responses[i].headers.get("x-litellm-governance") == want.report.summary(), f"request {i}"
            steps.update(want.report.steps)
        assert {"snipped", "compacted", "merged", "trailing_assistant_dropped"} <= steps  # the mix did exercise them


@pytest.mark.scale
class TestTokenCacheUnderThreads:
    @pytest.mark.timeout(300)
    def test_cache_stays_bounded_and_results_match_sequential(self) -> None:
        """16 threads governing 200 conversations with token_cache_size=500: the shared cache never
        holds more than 500 entries, and every result equals the sequential one."""
        jobs = [(i, *request_body(i)) for i in range(200)]
        cache = token_cache(CACHE_SIZE)
        cache.clear()
        sequential = {i: expected(d, body) for i, d, body in jobs}
        cache.clear()

        peak = 0
        done = threading.Event()

        def watch() -> None:
            nonlocal peak
            # Sampled every 0.2 ms: a busy loop would hold the GIL and starve the 16 workers.
            while not done.wait(0.0002):
                peak = max(peak, len(cache))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            with ThreadPoolExecutor(max_workers=16) as pool:
                # Each conversation twice, in different orders, so threads race on the same entries.
                order = [*jobs, *reversed(jobs)]
                futures = [(i, pool.submit(expected, d, body)) for i, d, body in order]
                concurrent = [(i, f.result()) for i, f in futures]
        finally:
            done.set()
            watcher.join()

        assert 0 < peak <= CACHE_SIZE
        assert len(cache) <= CACHE_SIZE
        for i, result in concurrent:
            assert result.messages == sequential[i].messages, f"conversation {i}"
            assert result.report == sequential[i].report, f"conversation {i}"


# ---- malformed bodies: the plugin never turns one into a 500 -----------------------------------

MALFORMED: dict[str, dict[str, Any]] = {
    "messages is a string": {"messages": "a string"},
    "messages is a number": {"messages": 42},
    "messages is null": {"messages": None},
    "messages of numbers": {"messages": [1, 2]},
    "numeric role": {"messages": [{"role": 5}]},
    "list role": {"messages": [{"role": ["user"], "content": "hi"}]},
    "no messages": {},
    "tools is a string": {"messages": [{"role": "user", "content": "hi"}], "tools": "x"},
    "metadata is a string": {"messages": [{"role": "user", "content": "hi"}], "metadata": "m"},
    "max_tokens is a string": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"},
    "content is an object": {"messages": [{"role": "user", "content": {"a": 1}}]},
    "tool_calls is a string": {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": "x"}]
    },
    "lone surrogate": {"messages": [{"role": "user", "content": "\ud800"}]},
}


def malformed_models(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    base = upstream.base_url
    return [
        model_entry("mal-openai", "openai/up-malformed", base, max_input_tokens=8_192),
        model_entry("mal-glm", "zai/glm-4.6", base, max_input_tokens=8_192),
        # gpt-4o's encoding (o200k_base) is the one tiktoken panics on for long blank runs.
        model_entry("mal-gpt-4o", "openai/gpt-4o", base, max_input_tokens=128_000),
    ]


@pytest.fixture(scope="module")
def with_plugin(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> ProxyProcess:
    return proxy_factory(callbacks=[GOVERNANCE_CALLBACK], payload_sink=False, model_list=malformed_models(upstream))


@pytest.fixture(scope="module")
def without_plugin(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> ProxyProcess:
    return proxy_factory(callbacks=[], payload_sink=False, model_list=malformed_models(upstream))


def post_raw(proxy: ProxyProcess, body: Any) -> httpx.Response:
    with proxy.client(timeout=120) as client:
        return client.post(
            "/v1/chat/completions", content=json.dumps(body), headers={"content-type": "application/json"}
        )


class TestMalformedBodies:
    @pytest.mark.parametrize("model", ["mal-openai", "mal-glm"])
    @pytest.mark.parametrize("name", list(MALFORMED))
    def test_plugin_adds_no_server_error(
        self, with_plugin: ProxyProcess, without_plugin: ProxyProcess, name: str, model: str
    ) -> None:
        """The plugin returns whatever the plain proxy returns for the same malformed body, or at least
        never a 5xx the plain proxy does not return."""
        body = {"model": model, **MALFORMED[name]}
        plain = post_raw(without_plugin, body).status_code
        governed = post_raw(with_plugin, body).status_code
        assert governed < 500 or plain >= 500, f"plugin: {governed}, plain proxy: {plain}"
        assert governed == plain or (governed < 500 and plain < 500), f"plugin: {governed}, plain proxy: {plain}"

    def test_not_json_and_not_an_object(self, with_plugin: ProxyProcess, without_plugin: ProxyProcess) -> None:
        """A body that is not JSON, or a JSON array, gets the same status with and without the plugin."""
        for raw in ("{not json", "[1, 2]", '"text"', "null"):
            statuses = []
            for proxy in (without_plugin, with_plugin):
                with proxy.client(timeout=60) as client:
                    statuses.append(
                        client.post(
                            "/v1/chat/completions", content=raw, headers={"content-type": "application/json"}
                        ).status_code
                    )
            assert statuses[0] == statuses[1] or max(statuses) < 500, f"{raw!r}: plain, plugin = {statuses}"

    @pytest.mark.scale
    @pytest.mark.timeout(300)
    @pytest.mark.parametrize("model", ["mal-openai", "mal-glm"])
    def test_huge_requests_pass_like_without_the_plugin(
        self, with_plugin: ProxyProcess, without_plugin: ProxyProcess, model: str
    ) -> None:
        """A 5 MB tool result and a 20,000-message session get the plain proxy's status through the plugin."""
        result = [
            {"role": "user", "content": "summarise the file"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "a", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
            },
            {
                "role": "tool",
                "tool_call_id": "a",
                "content": "".join(f"line {i}: data\n" for i in range(400_000))[:5_000_000],
            },
            {"role": "user", "content": "go on"},
        ]
        for messages in (result, make_session(20_000, seed=7)):
            body = {"model": model, "messages": messages, "max_tokens": 256}
            plain = post_raw(without_plugin, body).status_code
            governed = post_raw(with_plugin, body).status_code
            assert governed == plain == 200, f"plain proxy: {plain}, plugin: {governed}"

    @pytest.mark.timeout(180)
    def test_a_megabyte_of_spaces(self, with_plugin: ProxyProcess, without_plugin: ProxyProcess) -> None:
        """One user message of a million spaces is passed through by the plain proxy: the plugin must too."""
        body = {"model": "mal-gpt-4o", "messages": [{"role": "user", "content": " " * 1_000_000}]}
        plain = post_raw(without_plugin, body).status_code
        governed = post_raw(with_plugin, body).status_code
        assert (plain, governed) == (200, 200), f"plain proxy: {plain}, plugin: {governed}"
        assert with_plugin.alive()
