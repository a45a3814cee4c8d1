"""The examples and the demo run as a user would run them, against the local upstream."""

from __future__ import annotations

import ast
import json
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
from .conftest import GOVERNANCE_CALLBACK, ProxyFactory

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


def documented_run(name: str, records: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run an example as its docstring says to offline: its ``python -m litellm_governance.testing``
    line (port 0 for 8099, plus ``--record-dir``), then its ``EXAMPLE_API_BASE=… python examples/…``
    line with the printed URL, in an environment with no provider key and no EXAMPLE_* variable."""
    from ..test_emulation import cli_env, cli_output

    doc = ast.get_docstring(ast.parse((EXAMPLES / name).read_text(encoding="utf-8"))) or ""
    lines = [line.strip() for line in doc.splitlines() if line.startswith("    ")]
    serve = shlex.split(next(line for line in lines if line.startswith("python -m litellm_governance.testing")))
    example = shlex.split(next(line for line in lines if line.startswith("EXAMPLE_API_BASE=")))
    serve = [sys.executable if word == "python" else "0" if word == "8099" else word for word in serve]
    process = subprocess.Popen(
        [*serve, "--record-dir", str(records)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env()
    )
    try:
        api_base, _ = cli_output(process)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EXAMPLE_", "ZAI_"))}
        env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "127.0.0.1,localhost"}
        while "=" in example[0]:
            variable, value = example.pop(0).split("=", 1)
            env[variable] = value.replace("http://127.0.0.1:8099/v1", api_base)
        assert example[:2] == ["python", f"examples/{name}"], example
        done = subprocess.run(
            [sys.executable, *example[1:]], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def recorded_bodies(records: Path, model: str) -> list[dict[str, Any]]:
    """The bodies of the requests for `model` the documented upstream recorded, oldest first."""
    bodies = [json.loads(path.read_text())["body"] for path in sorted(records.glob("*.json"))]
    return [body for body in bodies if isinstance(body, dict) and body.get("model") == model]


def test_sdk_quickstart(tmp_path: Path) -> None:
    """Run as its docstring says, against the GLM stand-in: async (hook) and sync (wrapper) calls
    both reach it governed for GLM, and it accepts both."""
    done = documented_run("sdk_quickstart.py", tmp_path / "requests")
    assert "governance: backfilled=1; merged=1; trailing_assistant_dropped=1" in done.stdout
    assert done.stdout.count("reply: ok") == 2
    bodies = recorded_bodies(tmp_path / "requests", "glm-4.6")
    assert len(bodies) == 2 and bodies[0]["messages"] == bodies[1]["messages"]
    assert problems(bodies[0]["messages"], "strict") == []


def test_router_fallbacks(tmp_path: Path) -> None:
    """Run as its docstring says: the first deployment fails; the fallback gets the request re-fitted
    to its 16k window, which the upstream enforces."""
    done = documented_run("router_fallbacks.py", tmp_path / "requests")
    assert "answered by:" in done.stdout
    first = recorded_bodies(tmp_path / "requests", "up-failing")[-1]
    fallback = recorded_bodies(tmp_path / "requests", "up-small")[-1]
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


def docs_snippet(page: str, marker: str) -> str:
    """The Python block of a docs page that holds `marker`."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return next(s for s in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL) if marker in s)


def agent_history(rounds: int = 40) -> list[dict[str, Any]]:
    """A task and `rounds` file reads of about 2,000 tokens each: far more than 32k, far less than 200k."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    messages.append({"role": "user", "content": "Review every module."})
    for i in range(rounds):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": f"Reading module {i}.", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"module {i} line\n" * 500})
    return messages


def test_the_testing_cli_prints_a_deployment_governed_for_its_window(
    tmp_path: Path, proxy_factory: ProxyFactory
) -> None:
    """``python -m litellm_governance.testing --emulate glm --window 32768`` prints a deployment that,
    pasted into a proxy config, makes the plugin budget for the stand-in's window (not LiteLLM's 200k
    for GLM): a 40-read history reaches the stand-in fitted, and it answers 200."""
    from ..test_emulation import cli_env, cli_output

    records = tmp_path / "requests"
    command = [sys.executable, "-m", "litellm_governance.testing", "--port", "0", "--emulate", "glm"]
    command += ["--window", "32768", "--record-dir", str(records)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env())
    try:
        _, entry = cli_output(process)
        proxy = proxy_factory([GOVERNANCE_CALLBACK], model_list=[entry])
        with proxy.client() as client:
            response = client.post("/v1/chat/completions", json={"model": "glm", "messages": agent_history()})
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert response.status_code == 200, response.text[:500]
    (recorded,) = [json.loads(path.read_text()) for path in sorted(records.glob("*.json"))]
    assert recorded["status"] == 200 and recorded["rule"] is None
    assert len(recorded["body"]["messages"]) < len(agent_history())


def test_the_start_proxy_example_of_the_testing_docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/testing.md's `start_proxy` example runs as written, and its deployment tells the plugin the
    window the stand-in enforces (``model_info.max_input_tokens``)."""
    from litellm_governance import testing

    configs: list[dict[str, Any]] = []
    real_start = testing.start_proxy

    def start(config: dict[str, Any], **options: Any) -> Any:
        configs.append(config)
        return real_start(config, **{**options, "workdir": tmp_path / "proxy", "fast_start": True})

    monkeypatch.setattr(testing, "start_proxy", start)
    namespace: dict[str, Any] = {}
    exec(docs_snippet("testing.md", "start_proxy(config"), namespace)
    ((entry,),) = [config["model_list"] for config in configs]
    assert entry["model_info"]["max_input_tokens"] == namespace["upstream"].emulation.window == 32768


