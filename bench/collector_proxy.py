"""The cyclic collector in real proxies, with and without the plugin (see `bench/collector.py`).

    python bench/collector_proxy.py            # 150 turns of a Claude Code session, 1M window
    python bench/collector_proxy.py --turns 20 --route chat

Starts a local upstream and two real ``litellm --config`` proxies, one with the plugin and one
without, both with `bench.proxy_probes.collections` (a callback counting every collection the proxy runs), and sends
both the same agent loop: a 400-message session growing by one tool round per turn, on a
deployment with a window nothing overflows (so both forward the same request), alternating which
proxy goes first. Prints per proxy the collections of each generation and the time they took, and
the median, mean and 95th percentile of the round trips. A full collection (generation 2) walks the
proxy's whole heap: what it costs lands on the request that meets it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import statistics
import tempfile
import time

from bench.proxy_latency import _chat, _claude, _codex, config, timed
from bench.proxy_probes import DIR_ENV, read
from bench.sessions import make_session, next_round
from litellm_governance.testing import RecordingUpstream, start_proxy

ROUTES = {
    "messages": ("/v1/messages", "claude-1m", _claude),
    "responses": ("/v1/responses", "gpt-1m", _codex),
    "chat": ("/v1/chat/completions", "glm-1m", _chat),
}
ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--route", choices=sorted(ROUTES), default="messages")
    parser.add_argument("--size", type=int, default=400, help="messages in the first request")
    parser.add_argument("--fast-start", action="store_true", help="fork both proxies from one LiteLLM import (smoke)")
    args = parser.parse_args(argv)
    route, group, make_body = ROUTES[args.route]
    with RecordingUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        env = {DIR_ENV: tmp}
        proxies = {}
        for name, plugin in (("with plugin", True), ("without", False)):
            settings = config(upstream, plugin)
            callbacks = ["litellm_governance.proxy_handler_instance"] if plugin else []
            settings["litellm_settings"]["callbacks"] = [*callbacks, "bench.proxy_probes.collections"]  # type: ignore[index]
            workdir = Path(tmp) / name.replace(" ", "-")
            fast = args.fast_start
            proxies[name] = start_proxy(
                settings, workdir=workdir, name=workdir.name, pythonpath=[ROOT], extra_env=env, fast_start=fast
            )
        try:
            history = make_session(args.size, seed=5)
            for proxy in proxies.values():
                timed(proxy, route, {"model": group, **make_body(history)})
            times: dict[str, list[float]] = {name: [] for name in proxies}
            for turn in range(args.turns):
                history = next_round(history, seed=5)
                body = {"model": group, **make_body(history)}
                order = list(proxies) if turn % 2 else list(proxies)[::-1]
                for name in order:
                    times[name].append(timed(proxies[name], route, body))
            time.sleep(1)  # the last request's log event
            found = {name: read(Path(tmp), p.process.pid, "collections") for name, p in proxies.items()}
        finally:
            for proxy in proxies.values():
                proxy.stop()
    command = f"python bench/collector_proxy.py --turns {args.turns} --route {args.route}"
    print(f"# The collector in real proxies (`{command}`)\n")
    print(f"{args.turns} turns of a {args.size}-message session growing by one tool round, {route} to {group}.\n")
    print("| proxy | heap objects | gen 0 | gen 1 | gen 2 | longest | p50 | mean | p95 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, stats in found.items():
        runs = stats["runs"]
        cells = " | ".join(f"{runs[str(g)][0]} ({1000 * runs[str(g)][1]:.0f} ms)" for g in range(3))
        longest = max(runs[str(g)][2] for g in range(3))
        ordered = sorted(times[name])
        p95 = ordered[int(0.95 * (len(ordered) - 1))]
        spread = [statistics.median(ordered), statistics.fmean(ordered), p95]
        print(
            f"| {name} | {stats['objects']:,} | {cells} | {1000 * longest:.0f} ms | "
            + " | ".join(f"{1000 * t:.1f} ms" for t in spread)
            + " |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
