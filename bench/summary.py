"""A summary model for cut turns (``summary_model``): what it costs a request, and what it does to the
prompt cache.

    python bench/summary.py            # about a minute
    python bench/summary.py --quick    # fewer repetitions and rounds

1. Latency. The hook's deployment pass on the same governed request (a coding-agent loop at a
   16k window, ``cache_stable``, the cut point already summarised or not), with ``summary_model``
   set and without, interleaved; medians and their ratio. The summary requests themselves go to a
   local upstream in the background (no request waits for them).
2. Prompt-cache reuse. A loop replayed turn by turn for GLM with ``cache_stable``, once with the
   note only and once with a summary model whose summary of each new cut point is ready one turn
   after it appears (the switch from note to summary is one more rewrite per cut point);
   reuse as in bench/cache.py: the share of the previous request repeated at the start of the next.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from bench.sessions import make_tools, replay
from litellm_governance import GovernanceConfig, GovernanceHook, govern_request
from litellm_governance._tokens import TokenCache, TokenCounter

MODEL = "zai/glm-4.6"
WINDOW = 16_000


def reuse_of(requests: Sequence[Sequence[dict[str, Any]]], counter: TokenCounter) -> list[float]:
    """For each request after the first: the share of the previous one (in tokens) it repeats at its start."""
    out = []
    for previous, current in itertools.pairwise(requests):
        shared = 0
        while shared < min(len(previous), len(current)) and previous[shared] == current[shared]:
            shared += 1
        tokens = [counter.message(m) for m in previous]
        out.append(sum(tokens[:shared]) / max(1, sum(tokens)))
    return out


def replay_reuse(rounds: int, *, summaries: bool) -> tuple[float, float, int]:
    """(mean reuse, worst reuse, summaries used) over a replayed loop."""
    config = GovernanceConfig(context_window_tokens=WINDOW, cache_stable=True)
    counter = TokenCounter("cl100k_base", TokenCache(100_000))
    written: dict[str, str] = {}
    due: dict[str, str] = {}  # ready from the next turn on
    sent = []
    used = 0
    for turn in replay(rounds, seed=0):
        governed = govern_request({"model": MODEL, "messages": turn}, config=config, summaries=written)
        sent.append(governed.request["messages"])
        used += governed.report.steps.get("summarized", 0)
        written.update(due)
        due = {}
        if summaries and governed.cut is not None and governed.cut.key not in written:
            due[governed.cut.key] = f"Summary of the {governed.cut.turns} turns cut at this point."
    reuse = reuse_of(sent, counter)
    return statistics.fmean(reuse), min(reuse), used


async def hook_latency(reps: int) -> tuple[float, float]:
    """Median seconds of the deployment pass, without and with ``summary_model`` (interleaved)."""
    from litellm_governance.testing import RecordingUpstream

    session = list(replay(160, seed=1))[-1]
    with RecordingUpstream(reply="A summary.") as upstream:
        import litellm

        litellm.api_base, litellm.api_key = upstream.base_url, "x"
        hooks = {
            "off": GovernanceHook(context_window_tokens=WINDOW, cache_stable=True),
            "on": GovernanceHook(context_window_tokens=WINDOW, cache_stable=True, summary_model="openai/summariser"),
        }
        times: dict[str, list[float]] = {"off": [], "on": []}
        for rep in range(reps):
            for name in ("off", "on") if rep % 2 else ("on", "off"):
                kwargs = {"model": MODEL, "messages": session, "tools": make_tools(), "metadata": {}}
                start = time.perf_counter()
                await hooks[name].async_pre_call_deployment_hook(kwargs, "acompletion")
                times[name].append(time.perf_counter() - start)
        await hooks["on"]._summaries.wait()
        litellm.api_base = litellm.api_key = None
    return statistics.median(times["off"]), statistics.median(times["on"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    reps, rounds = (9, 120) if args.quick else (41, 300)
    off, on = asyncio.run(hook_latency(reps))
    print(f"# summary_model (`python bench/summary.py{' --quick' if args.quick else ''}`)\n")
    print("| deployment pass, 160-round loop, 16k, cache_stable | median | ratio |")
    print("|---|---:|---:|")
    print(f"| without summary_model | {off * 1000:.2f} ms | 1.00 |")
    print(f"| with summary_model (summaries written in the background) | {on * 1000:.2f} ms | {on / off:.2f} |")
    print()
    print(f"| prompt-cache replay, {rounds} rounds, GLM, 16k, cache_stable | reuse | worst | summaries used |")
    print("|---|---:|---:|---:|")
    for label, flag in (("note only", False), ("summary ready one turn after each new cut point", True)):
        mean, worst, used = replay_reuse(rounds, summaries=flag)
        print(f"| {label} | {mean:.3f} | {worst:.2f} | {used} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
