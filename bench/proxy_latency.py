"""What the plugin adds to a request's latency through a real LiteLLM proxy.

    python bench/proxy_latency.py          # or: make bench
    python bench/proxy_latency.py --quick
    python bench/proxy_latency.py --quick --fast-start   # the smoke test: the proxies forked from one import

Starts a local recording upstream (replies at once) and three real `litellm --config` proxies
with the same models: one with the plugin, one without, and a control without it whose pre-call
hook spins on the CPU as long as the plugin's hooks take (`bench.proxy_probes.spin`). It sends each
the same requests, taking turns at going first: agent loops of 50- and 400-message chat histories,
and 400-message Claude Code (`/v1/messages` to an Anthropic deployment) and Codex (`/v1/responses`
to an OpenAI deployment) sessions, each turn the previous history plus one new tool round (what
agents send). Reports start-up times, and per loop the median client-side latency with and without
the plugin, what the plugin adds: the median of the per-turn differences (each turn's body sent to
the proxies one right after the other, so the machine's drift over a loop cancels out) and their
middle half (the 25th to 75th percentile: how far a single turn's difference can be trusted), what
the control's spin adds the same way (what the plugin's time costs by itself), the plugin's own
time per governing pass in that proxy (its ``litellm_governance_latency_seconds`` histogram, read
in the proxy by `bench.proxy_probes`, loaded into every proxy alike): the mean over the loop's
turns, and the time a request spends in all the plugin's hook methods there
(`bench.proxy_probes.hooks`): the pass and what surrounds it, to hold against what the plugin adds;
and a second table with that time per hook method (the pre-call hook holds the pass) and the walks
they make over a request's history before governing it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_shapes import to_claude_code, to_codex
from bench.proxy_probes import DIR_ENV, SPIN_HEADER, WALKS, read
from bench.sessions import make_session, make_tools, next_round
from litellm_governance.testing import ProxyProcess, RecordingUpstream, start_proxy

WINDOW = 32_768  # small enough that the 400-message requests are compacted and snipped
BIG_WINDOW = 1_000_000
#: Requests of each loop's first body sent to each proxy before its turns are timed.
WARM_UP = 3


def config(upstream: RecordingUpstream, plugin: bool) -> dict[str, object]:
    def model(name: str, litellm_model: str, api_base: str, window: int) -> dict[str, object]:
        return {
            "model_name": name,
            "litellm_params": {"model": litellm_model, "api_base": api_base, "api_key": "sk-local"},
            "model_info": {"max_input_tokens": window},
        }

    models = []
    for suffix, window in (("", WINDOW), ("-1m", BIG_WINDOW)):
        models += [
            model(f"glm{suffix}", "zai/glm-4.6", upstream.base_url, window),
            model(f"claude{suffix}", "anthropic/claude-sonnet-4-5-20250929", upstream.root_url, window),
            model(f"gpt{suffix}", "openai/gpt-4.1", upstream.base_url, window),
        ]
    settings: dict[str, object] = {"num_retries": 0}
    if plugin:
        settings["callbacks"] = "litellm_governance.proxy_handler_instance"
    return {"model_list": models, "litellm_settings": settings}


ROOT = Path(__file__).resolve().parent.parent
PROBES = ("bench.proxy_probes.passes", "bench.proxy_probes.hooks")


def probed(settings: dict[str, object], *more: str) -> dict[str, object]:
    """`settings` with the `PROBES` loaded too (into every proxy: each pays for them alike), and `more`."""
    litellm_settings: dict[str, object] = dict(settings["litellm_settings"])  # type: ignore[call-overload]
    own = litellm_settings.get("callbacks")
    litellm_settings["callbacks"] = [*([own] if isinstance(own, str) else []), *PROBES, *more]
    return {**settings, "litellm_settings": litellm_settings}


#: The control proxy's callback: no plugin, a pre-call hook spinning as long as the header says.
SPIN = "bench.proxy_probes.spin"


def passes(directory: Path, proxy: ProxyProcess, fmt: str) -> tuple[float, float]:
    """(seconds, passes) the plugin has recorded for `fmt` in `proxy` so far (0, 0: none)."""
    found = (read(directory, proxy.process.pid, "passes") or {}).get(fmt) or (0.0, 0.0)
    return float(found[0]), float(found[1])


def in_hooks(directory: Path, proxy: ProxyProcess) -> dict[str, tuple[float, int]]:
    """Seconds `proxy` has spent in each of the plugin's hook methods so far, and their calls (under
    `WALKS`: its hooks' walks over a history, which their seconds include)."""
    found = read(directory, proxy.process.pid, "hooks") or {}
    return {name: (float(seconds), int(calls)) for name, (seconds, calls) in found.items()}


