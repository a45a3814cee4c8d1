"""The plugin under load: many agent sessions at once through a real proxy, with and without it.

    python bench/load.py            # 16 sessions a round, 8 at once per proxy, two rounds (make bench runs it)
    python bench/load.py --quick    # 4 sessions, 2 at once, shorter, the proxies forked (a smoke run)

Two real ``litellm --config`` proxies (with the plugin and without) and one local upstream that
answers at once. Each session is an agent loop that grows by one tool round a request, from 300
messages: half of them chat completions to GLM, half Claude Code's ``/v1/messages`` to Claude, both
at a 32k window (the plugin compacts and snips). Both proxies get the same sessions at the same
time, so the machine's load falls on both alike. Reported: p50 and p95 of the client's latency
through each proxy and their ratio, and each proxy's resident memory at start and after each round
of fresh sessions. Targets (issue #53): p95 at most 1.10 times the proxy without the plugin; memory
level after the second round (it grows over round 2 by at most `MEMORY_SLACK_MIB` more than the
proxy without the plugin does).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.agent_shapes import to_claude_code
from bench.sessions import make_session, make_tools, next_round
from litellm_governance.testing import ProxyProcess, RecordingUpstream, start_proxy

WINDOW = 32_768
#: A round: sessions per proxy, how many at once per proxy, requests each, messages each starts with.
SESSIONS, CONCURRENCY, TURNS, START = 16, 8, 6, 300
TARGET_P95_RATIO = 1.10
MEMORY_SLACK_MIB = 10.0


def config(upstream: RecordingUpstream, plugin: bool) -> dict[str, object]:
    models = [
        {
            "model_name": "glm",
            "litellm_params": {"model": "zai/glm-4.6", "api_base": upstream.base_url, "api_key": "sk-local"},
            "model_info": {"max_input_tokens": WINDOW},
        },
        {
            "model_name": "claude",
            "litellm_params": {
                "model": "anthropic/claude-sonnet-4-5-20250929",
                "api_base": upstream.root_url,
                "api_key": "sk-local",
            },
            "model_info": {"max_input_tokens": WINDOW},
        },
    ]
    settings: dict[str, object] = {"num_retries": 0}
    if plugin:
        settings["callbacks"] = "litellm_governance.proxy_handler_instance"
    return {"model_list": models, "litellm_settings": settings}


def rss_mib(proxy: ProxyProcess) -> float:
    """Resident memory of the proxy process (and its children), in MiB."""
    pids = [proxy.process.pid]
    try:
        children = Path(f"/proc/{proxy.process.pid}/task/{proxy.process.pid}/children").read_text().split()
        pids += [int(p) for p in children]
    except OSError:
        pass
    return sum(resident_kib(pid) or 0 for pid in pids) / 1024


def resident_kib(pid: int | str = "self") -> int | None:
    """Resident memory of process `pid` (this one by default), in KiB; None where ``/proc`` does not say."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(found[0]) if found else None


Request = tuple[str, bytes]  # (route, JSON body)


@dataclass(frozen=True)
class Plan:
    """A round: sessions per proxy, how many at once per proxy, their length and starting size."""

    sessions: int
    concurrency: int
    turns: int
    start: int

    def requests(self, offset: int) -> list[list[Request]]:
        """Every session's requests for the round starting at session `offset`, built and serialized
        before anything is timed (the load generator spends its time sending)."""
        return [self.session(offset + i) for i in range(self.sessions)]

    def session(self, index: int) -> list[Request]:
        history = make_session(self.start, seed=1000 + index)
        requests = []
        for _ in range(self.turns):
            history = next_round(history, seed=1000 + index)
            if index % 2:
                route, body = "/v1/messages", {"model": "claude", "max_tokens": 1024, **to_claude_code(history)}
            else:
                route, body = "/v1/chat/completions", {"model": "glm", "messages": history, "tools": make_tools()}
            requests.append((route, json.dumps(body).encode()))
        return requests


async def run_round(proxy: ProxyProcess, plan: Plan, sessions: list[list[Request]]) -> list[float]:
    """Every request's latency, `plan.concurrency` sessions at a time, each session's requests in order."""
    import httpx

    gate = asyncio.Semaphore(plan.concurrency)
    headers = {**proxy.headers, "Content-Type": "application/json"}
    times: list[float] = []
    async with httpx.AsyncClient(
        timeout=300, trust_env=False, limits=httpx.Limits(max_connections=plan.concurrency * 2)
    ) as client:

        async def one(requests: list[Request]) -> None:
            async with gate:
                for route, body in requests:
                    began = time.perf_counter()
                    response = await client.post(proxy.url(route), content=body, headers=headers)
                    times.append(time.perf_counter() - began)
                    if response.status_code != 200:
                        raise SystemExit(f"{proxy.base_url} answered {response.status_code}: {response.text[:300]}")

        await asyncio.gather(*(one(requests) for requests in sessions))
    return times


