"""Prompt-cache replay: how much of each governed request repeats the previous one.

    python bench/cache.py            # or: make bench
    python bench/cache.py --quick    # fewer rounds and windows (the test suite's smoke run)

An agent loop resends its whole history every turn, and providers bill the longest prefix a
request shares with a recent one at a fraction of the price (Anthropic 10 %, OpenAI 10-50 %).
This replays long single-task coding-agent loops (bench/sessions.py: real file contents, 230
tool rounds, about 530 messages) turn by turn, governs every request for GLM (``zai/glm-4.6``,
strict profile) at several context windows, and compares Nanobot's rules applied to each
request ("literal") with ``cache_stable``.

Columns (means over all turns of all sessions):

* reuse: share of the previous governed request (tool schemas + messages, in tokens) that the
  next one repeats identically at its start. min: the worst turn.
* over: turns over budget (must be 0).
* task: share of turns whose request still holds the task (the first user message).
* sent: tokens sent per turn.
* billed: tokens billed per turn, counting the repeated prefix at 10 % (Anthropic's cache-read
  price; OpenAI discounts 50-90 %).
* last10: of the 10 most recent tool results of at least 500 characters, how many reach the
  model whole (not compacted, not snipped): the context an agent uses most.
* rounds: tool rounds visible (whole or compacted) in the request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sessions import make_tools, replay
from litellm_governance import GovernanceConfig, govern
from litellm_governance._tokens import TokenCache, TokenCounter

MODEL = "zai/glm-4.6"
CACHED_PRICE = 0.10
ROUNDS = 230
SEEDS = (0, 1, 2)
WINDOWS = (24_000, 32_000, 64_000, 128_000)


@dataclass
class Row:
    window: int
    mode: str
    reuse: float
    worst: float
    over: int
    task: float
    sent: float
    billed: float
    last10: float
    rounds: float


def replay_session(config: GovernanceConfig, seed: int, rounds: int, counter: TokenCounter) -> dict[str, list[float]]:
    tools = make_tools()
    tools_tokens = counter.tools(tools)
    series: dict[str, list[float]] = {k: [] for k in ("reuse", "over", "task", "sent", "billed", "last10", "rounds")}
    previous: list[dict[str, object]] | None = None
    previous_tokens: list[int] = []
    for turn, request in enumerate(replay(rounds, seed=seed)):
        if turn == 0:
            continue
        result = govern(request, model=MODEL, tools=tools, config=config)
        sent = result.messages
        tokens = [counter.message(m) for m in sent]
        total = tools_tokens + sum(tokens)
        series["over"].append(float(result.report.over_budget))
        series["task"].append(float(any(m is request[1] or m == request[1] for m in sent)))
        series["sent"].append(total)
        series["rounds"].append(sum(1 for m in sent if m.get("tool_calls")))
        whole = {m.get("tool_call_id") for m in sent if m.get("role") == "tool"}
        whole -= {m.get("tool_call_id") for m in sent if m.get("role") == "tool" and _is_stub(m)}
        recent = [m for m in request if m.get("role") == "tool" and len(str(m.get("content"))) >= 500][-10:]
        series["last10"].append(sum(1 for m in recent if m.get("tool_call_id") in whole))
        if previous is not None:
            shared = 0
            while shared < min(len(previous), len(sent)) and previous[shared] == sent[shared]:
                shared += 1
            repeated = tools_tokens + sum(previous_tokens[:shared])
            series["reuse"].append(repeated / (tools_tokens + sum(previous_tokens)))
            cached = tools_tokens + sum(tokens[:shared])
            series["billed"].append(total - cached + CACHED_PRICE * cached)
        previous, previous_tokens = sent, tokens
    return series


def _is_stub(message: dict[str, object]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content.startswith("[") and content.endswith(" result omitted from context]")


def measure(window: int, mode: str, rounds: int, seeds: tuple[int, ...]) -> Row:
    config = GovernanceConfig(context_window_tokens=window, cache_stable=mode == "cache_stable")
    counter = TokenCounter("cl100k_base", TokenCache(500_000))
    merged: dict[str, list[float]] = {}
    for seed in seeds:
        for key, values in replay_session(config, seed, rounds, counter).items():
            merged.setdefault(key, []).extend(values)
    mean = statistics.fmean
    return Row(
        window=window,
        mode=mode,
        reuse=mean(merged["reuse"]),
        worst=min(merged["reuse"]),
        over=int(sum(merged["over"])),
        task=mean(merged["task"]),
        sent=mean(merged["sent"]),
        billed=mean(merged["billed"]),
        last10=mean(merged["last10"]),
        rounds=mean(merged["rounds"]),
    )


def table(rows: list[Row]) -> str:
    lines = [
        "| window | mode | reuse | min | over | task | sent | billed | last10 | rounds |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.window // 1000}k | {r.mode} | {r.reuse:.3f} | {r.worst:.2f} | {r.over} | {r.task:.0%} | "
            f"{r.sent:,.0f} | {r.billed:,.0f} | {r.last10:.1f} | {r.rounds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="40 rounds, one seed, two windows")
    args = parser.parse_args(argv)
    rounds, seeds, windows = (40, (0,), (16_000, 24_000)) if args.quick else (ROUNDS, SEEDS, WINDOWS)
    started = time.perf_counter()
    rows = [measure(w, mode, rounds, seeds) for w in windows for mode in ("literal", "cache_stable")]
    print(f"Prompt-cache replay: {len(seeds)} sessions x {rounds} tool rounds, {MODEL}, defaults of each mode")
    print(f"command: python bench/cache.py{' --quick' if args.quick else ''}\n")
    print(table(rows))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