def hooked(now: dict[str, tuple[float, int]], then: dict[str, tuple[float, int]]) -> tuple[float, int]:
    """Seconds in the plugin's hook methods a response waits for (all but the success log, which runs
    after it) between two `in_hooks`, and the requests (pre-call hooks)."""
    seconds = sum(
        s - then.get(name, (0.0, 0))[0] for name, (s, _) in now.items() if name not in (WALKS, AFTER_RESPONSE)
    )
    calls = now.get("async_pre_call_hook", (0.0, 0))[1] - then.get("async_pre_call_hook", (0.0, 0))[1]
    return seconds, calls


def spun(directory: Path, proxy: ProxyProcess) -> tuple[float, int]:
    """Seconds the control proxy's hook has spun so far, and its requests."""
    seconds, calls = read(directory, proxy.process.pid, "spin") or (0.0, 0)
    return float(seconds), int(calls)


#: The hook method that runs after the response has gone (LiteLLM's logging task).
AFTER_RESPONSE = "async_log_success_event"
#: The hook methods of the per-method table, in the order a request meets them (short names).
HOOKS = (
    ("async_pre_call_hook", "pre-call"),
    ("async_pre_call_deployment_hook", "deployment"),
    ("async_post_call_success_deployment_hook", "deployment answered"),
    ("async_post_call_response_headers_hook", "header"),
    ("async_log_success_event", "success logged"),
)