async def both(proxies: dict[str, ProxyProcess], plan: Plan, sessions: list[list[Request]]) -> dict[str, list[float]]:
    """The same round on both proxies at once."""
    found = await asyncio.gather(*(run_round(proxy, plan, sessions) for proxy in proxies.values()))
    return dict(zip(proxies, found, strict=True))


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def results(plan: Plan, rounds: int = 2, *, fast_start: bool = False) -> dict[str, Any]:
    """Latency percentiles per proxy over every round, and each proxy's memory after each round
    (`fast_start`: the proxies forked from one LiteLLM import, for a smoke run)."""
    times: dict[str, list[float]] = {"with": [], "without": []}
    with (
        RecordingUpstream() as upstream,
        tempfile.TemporaryDirectory() as tmp,
        start_proxy(
            config(upstream, True), workdir=Path(tmp) / "with", name="with", fast_start=fast_start
        ) as with_plugin,
        start_proxy(
            config(upstream, False), workdir=Path(tmp) / "without", name="without", fast_start=fast_start
        ) as without,
    ):
        proxies = {"with": with_plugin, "without": without}
        warm = Plan(2, 2, 2, 40)  # LiteLLM's first requests on each route are slow, and the plugin loads its tokenizer
        asyncio.run(both(proxies, warm, warm.requests(-100)))
        memory = {name: [rss_mib(proxy)] for name, proxy in proxies.items()}  # at start, then after each round
        for number in range(rounds):
            found = asyncio.run(both(proxies, plan, plan.requests(10_000 * number)))
            upstream.clear()  # it keeps every body it received
            for name, proxy in proxies.items():
                times[name] += found[name]
                memory[name].append(rss_mib(proxy))
    summary: dict[str, Any] = {
        name: {
            "requests": len(found),
            "p50_ms": round(statistics.median(found) * 1e3, 1),
            "p95_ms": round(percentile(found, 0.95) * 1e3, 1),
            "memory_mib": [round(m, 1) for m in memory[name]],
        }
        for name, found in times.items()
    }
    return {
        "plan": {**vars(plan), "rounds": rounds, "window": WINDOW},
        **summary,
        "p95_ratio": round(summary["with"]["p95_ms"] / summary["without"]["p95_ms"], 3),
        "p50_ratio": round(summary["with"]["p50_ms"] / summary["without"]["p50_ms"], 3),
        "last_round_growth_mib": {name: round(m[-1] - m[-2], 1) for name, m in memory.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 sessions a round, 2 at once, 3 turns from 150 messages")
    parser.add_argument("--sessions", type=int, default=SESSIONS, help="sessions per proxy and round")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="sessions at once, per proxy")
    parser.add_argument("--turns", type=int, default=TURNS, help="requests per session")
    parser.add_argument("--start", type=int, default=START, help="messages each session starts with")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of fresh sessions (at least 2)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to PATH")
    args = parser.parse_args(argv)
    plan = Plan(args.sessions, args.concurrency, args.turns, args.start)
    if args.quick:
        plan = Plan(4, 2, 3, 150)
    found = results(plan, max(2, args.rounds), fast_start=args.quick)
    print(f"# Load: {json.dumps(found['plan'])}\n")
    print("| proxy | requests | p50 | p95 | memory: at start, after each round |")
    print("|---|---:|---:|---:|---|")
    for name in ("without", "with"):
        row = found[name]
        memory = " → ".join(f"{m:.0f}" for m in row["memory_mib"])
        print(f"| {name} plugin | {row['requests']} | {row['p50_ms']:.0f} ms | {row['p95_ms']:.0f} ms | {memory} MiB |")
    growth = found["last_round_growth_mib"]
    print(
        f"\np95 with / without: {found['p95_ratio']:.2f} (target ≤ {TARGET_P95_RATIO}); p50: {found['p50_ratio']:.2f}; "
        f"memory over the last round: {growth['with']:+.1f} MiB with the plugin, {growth['without']:+.1f} MiB without"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
