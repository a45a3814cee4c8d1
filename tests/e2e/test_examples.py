"""The examples and the demo run as a user would run them, against the local upstream."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from litellm_governance import GovernanceConfig, govern
from litellm_governance.testing import RecordingUpstream

from ..validity import problems
from .conftest import ProxyFactory

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run_example(name: str, upstream: RecordingUpstream, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "EXAMPLE_API_BASE": upstream.base_url,
        "EXAMPLE_API_KEY": "sk-local",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


@pytest.mark.scale
def test_demo(upstream: RecordingUpstream) -> None:
    """`make demo` runs: without the plugin the emulated GLM rejects both requests (its rules, then
    its window); with it both succeed and nothing GLM rejects arrives."""
    done = run_example("demo.py", upstream, timeout=240)
    out = done.stdout
    assert out.count("without the plugin: HTTP 400") == 2
    assert "(glm.system_not_first)" in out and "(glm.context_length)" in out
    assert out.count("with the plugin:    HTTP 200") == 2
    assert out.count("GLM's rules broken in what it received: none") == 2
    assert out.count("x-litellm-governance: compacted=") == 2
    # Its last hint can be followed as printed: the request is saved, the command runs from the root.
    command = out.strip().splitlines()[-1].strip()
    assert command.startswith(".venv/bin/python -m litellm_governance explain .demo/") or sys.executable in command
    report = ROOT / ".demo" / "report.html"
    report.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    explained = subprocess.run(shlex.split(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert explained.returncode == 0, explained.stderr[-2000:]
    assert "chat request for zai/glm-4.6" in explained.stdout and "window 32,768 (deployment)" in explained.stdout
    assert "wrote the HTML report to .demo/report.html" in explained.stdout and report.stat().st_size > 10_000


def test_sdk_quickstart(upstream: RecordingUpstream) -> None:
    """Async (hook) and sync (wrapper) calls both reach the provider governed for GLM."""
    done = run_example("sdk_quickstart.py", upstream)
    assert "governance: backfilled=1; merged=1; trailing_assistant_dropped=1" in done.stdout
    bodies = upstream.bodies(model="glm-4.6")
    assert len(bodies) == 2 and bodies[0]["messages"] == bodies[1]["messages"]
    assert problems(bodies[0]["messages"], "strict") == []


def test_router_fallbacks(upstream: RecordingUpstream) -> None:
    """The first deployment fails; the fallback gets the request re-fitted to its 16k window."""
    done = run_example("router_fallbacks.py", upstream)
    assert "answered by:" in done.stdout
    first, fallback = upstream.bodies(model="up-failing")[-1], upstream.bodies(model="up-small")[-1]
    assert len(fallback["messages"]) < len(first["messages"])
    report = govern(
        fallback["messages"],
        model="openai/up-small",
        max_output_tokens=1024,
        config=GovernanceConfig(context_window_tokens=16_384),
    ).report
    assert report.tokens_after <= report.budget and not report.changed
    assert done.stderr.count("governed ") >= 2  # one log line per governed attempt


def test_proxy_config_example(proxy_factory: ProxyFactory, upstream: RecordingUpstream) -> None:
    """examples/proxy_config.yaml, with every deployment pointed at the local upstream, governs each model."""
    config: dict[str, Any] = yaml.safe_load((EXAMPLES / "proxy_config.yaml").read_text())
    for entry in config["model_list"]:
        params = entry["litellm_params"]
        params["api_key"] = "sk-local"
        params["api_base"] = upstream.root_url if params["model"].startswith("anthropic/") else upstream.base_url
    proxy = proxy_factory(
        [config["litellm_settings"]["callbacks"]],
        model_list=config["model_list"],
        router_settings=config["router_settings"],
        callback_settings=config["callback_settings"],
    )
    broken = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "task"},
        {"role": "user", "content": "more"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
    ]
    expected = {"glm": ("glm-4.6", "strict"), "gpt": ("gpt-4.1", "permissive"), "glm-selfhosted": ("glm-4.6", "strict")}
    with proxy.client() as client:
        for name, (upstream_model, profile) in expected.items():
            upstream.clear()
            response = client.post("/v1/chat/completions", json={"model": name, "messages": broken})
            assert response.status_code == 200, response.text[:300]
            assert problems(upstream.bodies(model=upstream_model)[-1]["messages"], profile) == []
        upstream.clear()
        response = client.post("/v1/chat/completions", json={"model": "claude", "messages": broken})
        assert response.status_code == 200, response.text[:300]
        assert "x-litellm-governance" in response.headers
        sent = upstream.bodies(kind="messages")[-1]["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]  # Anthropic format, after LiteLLM


@pytest.mark.scale
def test_proxy_latency_benchmark_runs() -> None:
    """bench/proxy_latency.py --quick starts its three proxies and prints its table (no timing is asserted)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "proxy_latency.py"), "--quick", "--fast-start"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table, split = done.stdout.split("Its hooks, each method")  # the table, then its hooks per method
    header = (
        "| route | history (chat messages) | with plugin | without | added | added, middle half "
        "| as long spun instead, added | the plugin's pass (mean) | its hooks (a request) |"
    )
    assert header in table
    assert table.count("| /v1/messages, ") == 2 and table.count("| /v1/responses, ") == 2
    rows = [line for line in table.splitlines() if line.startswith(("| chat", "| /v1/"))]
    # the control proxy (bench.proxy_probes.spin) spun on every loop, as long as the plugin's hooks took
    spun = [float(m.group(1)) for row in rows if (m := re.search(r"ms \((\d+\.\d) ms spun\) \|", row))]
    assert len(spun) == 7 and all(ms > 0 for ms in spun), rows
    # its hooks, timed in the proxy by bench.proxy_probes.hooks: some time on every route
    hooks = [float(m.group(1)) for row in rows if (m := re.search(r"\| (\d+\.\d) ms \| \d+ / \d+ \|$", row))]
    assert len(rows) == 7 and len(hooks) == 7 and all(ms > 0 for ms in hooks), rows
    if importlib.util.find_spec("prometheus_client") is not None:  # the plugin's own histogram, read in the proxy
        assert all(re.search(r"\| \d+\.\d ms \| \d+\.\d ms \| \d+ / \d+ \|$", row) for row in rows), rows
    # the same hooks per method: a row per loop, the pre-call hook (where the pass runs) timed on each
    assert "| route | history (chat messages) | pre-call | deployment | deployment answered | header |" in split
    assert "| success logged | history walks |" in split
    methods = [line.split("|")[3:-1] for line in split.splitlines() if line.startswith(("| chat", "| /v1/"))]
    assert len(methods) == 7 and all(float(row[0]) > 0 for row in methods), methods
    # no walk over the history before the pass: the proxy declares each body's length, chat has no
    # compaction, and the bench's Anthropic and OpenAI deployments compact natively (one a request before)
    assert all(float(row[-1]) == 0 for row in methods), methods