def _bench(script: str, *arguments: str) -> str:
    """The output of ``python bench/<script> ARGUMENTS`` from the repository root (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.scale
def test_proxy_latency_benchmark_runs(tmp_path: Path) -> None:
    """bench/proxy_latency.py --quick starts its two proxies, runs a loop per format and window, and
    reports the plugin's hooks timed in the proxy for every request (no timing is asserted)."""
    out = _bench("proxy_latency.py", "--quick", "--json", str(tmp_path / "latency.json"))
    assert "| route | window | messages | its hooks p50 | p95 | with plugin | without | added |" in out
    found = json.loads((tmp_path / "latency.json").read_text())
    rows = {(row["format"], row["window"]): row for row in found["rows"]}
    assert sorted(rows) == sorted((f, w) for f in ("chat", "anthropic", "responses") for w in ("32k", "1M"))
    for (_, window), row in rows.items():
        assert row["messages"][0] == 402 and row["messages"][1] > 402, row
        assert 0 < row["hooks_p50_ms"] <= row["hooks_p95_ms"], row  # the probe timed the plugin in the proxy
        assert row["with_ms"] > 0 and row["without_ms"] > 0, row
        with_plugin, without = row["upstream_got"]
        if window == "32k":  # the plugin cut what the proxy without it forwards whole
            assert 0 < with_plugin < without, row


@pytest.mark.scale
def test_load_benchmark_runs(tmp_path: Path) -> None:
    """bench/load.py --quick runs two rounds through both proxies and reports p95 and memory per
    round (no timing or memory figure is asserted)."""
    out = _bench("load.py", "--quick", "--json", str(tmp_path / "load.json"))
    assert "| with plugin | 24 |" in out and "| without plugin | 24 |" in out
    found = json.loads((tmp_path / "load.json").read_text())
    for name in ("with", "without"):
        assert found[name]["requests"] == 24 and found[name]["p95_ms"] >= found[name]["p50_ms"] > 0
        assert len(found[name]["memory_mib"]) == 3 and all(m > 50 for m in found[name]["memory_mib"])
    assert found["p95_ratio"] > 0 and set(found["last_round_growth_mib"]) == {"with", "without"}


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
