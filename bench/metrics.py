"""Benchmark: what the Prometheus metrics cost per request (target: at most 0.1 ms).

Run ``python bench/metrics.py`` from the repository root (``--quick`` for a smoke run). In one process,
interleaved, medians of repetitions (on a shared machine the ratios are what to read):

* **request path**: what the hook does for one proxied chat request — the deployment pass over a warm
  40-message agent session (cut to a 16k window), then the success log event — with the metrics on and
  off (`Metrics(enabled=False)`); the difference is the metrics' cost, the ratio against the same path
  without them is the baseline;
* **metric calls alone**: the two calls a request makes (``governed_pass``, ``logged`` with a report of
  four stages), per request;

then the same again in a child process with ``PROMETHEUS_MULTIPROC_DIR`` set (LiteLLM's multi-worker
mode: every value is written to a memory-mapped file).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import copy
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.sessions import make_session

TARGET_MS = 0.1


def _timed(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of `fn`, over `calls` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def measure(reps: int, calls: int) -> dict[str, float]:
    """Median seconds per request of each variant (interleaved repetitions)."""
    from litellm.types.utils import CallTypes

    from litellm_governance import GovernanceHook
    from litellm_governance.integration import metrics as metrics_module
    from litellm_governance.integration.metrics import Metrics

    on, off = Metrics(), Metrics(enabled=False)
    assert on.available, "prometheus_client is needed for this benchmark"
    hook = GovernanceHook(context_window_tokens=16_000)
    session = make_session(40, seed=9)
    loop = asyncio.new_event_loop()

    def request_path() -> None:
        request = {
            "model": "zai/glm-4.6",
            "messages": copy.copy(session),
            "litellm_call_id": "bench",
            "metadata": {"model_info": {"id": "bench-deployment"}},
        }
        governed = loop.run_until_complete(hook.async_pre_call_deployment_hook(request, CallTypes.acompletion))
        payload = {
            "call_type": "acompletion",
            "model_group": "glm",
            "trace_id": None,
            "metadata": (governed or request)["metadata"],
        }
        loop.run_until_complete(hook.async_log_success_event({"standard_logging_object": payload}, None, None, None))

    entry = {
        "changed": True,
        "format": "chat",
        "over_budget": False,
        "tokens_removed": {"repair": 12, "compaction": 8_700, "snipping": 55_395, "roles": 5},
    }
    payload = {
        "call_type": "acompletion",
        "model_group": "glm",
        "metadata": {"spend_logs_metadata": {"governance": entry}},
    }
    kwargs = {"standard_logging_object": payload}

    def config() -> Any:
        return hook.config

    def calls_alone(m: Metrics) -> Callable[[], None]:
        def run() -> None:
            m.governed_pass("chat", 0.003, "zai/glm-4.6", 1.15)
            m.logged(kwargs, config)

        return run

    samples: dict[str, list[float]] = {"path_on": [], "path_off": [], "calls_on": [], "calls_off": []}
    for rep in range(reps + 1):  # the first round warms up
        for name, instance in (("on", on), ("off", off)) if rep % 2 else (("off", off), ("on", on)):
            metrics_module._built[:] = [instance]
            path = _timed(request_path, max(1, calls // 20))
            alone = _timed(calls_alone(instance), calls)
            if rep:
                samples[f"path_{name}"].append(path)
                samples[f"calls_{name}"].append(alone)
    loop.close()
    return {name: statistics.median(values) for name, values in samples.items()}


def table(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "| mode | request path, metrics off | on | added | on / off | metric calls alone (per request) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode, r in results.items():
        added = r["path_on"] - r["path_off"]
        lines.append(
            f"| {mode} | {r['path_off'] * 1e3:.3f} ms | {r['path_on'] * 1e3:.3f} ms | {added * 1e3:+.3f} ms | "
            f"{r['path_on'] / r['path_off']:.3f} | {(r['calls_on'] - r['calls_off']) * 1e3:.4f} ms |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    reps, calls = (2, 40) if args.quick else (15, 2_000)
    if args.child:
        print(json.dumps(measure(reps, calls)))
        return 0
    results = {"one process": measure(reps, calls)}
    with tempfile.TemporaryDirectory() as multiproc:
        command = [sys.executable, __file__, "--child", *(["--quick"] if args.quick else [])]
        done = subprocess.run(
            command,
            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": multiproc},
            capture_output=True,
            text=True,
            check=True,
        )
        results["PROMETHEUS_MULTIPROC_DIR (multi-worker)"] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"# Metrics cost per request (target <= {TARGET_MS} ms)\n")
    print(f"Command: `python bench/metrics.py{' --quick' if args.quick else ''}`; {os.cpu_count()} CPUs; medians.\n")
    print(table(results))
    worst = max((r["path_on"] - r["path_off"]) * 1e3 for r in results.values())
    alone = max((r["calls_on"] - r["calls_off"]) * 1e3 for r in results.values())
    print(
        f"\nmetric calls per request: {alone:.4f} ms at most (target {TARGET_MS} ms); request path difference "
        f"{worst:+.3f} ms at most (within the noise of the path when it is below the calls' cost)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
