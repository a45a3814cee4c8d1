"""What the plugin adds to a request's latency through a real LiteLLM proxy.

    python bench/proxy_latency.py          # or: make bench
    python bench/proxy_latency.py --quick

Starts a local recording upstream (replies at once) and two real `litellm --config` proxies
with the same models, one with the plugin and one without, and sends each the same requests,
alternating between them: an agent loop of 50-message and of 400-message histories, each turn
the previous history plus one new tool round (what agents send). Reports start-up times, and
for each size the median client-side latency with and without the plugin and the difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sessions import make_session, make_tools, next_round
from litellm_governance.testing import ProxyProcess, RecordingUpstream, start_proxy

WINDOW = 32_768  # small enough that the 400-message requests are compacted and snipped


def config(upstream: RecordingUpstream, plugin: bool) -> dict[str, object]:
    model = {
        "model_name": "glm",
        "litellm_params": {"model": "zai/glm-4.6", "api_base": upstream.base_url, "api_key": "sk-local"},
        "model_info": {"max_input_tokens": WINDOW},
    }
    settings: dict[str, object] = {"num_retries": 0}
    if plugin:
        settings["callbacks"] = "litellm_governance.proxy_handler_instance"
    return {"model_list": [model], "litellm_settings": settings}


def timed(proxy: ProxyProcess, body: dict[str, object]) -> float:
    started = time.perf_counter()
    status, _, raw = proxy.post("/v1/chat/completions", body)
    elapsed = time.perf_counter() - started
    if status != 200:
        raise SystemExit(f"{proxy.base_url} answered {status}: {raw[:300]!r}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 turns per size instead of 40")
    args = parser.parse_args(argv)
    turns = 5 if args.quick else 40
    tools = make_tools()
    rows = []
    with (
        RecordingUpstream() as upstream,
        tempfile.TemporaryDirectory() as tmp,
        start_proxy(config(upstream, True), workdir=Path(tmp) / "with", name="with") as with_plugin,
        start_proxy(config(upstream, False), workdir=Path(tmp) / "without", name="without") as without,
    ):
        startup = (with_plugin.startup_seconds, without.startup_seconds)
        for size in (50, 400):
            history = make_session(size, seed=size)
            for proxy in (with_plugin, without):  # warm both (the plugin loads its tokenizer once)
                timed(proxy, {"model": "glm", "messages": history, "tools": tools})
            times: dict[str, list[float]] = {"with": [], "without": []}
            for turn in range(turns):
                history = next_round(history, seed=size)
                body = {"model": "glm", "messages": history, "tools": tools, "max_tokens": 1024}
                order = [("with", with_plugin), ("without", without)]
                for name, proxy in order if turn % 2 else order[::-1]:
                    times[name].append(timed(proxy, body))
            governed = upstream.bodies()[-2:]
            rows.append((size, len(history), times, [len(b["messages"]) for b in governed]))
    print(f"Proxy latency: {turns} agent-loop turns per size, GLM deployment with a {WINDOW:,}-token window")
    print(f"command: python bench/proxy_latency.py{' --quick' if args.quick else ''}\n")
    print(f"proxy start-up: {startup[0]:.1f} s with the plugin, {startup[1]:.1f} s without\n")
    print("| history | with plugin | without | added | upstream received (with / without) |")
    print("|---:|---:|---:|---:|---|")
    for size, length, times, received in rows:
        with_ms = statistics.median(times["with"]) * 1000
        without_ms = statistics.median(times["without"]) * 1000
        print(
            f"| {size}→{length} msgs | {with_ms:.1f} ms | {without_ms:.1f} ms | "
            f"{with_ms - without_ms:+.1f} ms | {received[0]} / {received[1]} messages |"
        )
    print("\nMedians of client-side round trips on loopback; the upstream answers at once, so the")
    print("difference is the plugin's share (both hooks) of a request's time in the proxy. Histories grow")
    print("by one tool round per turn. Where the plugin snips, the proxy then forwards a smaller request,")
    print("which saves some of the time the plugin spends.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