@pytest.mark.scale
def test_translated_cache_benchmark_runs() -> None:
    """bench/translated_cache.py --quick replays a Claude Code session to GLM through a real proxy and
    prints what the prompt cache sees (a bench: no figure is asserted beyond its table)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "translated_cache.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "| seed | requests | reuse | rewrites | recuts | ratio moves | rewrites on a move | budget used |"
        in done.stdout
    )
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| 5 |")]
    assert row.split("|")[2].strip() == "12"


def test_collector_proxy_benchmark_counts_collections_in_both_proxies() -> None:
    """bench/collector_proxy.py loads its probe into both proxies and prints what they collected."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "collector_proxy.py"), "--turns", "2", "--size", "40", "--fast-start"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| with plugin | " in done.stdout and "| without | " in done.stdout


@pytest.mark.scale
def test_compaction_benchmark_runs() -> None:
    """bench/compaction.py --quick answers Codex's compaction request in each mode through its proxies and
    prints its table (no timing is asserted): the note asks no model, the other rows one call each."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compaction.py"), "--quick", "--fast-start"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| GLM", "| OpenAI"))]
    assert len(rows) == 6, done.stdout
    assert [row.rsplit("|", 2)[-2].strip() for row in rows] == ["1", "0", "1"] * 2, rows
