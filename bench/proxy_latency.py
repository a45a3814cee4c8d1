"""What the plugin costs a request through a real LiteLLM proxy, per format.

    python bench/proxy_latency.py            # 30 turns a loop (make bench runs it through bench/run.py)
    python bench/proxy_latency.py --quick    # 3 turns, the proxies forked from one LiteLLM import (the smoke test)

Starts a local upstream that answers at once and two real ``litellm --config`` proxies with the
same models, one with the plugin and one without; both load the probe `bench.proxy_probes`, which
times the plugin's hook methods in the proxy, per request. Six agent loops start at 400 messages
and grow by one tool round a turn (what an agent sends next): chat completions to GLM,
``/v1/messages`` to Claude (Claude Code's bodies) and ``/v1/responses`` to GPT (Codex's), each at
a 32k window (the plugin compacts and snips) and at a 1M window (nothing is cut: both proxies
forward the same request). Each turn's body goes to both proxies, one right after the other, each
going first in turn, so the machine's drift over a loop falls on both alike.

Per loop: the p50 and p95 of the time a request spent in the plugin's hooks in the proxy (all of
them but the log events, which run after the response), the client's median latency through each
proxy, and what the plugin adds: the median of the per-turn differences. Target (issue #53): the
hooks' p50 at most 10 ms on every format.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.agent_shapes import to_claude_code, to_codex
from bench.proxy_probes import DIR_ENV, read
from bench.sessions import make_session, make_tools, next_round
from litellm_governance.testing import ProxyProcess, RecordingUpstream, start_proxy

ROOT = Path(__file__).resolve().parent.parent
START = 400  # messages each loop starts with
TURNS, QUICK_TURNS = 30, 3
WARM_UP = 3  # requests of each loop's first body to each proxy, untimed
TARGET_HOOKS_MS = 10.0
WINDOWS = {"32k": 32_768, "1M": 1_000_000}
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no *_PROXY from the environment


def _chat(session: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": session, "tools": make_tools(), "max_tokens": 1024}


def _claude(session: list[dict[str, Any]]) -> dict[str, Any]:
    return {**to_claude_code(session), "max_tokens": 1024}


def _codex(session: list[dict[str, Any]]) -> dict[str, Any]:
    return {**to_codex(session), "max_output_tokens": 1024}


@dataclass(frozen=True)
class Format:
    route: str
    group: str  # the model group (its window's suffix appended)
    litellm_model: str
    body: Callable[[list[dict[str, Any]]], dict[str, Any]]
    upstream_root: bool = False  # Anthropic's api_base has no /v1


#: The plugin's format names (as bench/formats.py has them), each with its route and deployment.
FORMATS = {
    "chat": Format("/v1/chat/completions", "glm", "zai/glm-4.6", _chat),
    "anthropic": Format("/v1/messages", "claude", "anthropic/claude-sonnet-4-5-20250929", _claude, True),
    "responses": Format("/v1/responses", "gpt", "openai/gpt-4.1", _codex),
}


def config(upstream: RecordingUpstream, plugin: bool) -> dict[str, object]:
    models = [
        {
            "model_name": f"{fmt.group}-{label}",
            "litellm_params": {
                "model": fmt.litellm_model,
                "api_base": upstream.root_url if fmt.upstream_root else upstream.base_url,
                "api_key": "sk-local",
            },
            "model_info": {"max_input_tokens": window},
        }
        for fmt in FORMATS.values()
        for label, window in WINDOWS.items()
    ]
    callbacks = ["litellm_governance.proxy_handler_instance"] if plugin else []
    return {
        "model_list": models,
        "litellm_settings": {"num_retries": 0, "callbacks": [*callbacks, "bench.proxy_probes.hooks"]},
    }


def send(proxy: ProxyProcess, route: str, data: bytes) -> float:
    """One request's client-side latency, in seconds (the body serialized beforehand)."""
    request = urllib.request.Request(
        proxy.url(route), data=data, headers={**proxy.headers, "Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with _OPENER.open(request, timeout=300) as response:
        response.read()
        status = response.status
    elapsed = time.perf_counter() - started
    if status != 200:
        raise SystemExit(f"{proxy.base_url}{route} answered {status}")
    return elapsed


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Loop:
    """One loop's measures: client latencies per turn, and what the upstream got last."""

    fmt: str
    window: str
    messages: tuple[int, int]  # chat messages at the first and last turn
    with_plugin: list[float]
    without: list[float]
    received: tuple[int, int]  # items of the last request's history the upstream got (with, without)


def run_loop(
    fmt: str, window: str, turns: int, *, with_plugin: ProxyProcess, without: ProxyProcess, upstream: RecordingUpstream
) -> Loop:
    spec = FORMATS[fmt]
    history = make_session(START, seed=START)
    model = f"{spec.group}-{window}"
    first = json.dumps({"model": model, **spec.body(history)}).encode()
    for _ in range(WARM_UP):  # the plugin loads its tokenizer once; LiteLLM's first requests are slower
        for proxy in (with_plugin, without):
            send(proxy, spec.route, first)
    times: dict[str, list[float]] = {"with": [], "without": []}
    received = {"with": 0, "without": 0}
    proxies = {"with": with_plugin, "without": without}
    for turn in range(turns):
        history = next_round(history, seed=START)
        data = json.dumps({"model": model, **spec.body(history)}).encode()
        for name in ("with", "without") if turn % 2 == 0 else ("without", "with"):
            times[name].append(send(proxies[name], spec.route, data))
            last = upstream.requests[-1].body or {}
            received[name] = len(last.get("messages") or last.get("input") or [])
    return Loop(
        fmt, window, (START + 2, len(history)), times["with"], times["without"], (received["with"], received["without"])
    )


def hook_times(directory: Path, proxy: ProxyProcess, expected: int) -> list[float]:
    """The plugin's hooks' seconds for each of the `expected` requests `proxy` has served (waiting
    for the probe to have written the last one)."""
    deadline = time.monotonic() + 30
    found = read(directory, proxy.process.pid)
    while len(found) < expected and time.monotonic() < deadline:
        time.sleep(0.2)
        found = read(directory, proxy.process.pid)
    if len(found) != expected:
        raise SystemExit(
            f"the probe counted {len(found)} requests in the plugin's hooks, not {expected}: "
            "a hook ran outside its request's task, or a request met none"
        )
    return found


def results(*, turns: int = TURNS, fast_start: bool = False) -> dict[str, Any]:
    """Both proxies, every loop: one row per format and window, and the proxies' start-up times."""
    loops: list[Loop] = []
    with RecordingUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp)
        options: dict[str, Any] = {"fast_start": fast_start, "pythonpath": [ROOT], "extra_env": {DIR_ENV: tmp}}
        with (
            start_proxy(config(upstream, True), workdir=probe / "with", name="with", **options) as with_plugin,
            start_proxy(config(upstream, False), workdir=probe / "without", name="without", **options) as without,
        ):
            startup = {"with": with_plugin.startup_seconds, "without": without.startup_seconds}
            for fmt in FORMATS:
                for window in WINDOWS:
                    loops.append(
                        run_loop(fmt, window, turns, with_plugin=with_plugin, without=without, upstream=upstream)
                    )
                    upstream.clear()
            # One more request, so that the probe writes again once every timed request's hooks are done.
            send(with_plugin, FORMATS["chat"].route, json.dumps({"model": "glm-1M", **_chat(make_session(4))}).encode())
            hooks = hook_times(probe, with_plugin, len(loops) * (WARM_UP + turns) + 1)
    rows = []
    for index, loop in enumerate(loops):
        start = index * (WARM_UP + turns) + WARM_UP
        mine = [seconds * 1e3 for seconds in hooks[start : start + turns]]
        added = [(a - b) * 1e3 for a, b in zip(loop.with_plugin, loop.without, strict=True)]
        rows.append(
            {
                "format": loop.fmt,
                "window": loop.window,
                "messages": list(loop.messages),
                "hooks_p50_ms": round(statistics.median(mine), 2),
                "hooks_p95_ms": round(percentile(mine, 0.95), 2),
                "with_ms": round(statistics.median(loop.with_plugin) * 1e3, 1),
                "without_ms": round(statistics.median(loop.without) * 1e3, 1),
                "added_ms": round(statistics.median(added), 1),
                "upstream_got": list(loop.received),
            }
        )
    return {"turns": turns, "startup_s": {k: round(v, 1) for k, v in startup.items()}, "rows": rows}


#: How the tables name each format.
LABELS = {"chat": "chat", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def table(found: dict[str, Any]) -> str:
    lines = [
        "| route | window | messages | its hooks p50 | p95 | with plugin | without | added "
        "| upstream got (with / without) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in found["rows"]:
        first, last = row["messages"]
        got = row["upstream_got"]
        lines.append(
            f"| {LABELS[row['format']]} | {row['window']} | {first}→{last} | {row['hooks_p50_ms']:.1f} ms | "
            f"{row['hooks_p95_ms']:.1f} ms | {row['with_ms']:.1f} ms | {row['without_ms']:.1f} ms | "
            f"{row['added_ms']:+.1f} ms | {got[0]} / {got[1]} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns a loop, proxies forked (smoke run)")
    parser.add_argument("--turns", type=int, help=f"turns a loop (default {TURNS})")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH")
    args = parser.parse_args(argv)
    turns = args.turns or (QUICK_TURNS if args.quick else TURNS)
    found = results(turns=turns, fast_start=args.quick)
    print(f"# Through a real proxy: {turns} turns a loop, from {START} messages\n")
    print(f"start-up: {found['startup_s']['with']} s with the plugin, {found['startup_s']['without']} s without\n")
    print(table(found))
    print(
        "\nIts hooks: the time a request spent in the plugin's hook methods in the proxy (bench.proxy_probes),"
        "\nall but the log events; with plugin / without: the client's median latency through each proxy;"
        "\nadded: the median of the per-turn differences. The upstream answers at once."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
