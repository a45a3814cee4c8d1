"""Prometheus metrics (`integration.metrics`): what each request adds, driven the way LiteLLM drives the
hook; bounded labels; multi-process mode; nothing and no error without prometheus_client; the Grafana
dashboard queries only what is exported. The real proxy's /metrics: tests/e2e/test_metrics_e2e.py."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

prometheus_client = pytest.importorskip("prometheus_client")
litellm = pytest.importorskip("litellm")

from litellm.types.utils import CallTypes  # noqa: E402

from bench.sessions import make_session  # noqa: E402
from litellm_governance import GovernanceHook  # noqa: E402
from litellm_governance.integration.metrics import (  # noqa: E402
    MAX_LABEL_VALUES,
    OUTCOMES,
    SERIES,
    Metrics,
    deployment_label,
    metrics,
)

from .builders import assistant, calling, result, system, user  # noqa: E402

pytestmark = pytest.mark.litellm

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "examples" / "grafana_dashboard.json"
REGISTRY = prometheus_client.REGISTRY
BROKEN = [system(), user("task"), user("more"), calling("a"), result("zz", "orphan"), assistant("prefill")]
_ids = itertools.count()


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def group() -> str:
    """A model group of this test's own, so its counts start at zero."""
    return f"group-{os.getpid()}-{next(_ids)}"


