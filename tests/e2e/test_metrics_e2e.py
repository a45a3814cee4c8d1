"""Prometheus metrics in a real proxy: LiteLLM's ``prometheus`` callback next to the plugin, governed and
unchanged requests, then ``/metrics`` scraped with the master key: the counts and the tokens removed per
step are the ones the response headers reported. Once with one worker, once with two
(``--num_workers 2``, ``PROMETHEUS_MULTIPROC_DIR``; a fresh proxy process: the directory must be set
before LiteLLM and prometheus_client are imported)."""

from __future__ import annotations

import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.agent_shapes import claude_code_body  # noqa: E402
from bench.sessions import make_session  # noqa: E402
from litellm_governance.testing import RecordingUpstream  # noqa: E402

from ._proxy import ProxyProcess  # noqa: E402
from .conftest import FAILING_UPSTREAM_MODEL, GOVERNANCE_CALLBACK, ProxyFactory, model_entry  # noqa: E402

HEADER = "x-litellm-governance"


def models(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    base = upstream.base_url
    return [
        model_entry("glm", "zai/glm-4.6", base, max_input_tokens=32_768),
        model_entry("small", "openai/up-small", base, max_input_tokens=8_192),
        model_entry("failing", f"openai/{FAILING_UPSTREAM_MODEL}", base, max_input_tokens=8_192),
    ]


def start(proxy_factory: ProxyFactory, upstream: RecordingUpstream, **options: Any) -> ProxyProcess:
    return proxy_factory(
        ["prometheus", GOVERNANCE_CALLBACK],
        payload_sink=False,
        model_list=models(upstream),
        router_settings={"num_retries": 0},
        **options,
    )


def scrape(proxy: ProxyProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, by name and labels (fetched with the master key, as /metrics needs)."""
    with proxy.client() as client:
        response = client.get("/metrics/")  # the mounted app; /metrics redirects here
    assert response.status_code == 200, response.text[:300]
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def total(samples: dict[Any, float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


def wait_for_requests(proxy: ProxyProcess, count: int, timeout: float = 30.0) -> dict[Any, float]:
    """Scrape until the plugin counted `count` requests (they are counted when LiteLLM logs them)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(proxy)
        if total(samples, "litellm_governance_requests_total") >= count or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


def removed(header: str) -> dict[str, int]:
    """The `removed=` figures of a header (stage -> tokens)."""
    found = re.search(r"removed=([^;]+)", header)
    return {k: int(v) for k, v in (item.split(":") for item in found.group(1).split(","))} if found else {}


def send_the_traffic(proxy: ProxyProcess) -> tuple[Counter[tuple[str, str, str]], Counter[tuple[str, str]], int]:
    """Governed and unchanged requests on chat and /v1/messages, and one the provider rejects for its
    length: what the headers said (outcomes and tokens removed per group and stage), and how many."""
    outcomes: Counter[tuple[str, str, str]] = Counter()
    tokens: Counter[tuple[str, str]] = Counter()
    requests = [
        ("/v1/chat/completions", {"model": "glm", "messages": make_session(300, seed=21), "max_tokens": 2_048}),
        ("/v1/chat/completions", {"model": "glm", "messages": make_session(200, seed=22), "max_tokens": 2_048}),
        ("/v1/chat/completions", {"model": "small", "messages": [{"role": "user", "content": "hello"}]}),
        ("/v1/chat/completions", {"model": "small", "messages": [{"role": "user", "content": "hello again"}]}),
        ("/v1/messages", claude_code_body(200, seed=23, model="glm")),
    ]

    def post(path: str, body: dict[str, Any]) -> Any:
        with proxy.client(timeout=120) as client:  # a connection of its own: any worker may take it
            return client.post(path, json=body)

    with ThreadPoolExecutor(max_workers=3) as pool:
        responses = list(pool.map(lambda request: post(*request), requests))
    for (path, body), response in zip(requests, responses, strict=True):
        assert response.status_code == 200, response.text[:500]
        header = response.headers[HEADER]
        fmt = "anthropic" if path == "/v1/messages" else "chat"
        outcomes[(body["model"], fmt, "unchanged" if header.startswith("unchanged") else "governed")] += 1
        for stage, count in removed(header).items():
            tokens[(body["model"], stage)] += max(0, count)
    rejected = post("/v1/chat/completions", {"model": "failing", "messages": [{"role": "user", "content": "hi"}]})
    assert rejected.status_code == 400
    outcomes[("failing", "chat", "unchanged")] += 1
    return outcomes, tokens, len(requests) + 1


def check_against_the_headers(
    samples: dict[Any, float], outcomes: Counter[tuple[str, str, str]], tokens: Counter[tuple[str, str]]
) -> None:
    for (group, fmt, outcome), count in outcomes.items():
        labels = {"model_group": group, "format": fmt, "outcome": outcome}
        assert total(samples, "litellm_governance_requests_total", **labels) == count, labels
    assert total(samples, "litellm_governance_requests_total") == sum(outcomes.values())
    assert tokens and all(count > 0 for count in tokens.values())
    for (group, stage), count in tokens.items():
        assert total(samples, "litellm_governance_tokens_removed_total", model_group=group, step=stage) == count
    assert total(samples, "litellm_governance_tokens_removed_total") == sum(tokens.values())
    assert total(samples, "litellm_governance_over_budget_total") == 0
    assert total(samples, "litellm_governance_latency_seconds_count") >= sum(outcomes.values())
    assert total(samples, "litellm_governance_token_ratio", deployment="zai/glm-4.6") == pytest.approx(1.15)
    rejections = "litellm_governance_provider_context_rejections_total"
    assert total(samples, rejections, deployment=f"openai/{FAILING_UPSTREAM_MODEL}") == 1


def test_metrics_match_the_headers(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> None:
    """One worker: the plugin's series are on LiteLLM's /metrics, next to LiteLLM's own, and agree
    with what the response headers said."""
    proxy = start(proxy_factory, upstream)
    with proxy.client() as client:
        assert client.get("/metrics/", headers={"Authorization": ""}).status_code in (401, 403)
        redirect = client.get("/metrics", follow_redirects=False)  # docs/operations.md: scrape /metrics/
        assert redirect.status_code == 307 and redirect.headers["location"].endswith("/metrics/"), redirect
    outcomes, tokens, count = send_the_traffic(proxy)
    samples = wait_for_requests(proxy, count)
    check_against_the_headers(samples, outcomes, tokens)
    assert any(name.startswith("litellm_") and "governance" not in name for name, _ in samples)  # LiteLLM's own
    startup = [line for line in proxy.log_tail(400).splitlines() if "litellm-governance" in line and "active" in line]
    assert startup and "metrics: litellm_governance_* recorded" in startup[0]


def test_metrics_with_two_workers(
    proxy_factory: ProxyFactory, upstream: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two workers share PROMETHEUS_MULTIPROC_DIR: whichever worker answers the scrape reports both
    workers' requests, and the ratio gauge one value per deployment (not one per worker)."""
    multiproc: Path = tmp_path_factory.mktemp("prometheus_multiproc")
    proxy = start(
        proxy_factory,
        upstream,
        # uvicorn kills a worker that answers its health check later than 5 s, and one still
        # importing LiteLLM's proxy on a loaded 2-core machine can: every replacement then dies the
        # same way and the proxy never serves (a LiteLLM CLI with --timeout_worker_healthcheck reads this
        # variable; an older one ignores it).
        extra_env={"NUM_WORKERS": "2", "PROMETHEUS_MULTIPROC_DIR": str(multiproc), "TIMEOUT_WORKER_HEALTHCHECK": "60"},
        fresh=True,
    )
    outcomes, tokens, count = send_the_traffic(proxy)
    samples = wait_for_requests(proxy, count)
    check_against_the_headers(samples, outcomes, tokens)
    ratios = [labels for (name, labels) in samples if name == "litellm_governance_token_ratio"]
    assert ratios and all("pid" not in dict(labels) for labels in ratios)
    assert len({dict(labels)["deployment"] for labels in ratios}) == len(ratios)
    for _ in range(4):  # each scrape, whichever worker answers it, sees every worker's samples
        assert _only_litellm_moved(scrape(proxy), samples)
    started = [line for line in proxy.log_tail(2_000).splitlines() if "litellm-governance" in line and "active" in line]
    assert len(started) == 2 and all("(multi-process)" in line for line in started)  # one per worker
    assert list(multiproc.glob("*.db"))  # the workers' samples live in the shared directory


def _only_litellm_moved(now: dict[Any, float], before: dict[Any, float]) -> bool:
    """The plugin's samples are the same (LiteLLM's own, e.g. its /metrics request counts, may move)."""

    def ours(samples: dict[Any, float]) -> dict[Any, float]:
        return {k: v for k, v in samples.items() if k[0].startswith("litellm_governance_")}

    return ours(now) == ours(before)