# (label, route, model group, session size, body from a chat session)
def _chat(session: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": session, "tools": make_tools(), "max_tokens": 1024}


def _claude(session: list[dict[str, Any]]) -> dict[str, Any]:
    return {**to_claude_code(session), "max_tokens": 1024}


def _codex(session: list[dict[str, Any]]) -> dict[str, Any]:
    return {**to_codex(session), "max_output_tokens": 1024}


# (label, route, model group, session size, body from a chat session, the plugin's format). The -1m
# groups have a window nothing overflows: both proxies forward the same request, so the difference is
# the plugin's own time.
LOOPS = (
    ("chat, 32k", "/v1/chat/completions", "glm", 50, _chat, "chat"),
    ("chat, 32k", "/v1/chat/completions", "glm", 400, _chat, "chat"),
    ("/v1/messages, 32k", "/v1/messages", "claude", 400, _claude, "anthropic"),
    ("/v1/responses, 32k", "/v1/responses", "gpt", 400, _codex, "responses"),
    ("chat, 1M (no cut)", "/v1/chat/completions", "glm-1m", 400, _chat, "chat"),
    ("/v1/messages, 1M (no cut)", "/v1/messages", "claude-1m", 400, _claude, "anthropic"),
    ("/v1/responses, 1M (no cut)", "/v1/responses", "gpt-1m", 400, _codex, "responses"),
)


def paired(with_plugin: list[float], without: list[float]) -> tuple[float, float, float]:
    """The 25th percentile, median and 75th percentile of the per-turn differences (with - without)."""
    differences = [a - b for a, b in zip(with_plugin, without, strict=True)]
    if len(differences) < 2:
        return differences[0], differences[0], differences[0]
    low, middle, high = statistics.quantiles(differences, n=4)
    return low, middle, high


def timed(proxy: ProxyProcess, route: str, body: dict[str, object], spin: float | None = None) -> float:
    """One request's client-side latency (`spin`: seconds the control proxy's hook spins)."""
    headers = {SPIN_HEADER: str(round(spin * 1e6))} if spin is not None else None
    started = time.perf_counter()
    status, _, raw = proxy.post(route, body, headers=headers)
    elapsed = time.perf_counter() - started
    if status != 200:
        raise SystemExit(f"{proxy.base_url} answered {status}: {raw[:300]!r}")
    return elapsed


def _loop(
    loop: tuple[Any, ...],
    turns: int,
    *,
    proxies: tuple[ProxyProcess, ProxyProcess, ProxyProcess],
    upstream: RecordingUpstream,
    probe: Path,
) -> tuple[Any, ...]:
    """One agent loop through the three proxies (with the plugin, without, the control), taking turns
    at going first: its row of the table. The control's hook spins as long as the plugin's hooks took
    a request so far in this loop, the median (a request held up while a hook awaits does not set the
    spin), the last warm-up request's before the first turn."""
    label, route, group, size, make_body, fmt = loop
    with_plugin, without, control = proxies
    history = make_session(size, seed=size)
    first = {"model": group, **make_body(history)}
    for _ in range(WARM_UP - 1):  # warm all (the plugin loads its tokenizer once; LiteLLM's first requests are slower)
        for proxy in proxies:
            timed(proxy, route, first)
    time.sleep(0.2)  # the warm-up's log events (the probes write there)
    warming = in_hooks(probe, with_plugin)
    timed(with_plugin, route, first)
    time.sleep(0.2)
    hooks_before = in_hooks(probe, with_plugin)
    took = [hooked(hooks_before, warming)[0]]  # the plugin's hooks a request: the last warm-up one, then each turn's
    mark = hooks_before
    for proxy in (without, control):
        timed(proxy, route, first, took[0] if proxy is control else None)
    times: dict[str, list[float]] = {"with": [], "without": [], "control": []}
    received: dict[str, int] = {}
    time.sleep(0.2)
    spent, count = passes(probe, with_plugin, fmt)
    spun_before = spun(probe, control)
    names = list(times)
    for turn in range(turns):
        history = next_round(history, seed=size)
        body = {"model": group, **make_body(history)}
        now = in_hooks(probe, with_plugin)
        seconds, calls = hooked(now, mark)  # (the requests logged since the last turn: one, mostly)
        if calls:
            took.append(seconds / calls)
            mark = now
        spin = statistics.median(took)
        for name in names[turn % 3 :] + names[: turn % 3]:
            proxy = proxies[names.index(name)]
            times[name].append(timed(proxy, route, body, spin if proxy is control else None))
            last = upstream.requests[-1].body or {}
            received[name] = len(last.get("messages") or last.get("input") or [])
    time.sleep(0.2)
    spent_after, count_after = passes(probe, with_plugin, fmt)
    mean_pass = (spent_after - spent) / (count_after - count) if count_after > count else None
    hooks_after = in_hooks(probe, with_plugin)
    hooks = {
        name: (seconds - hooks_before.get(name, (0.0, 0))[0]) / turns
        for name, (seconds, _) in hooks_after.items()
        if name != WALKS
    }
    walks = (hooks_after.get(WALKS, (0.0, 0))[1] - hooks_before.get(WALKS, (0.0, 0))[1]) / turns
    spun_after = spun(probe, control)
    spun_mean = (spun_after[0] - spun_before[0]) / max(1, spun_after[1] - spun_before[1])
    received_pair = (received["with"], received["without"])
    return label, size, len(history), times, received_pair, mean_pass, hooks, walks, spun_mean


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 turns per loop instead of 40")
    parser.add_argument("--turns", type=int, default=None, help="turns per loop (default 40; --quick: 5)")
    parser.add_argument(
        "--fast-start", action="store_true", help="fork the proxies from one LiteLLM import (start-up not comparable)"
    )
    args = parser.parse_args(argv)
    fast = args.fast_start
    turns = args.turns or (5 if args.quick else 40)
    with RecordingUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp)
        options: dict[str, Any] = {
            "fast_start": fast,
            "pythonpath": [ROOT],
            "extra_env": {DIR_ENV: str(probe)},
        }
        with (
            start_proxy(probed(config(upstream, True)), workdir=probe / "with", name="with", **options) as with_plugin,
            start_proxy(
                probed(config(upstream, False)), workdir=probe / "without", name="without", **options
            ) as without,
            start_proxy(
                probed(config(upstream, False), SPIN), workdir=probe / "control", name="control", **options
            ) as control,
        ):
            startup = (with_plugin.startup_seconds, without.startup_seconds)
            proxies = (with_plugin, without, control)
            rows = [_loop(loop, turns, proxies=proxies, upstream=upstream, probe=probe) for loop in LOOPS]
    print(f"Proxy latency: {turns} agent-loop turns per loop, deployments with a 32k or a 1M-token window")
    flags = (" --quick" if args.quick else "") + (" --fast-start" if fast else "")
    print(f"command: python bench/proxy_latency.py{flags}\n")
    forked = " (forked from one LiteLLM import: --fast-start)" if fast else ""
    print(f"proxy start-up: {startup[0]:.1f} s with the plugin, {startup[1]:.1f} s without{forked}\n")
    print(
        "| route | history (chat messages) | with plugin | without | added | added, middle half "
        "| as long spun instead, added | the plugin's pass (mean) | its hooks (a request) | received (with / without) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for label, size, length, times, received, mean_pass, hooks, _, spun_mean in rows:
        with_ms = statistics.median(times["with"]) * 1000
        without_ms = statistics.median(times["without"]) * 1000
        low, added, high = paired(times["with"], times["without"])
        control = paired(times["control"], times["without"])[1]
        own = f"{mean_pass * 1000:.1f} ms" if mean_pass is not None else "n/a"
        print(
            f"| {label} | {size}→{length} | {with_ms:.1f} ms | {without_ms:.1f} ms | {added * 1000:+.1f} ms | "
            f"{low * 1000:+.1f} … {high * 1000:+.1f} ms | {control * 1000:+.1f} ms ({spun_mean * 1000:.1f} ms spun) | "
            f"{own} | {sum(hooks.values()) * 1000:.1f} ms | {received[0]} / {received[1]} |"
        )
    print("\nIts hooks, each method (ms a request, mean over the loop's turns):\n")
    print("| route | history (chat messages) | " + " | ".join(short for _, short in HOOKS) + " | history walks |")
    print("|---|---:|" + "---:|" * (len(HOOKS) + 1))
    for label, size, length, _, _, _, hooks, walks, _ in rows:
        spent = " | ".join(f"{hooks.get(name, 0.0) * 1000:.2f}" for name, _ in HOOKS)
        print(f"| {label} | {size}→{length} | {spent} | {walks:.1f} |")
    print("\nMedians of client-side round trips on loopback; the upstream answers at once, so the")
    print("difference is the plugin's share (both hooks) of a request's time in the proxy. Added: the median")
    print("of each turn's difference (the same body to the three proxies, one right after the other, each")
    print("going first in turn), and the middle half of those differences. Histories grow")
    print("by one tool round per turn. Where the plugin snips, the proxy then forwards a smaller request,")
    print("which saves some of the time the plugin spends. The plugin's pass: its own histogram")
    print("(litellm_governance_latency_seconds) in the proxy, mean over the loop's turns (n/a without")
    print("prometheus_client). Its hooks: every hook method of the plugin's callback timed in the proxy")
    print("(bench.proxy_probes.hooks), all of them per request: the pass, and what surrounds it; the second")
    print("table splits them by method (the pre-call hook holds the pass), and counts the walks they make")
    print("over a request's history before governing it (fields.scan_history: its size, its compaction blocks;")
    print("none where the proxy declares the body's length and every deployment compacts natively).")
    print("As long spun instead: a third proxy, without the plugin, whose pre-call hook spins on the CPU for as")
    print("long as the plugin's hooks took a request so far in the loop (the median; all but the success log,")
    print("which runs after the response), touching nothing of the request (bench.proxy_probes.spin): what that")
    print("much time costs by itself, on the same turns in the same rotation. Where added is about the same, the")
    print("plugin costs its hooks' time and nothing besides (such as colder caches, or LiteLLM doing more).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
