"""The plugin under load: many agent sessions at once through a real proxy, with and without it.

    python bench/load.py            # 48 sessions, 24 at once, two rounds (a few minutes)
    python bench/load.py --quick    # 8 sessions, 4 at once
    python bench/load.py --rounds 3 # memory after a third round too (do the bounded caches level off?)

Two real ``litellm --config`` proxies (with the plugin and without), one local upstream that
answers at once. Each session is an agent loop that grows by one tool round per request — half
of them chat completions to GLM, half Claude Code's ``/v1/messages`` to Claude, both at a 32k
window — and `--concurrency` sessions run at a time. Both proxies get the same sessions, run
side by side so the machine's load falls on both alike. Reported: p50 and p95 of the client-side
latency per proxy and their ratio, the same split into each session's first request (no cache
has seen its history: the plugin tokenizes all of it) and the rest (one new tool round each), and
each proxy's resident memory after a first and a second round of fresh sessions (flat: nothing
grows with the sessions served).

Targets (issue "Claude Code and Codex requests as fast as chat ones"): p95 with the plugin at
most 1.05 times without; memory flat over the second round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_shapes import to_claude_code
from bench.sessions import make_session, make_tools, next_round
from litellm_governance.testing import ProxyProcess, RecordingUpstream, start_proxy

WINDOW = 32_768


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


def session_requests(index: int, turns: int, start: int) -> list[Request]:
    """One agent loop of `turns` requests, built and serialized before anything is timed (so the
    load generator spends its time sending, not building sessions)."""
    history = make_session(start, seed=1000 + index)
    claude = index % 2 == 1
    requests = []
    for _ in range(turns):
        history = next_round(history, seed=1000 + index)
        if claude:
            route, body = "/v1/messages", {"model": "claude", "max_tokens": 1024, **to_claude_code(history)}
        else:
            route, body = "/v1/chat/completions", {"model": "glm", "messages": history, "tools": make_tools()}
        requests.append((route, json.dumps(body).encode()))
    return requests


async def session(client: Any, proxy: ProxyProcess, requests: list[Request]) -> list[float]:
    """One agent loop's requests, in order; the latency of each."""
    headers = {**proxy.headers, "Content-Type": "application/json"}
    times = []
    for route, body in requests:
        began = time.perf_counter()
        response = await client.post(proxy.url(route), content=body, headers=headers)
        times.append(time.perf_counter() - began)
        if response.status_code != 200:
            raise SystemExit(f"{proxy.base_url} answered {response.status_code}: {response.text[:300]}")
    return times


@dataclass(frozen=True)
class Plan:
    """A round: how many sessions per proxy, how many at once, their length and starting size."""

    sessions: int
    concurrency: int
    turns: int
    start: int

    def requests(self, offset: int) -> list[list[Request]]:
        """Every session's requests for the round starting at session `offset`."""
        return [session_requests(offset + i, self.turns, self.start) for i in range(self.sessions)]


async def run_round(proxy: ProxyProcess, plan: Plan, sessions: list[list[Request]]) -> list[list[float]]:
    """Every session's latencies, in order (each session's first request meets cold caches)."""
    import httpx

    gate = asyncio.Semaphore(plan.concurrency)
    limits = httpx.Limits(max_connections=plan.concurrency * 2)
    async with httpx.AsyncClient(timeout=300, trust_env=False, limits=limits) as client:

        async def one(requests: list[Request]) -> list[float]:
            async with gate:
                return await session(client, proxy, requests)

        return list(await asyncio.gather(*(one(requests) for requests in sessions)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def compare(
    proxies: dict[str, ProxyProcess], plan: Plan, sessions: list[list[Request]]
) -> dict[str, list[list[float]]]:
    """The same round on both proxies at once (so background load falls on both alike)."""
    names = list(proxies)
    results = await asyncio.gather(*(run_round(proxies[n], plan, sessions) for n in names))
    return dict(zip(names, results, strict=True))


def latency_table(groups: dict[str, dict[str, list[float]]]) -> None:
    """A table of p50 and p95 per proxy, and their ratios to the proxy without the plugin, for each
    group of requests (its name follows the proxy's; "" for all of them)."""
    print("| proxy | requests | p50 | p95 | p50 ratio | p95 ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for which, times in groups.items():
        base50, base95 = statistics.median(times["without"]), percentile(times["without"], 0.95)
        for name in ("without", "with"):
            p50, p95 = statistics.median(times[name]), percentile(times[name], 0.95)
            label = f"{name} plugin" + (f", {which}" if which else "")
            print(
                f"| {label} | {len(times[name])} | {p50 * 1000:.0f} ms | {p95 * 1000:.0f} ms | "
                f"{p50 / base50:.2f} | {p95 / base95:.2f} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=24, help="sessions at once, both proxies together")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--start", type=int, default=300, help="messages each session starts with")
    parser.add_argument(
        "--rounds", type=int, default=2, help="rounds of fresh sessions (memory is reported after each)"
    )
    args = parser.parse_args(argv)
    args.rounds = max(2, args.rounds)
    if args.quick:
        args.sessions, args.concurrency, args.turns, args.start = 8, 4, 3, 150
    plan = Plan(args.sessions, args.concurrency // 2 or 1, args.turns, args.start)
    with (
        RecordingUpstream() as upstream,
        tempfile.TemporaryDirectory() as tmp,
        start_proxy(config(upstream, True), workdir=Path(tmp) / "with", name="with") as with_plugin,
        start_proxy(config(upstream, False), workdir=Path(tmp) / "without", name="without") as without,
    ):
        proxies = {"with": with_plugin, "without": without}
        memory = [{n: rss_mib(p) for n, p in proxies.items()}]  # at start, then after each round
        rounds = []
        for number in range(args.rounds):
            rounds.append(asyncio.run(compare(proxies, plan, plan.requests(10_000 * number))))
            memory.append({n: rss_mib(p) for n, p in proxies.items()})
    flag = " --quick" if args.quick else ""
    print(f"# Load (`python bench/load.py{flag}`)\n")
    print(
        f"{args.sessions} sessions per proxy and round ({args.concurrency // 2 or 1} at once per proxy, both proxies "
        f"together), {args.turns} requests each, histories from {args.start} messages; half chat to GLM, half "
        f"/v1/messages to Claude, {WINDOW // 1024}k windows; {args.rounds} rounds of fresh sessions.\n"
    )
    sessions = {n: [times for found in rounds for times in found[n]] for n in proxies}
    latency_table({"": {n: [t for times in sessions[n] for t in times] for n in proxies}})
    # Where the tail comes from: each session's first request, whose history no cache has seen (the
    # plugin tokenizes all of it), against the requests after it (one new tool round each).
    print("\nThe same requests, each session's first (cold caches) apart from the rest (warm):\n")
    latency_table(
        {
            "first requests": {n: [times[0] for times in sessions[n]] for n in proxies},
            "the rest": {n: [t for times in sessions[n] for t in times[1:]] for n in proxies},
        }
    )
    print()
    later = range(2, args.rounds + 1)
    print(
        "| proxy | memory at start | "
        + " | ".join(f"after round {r}" for r in range(1, args.rounds + 1))
        + " | "
        + " | ".join(f"round {r} - round {r - 1}" for r in later)
        + " |"
    )
    print("|---|" + "---:|" * (1 + args.rounds + len(later)))
    for name in ("without", "with"):
        figures = [f"{m[name]:.0f} MiB" for m in memory]
        figures += [f"{memory[r][name] - memory[r - 1][name]:+.0f} MiB" for r in later]
        print(f"| {name} plugin | " + " | ".join(figures) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