class Driver:
    """A GovernanceHook driven as LiteLLM drives it, without a proxy: the deployment pass, then the log
    event carrying the standard logging payload (with the report, as LiteLLM's payload keeps it)."""

    def __init__(self, **options: Any) -> None:
        self.hook = GovernanceHook(**options)

    def send(
        self,
        messages: Any,
        model_group: str,
        *,
        trace: str | None = None,
        fail: BaseException | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        n = next(_ids)
        request: dict[str, Any] = {
            "model": "openai/up-metrics",
            "messages": messages,
            # (one of this module's own: the metrics count each call's rejection once per process, and
            # other modules' calls in the same worker are "call-1", "call-2" …)
            "litellm_call_id": f"metrics-call-{os.getpid()}-{n}",
            "metadata": {"model_info": {"id": "dep-metrics"}, **extra.pop("metadata", {})},
            **extra,
        }
        governed = asyncio.run(self.hook.async_pre_call_deployment_hook(request, CallTypes.acompletion)) or request
        self.log(governed, model_group, trace=trace or f"trace-{n}", fail=fail)
        return governed

    def log(self, request: dict[str, Any], model_group: str, *, trace: str, fail: BaseException | None) -> None:
        payload = {
            "call_type": "acompletion",
            "model_group": model_group,
            "trace_id": trace,
            "end_user": "alice@example.com",
            "metadata": {"user_api_key_hash": "sk-secret-hash", **request.get("metadata", {})},
        }
        kwargs = {"standard_logging_object": payload, "litellm_call_id": request["litellm_call_id"]}
        if fail is None:
            asyncio.run(self.hook.async_log_success_event(kwargs, {"usage": {}}, None, None))
        else:
            kwargs["exception"] = fail
            asyncio.run(self.hook.async_log_failure_event(kwargs, None, None, None))

    @staticmethod
    def report(request: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = request["metadata"]["spend_logs_metadata"]["governance"]
        return entry


class TestWhatARequestAdds:
    def test_a_governed_request(self) -> None:
        """One request: counted as governed, the tokens each stage removed as the header says them."""
        g, driver = group(), Driver(context_window_tokens=16_000, cache_stable=False)
        request = driver.send(make_session(200, seed=3), g)
        report = driver.report(request)
        assert report["changed"] and report["tokens_removed"]
        assert value("litellm_governance_requests_total", model_group=g, format="chat", outcome="governed") == 1
        header = dict(part.split(":") for part in re.search(r"removed=([^;]+)", report["summary"]).group(1).split(","))  # type: ignore[union-attr]
        for stage, tokens in report["tokens_removed"].items():
            assert int(header[stage]) == tokens
            assert value("litellm_governance_tokens_removed_total", model_group=g, step=stage) == max(0, tokens)
        assert value("litellm_governance_over_budget_total", model_group=g) == 0

    def test_each_outcome(self) -> None:
        """governed, unchanged, skipped (the client opted out), failed_open (not a governable request),
        config_error (an unknown profile in model_info); a disabled hook counts as skipped too."""
        g = group()
        driver = Driver(allow_request_overrides=True)
        driver.send(BROKEN, g)
        driver.send([user("hello")], g)
        driver.send(BROKEN, g, metadata={"governance": {"disable": True}})
        driver.send([["not", "a", "message"]], g)
        driver.send(BROKEN, g, metadata={"model_info": {"id": "dep-metrics", "governance_profile": "bogus"}})
        Driver(enabled=False).send(BROKEN, g)
        counts = {
            o: value("litellm_governance_requests_total", model_group=g, format="chat", outcome=o) for o in OUTCOMES
        }
        assert counts == {
            "governed": 1,
            "unchanged": 1,
            "skipped": 2,
            "failed_open": 1,
            "config_error": 1,
            "compacted_session": 0,  # (tests/test_session_compaction_hook.py)
        }

    def test_over_budget(self) -> None:
        g = group()
        huge = [system(), user("x " * 30_000)]
        report = Driver.report(Driver(context_window_tokens=8_000).send(huge, g))
        assert report["over_budget"]
        assert value("litellm_governance_over_budget_total", model_group=g) == 1

    def test_a_lowered_max_output(self) -> None:
        """Claude Code's 32,000 on a 32k window goes out lowered: counted, as the header says."""
        g = group()
        report = Driver.report(Driver(context_window_tokens=32_768).send([user("go")], g, max_tokens=32_000))
        assert report["max_output_lowered_from"] == 32_000 and "max_output=32000->8192" in report["summary"]
        assert value("litellm_governance_max_output_lowered_total", model_group=g) == 1
        Driver(context_window_tokens=32_768).send([user("go")], g, max_tokens=4_000)
        assert value("litellm_governance_max_output_lowered_total", model_group=g) == 1

    def test_a_request_counts_once(self) -> None:
        """A failed attempt and its fallback (one trace) are one request; a failure is counted too."""
        g, driver = group(), Driver()
        error = litellm.BadRequestError(message="boom", model="x", llm_provider="openai")
        request = driver.send(BROKEN, g, trace="one-request", fail=error)
        driver.log(request, g, trace="one-request", fail=None)
        assert value("litellm_governance_requests_total", model_group=g, format="chat", outcome="governed") == 1

    def test_latency_and_the_ratio_in_use(self) -> None:
        """Each governing pass is timed; the deployment's gauge holds the ratio it budgeted with."""
        before = value("litellm_governance_latency_seconds_count", format="chat")
        Driver().send(BROKEN, group())
        assert value("litellm_governance_latency_seconds_count", format="chat") == before + 1
        assert value("litellm_governance_token_ratio", deployment="openai/up-metrics") == 1.0  # permissive, static

    def test_context_rejections_count_once_per_call(self) -> None:
        """The failure deployment hook and the failure log event see the same rejection: one count."""
        driver = Driver()
        request = driver.send(BROKEN, group())
        deployment = "openai/up-rejecting"
        before = value("litellm_governance_provider_context_rejections_total", deployment=deployment)
        error = litellm.ContextWindowExceededError(message="maximum context length", model="x", llm_provider="openai")
        data = {**request, "model": "up-rejecting", "custom_llm_provider": "openai"}
        asyncio.run(driver.hook.async_post_call_failure_deployment_hook(data, error, None))
        asyncio.run(driver.hook.async_log_failure_event({**data, "exception": error}, None, None, None))
        other = litellm.BadRequestError(message="invalid tool", model="x", llm_provider="openai")
        asyncio.run(driver.hook.async_post_call_failure_deployment_hook({**data, "litellm_call_id": "z"}, other, None))
        assert value("litellm_governance_provider_context_rejections_total", deployment=deployment) == before + 1

    def test_requests_governance_does_not_read_are_not_counted(self) -> None:
        g = group()
        kwargs = {"standard_logging_object": {"call_type": "aembedding", "model_group": g, "metadata": {}}}
        asyncio.run(GovernanceHook().async_log_success_event(kwargs, None, None, None))
        assert not any(value("litellm_governance_requests_total", model_group=g, format=f, outcome=o)
                       for f in ("chat", "anthropic", "responses") for o in OUTCOMES)  # fmt: skip


class TestLabels:
    def test_labels_are_model_groups_and_deployments_only(self) -> None:
        """Users, keys and content never become label values, whatever the payload carries."""
        Driver().send(BROKEN, group())
        exported = {s.name for s in SERIES}
        for family in REGISTRY.collect():
            for sample in family.samples:
                if sample.name.startswith("litellm_governance_"):
                    assert family.name in {n.removesuffix("_total") for n in exported}
                    text = json.dumps(sample.labels)
                    assert "alice" not in text and "sk-secret" not in text and "task" not in text

    def test_label_values_are_bounded(self) -> None:
        """A wildcard route could bring a new model name with every request: past MAX_LABEL_VALUES
        distinct groups, the rest count as `other`."""
        registry = prometheus_client.CollectorRegistry()
        local = Metrics(registry)
        entry = {"changed": True, "format": "chat", "tokens_removed": {"snipping": 5}}

        def logged(name: str) -> None:
            payload = {
                "call_type": "acompletion",
                "model_group": name,
                "metadata": {"spend_logs_metadata": {"governance": entry}},
            }
            local.logged({"standard_logging_object": payload}, lambda: None)  # type: ignore[arg-type, return-value]

        for i in range(MAX_LABEL_VALUES + 50):
            logged(f"wild/model-{i}")
        groups = {s.labels["model_group"] for f in registry.collect() for s in f.samples if "model_group" in s.labels}
        assert len(groups) == MAX_LABEL_VALUES + 1 and "other" in groups
        other = registry.get_sample_value(
            "litellm_governance_requests_total", {"model_group": "other", "format": "chat", "outcome": "governed"}
        )
        assert other == 50
        assert deployment_label("glm-4.6", "zai") == "zai/glm-4.6" == deployment_label("zai/glm-4.6", "zai")


class TestExported:
    def test_the_table_is_what_is_registered(self) -> None:
        """SERIES (what the dashboard may query) names exactly what the registry exports."""
        registry = prometheus_client.CollectorRegistry()
        local = Metrics(registry)
        local.governed_pass("chat", 0.001, "zai/glm-4.6", 1.15)
        local.context_rejection("c1", "zai/glm-4.6")
        entry = {"changed": True, "format": "chat", "over_budget": True, "tokens_removed": {"snipping": 5}}
        payload = {
            "call_type": "acompletion",
            "model_group": "g",
            "metadata": {"spend_logs_metadata": {"governance": entry}},
        }
        local.logged({"standard_logging_object": payload}, lambda: None)  # type: ignore[arg-type, return-value]
        names = {
            sample.name
            for family in registry.collect()
            for sample in family.samples
            if not sample.name.endswith("_created")
        } | {family.name + ("_total" if family.type == "counter" else "") for family in registry.collect()}
        expected = {n for s in SERIES for n in s.samples()}
        assert expected <= names
        assert {f.name for f in registry.collect()} == {s.name.removesuffix("_total") for s in SERIES}

    def test_the_process_shares_one_set(self) -> None:
        """Every hook of a process records into the same collectors (registering twice would fail)."""
        GovernanceHook()
        GovernanceHook()
        assert metrics() is metrics() and metrics().available

    def test_the_grafana_dashboard_queries_exported_series(self) -> None:
        """Every query of examples/grafana_dashboard.json names a series the plugin exports, and only
        those; every exported series is on the dashboard."""
        dashboard = json.loads(DASHBOARD.read_text())
        exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
        assert exprs and all(isinstance(e, str) for e in exprs)
        samples = {n for s in SERIES for n in s.samples()}
        used: set[str] = set()
        for expr in exprs:
            names = set(re.findall(r"\blitellm_governance_[a-z_]+", expr))
            assert names, f"a query that names no series of the plugin: {expr}"
            assert names <= samples, names - samples
            used |= names
        assert {s.name for s in SERIES} <= {n.removesuffix("_bucket") for n in used}


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT,
    )


WITHOUT_PROMETHEUS = """
import asyncio, logging, sys
sys.modules["prometheus_client"] = None  # as if it were not installed
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
import litellm_governance.integration as integration
hook = integration.proxy_handler_instance
request = {"model": "openai/x", "litellm_call_id": "c1", "metadata": {},
           "messages": [{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "zz", "content": "b"}]}
governed = asyncio.run(hook.async_pre_call_deployment_hook(request, "acompletion"))
payload = {"call_type": "acompletion", "model_group": "g", "metadata": governed["metadata"]}
asyncio.run(hook.async_log_success_event({"standard_logging_object": payload}, None, None, None))
print("governed:", governed["metadata"]["spend_logs_metadata"]["governance"]["changed"])
"""


def test_without_prometheus_client_no_metrics_and_no_error() -> None:
    """prometheus_client absent: requests are governed as ever, nothing is recorded, nothing fails, and
    the start-up line says metrics are off."""
    done = run_python(WITHOUT_PROMETHEUS)
    assert done.returncode == 0, done.stderr[-2000:]
    startup = next(line for line in done.stdout.splitlines() if "litellm-governance" in line and "active" in line)
    assert "metrics: off (prometheus_client is not installed)" in startup
    assert "governed: True" in done.stdout
    assert "Traceback" not in done.stderr and "metrics skipped" not in done.stdout + done.stderr


WORKER = """
import sys
from litellm_governance.integration.metrics import Metrics
m = Metrics()
m.governed_pass("chat", 0.002, "zai/glm-4.6", float(sys.argv[1]))
"""
SCRAPE = """
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry)
print(generate_latest(registry).decode())
"""


def test_multi_process_mode(tmp_path: Path) -> None:
    """Two workers (processes) sharing PROMETHEUS_MULTIPROC_DIR, as LiteLLM runs --num_workers: the
    scrape (LiteLLM's MultiProcessCollector) has one ratio per deployment, the most recent, not one
    per worker; the histogram adds both workers' passes."""
    env = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for ratio in ("1.15", "1.3"):
        done = run_python(WORKER.replace("sys.argv[1]", ratio), env)
        assert done.returncode == 0, done.stderr[-2000:]
    scraped = run_python(SCRAPE, env)
    assert scraped.returncode == 0, scraped.stderr[-2000:]
    ratios = [line for line in scraped.stdout.splitlines() if line.startswith("litellm_governance_token_ratio{")]
    assert ratios == ['litellm_governance_token_ratio{deployment="zai/glm-4.6"} 1.3'], ratios
    assert 'litellm_governance_latency_seconds_count{format="chat"} 2.0' in scraped.stdout
