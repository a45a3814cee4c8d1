"""Prompt-cache replay: how much of each governed request repeats the previous one, with
``cache_stable`` and with the literal rules.

    python bench/cache.py                    # two loops at 24k, both modes (make bench runs it)
    python bench/cache.py --quick            # 60 rounds, one loop, 16k and 24k (the test suite's smoke run)
    python bench/cache.py --windows 24000,64000,128000 --seeds 3

An agent loop resends its whole history every turn, and providers bill the longest prefix a
request shares with a recent one at a fraction of the price (Anthropic 10 %, OpenAI 10-50 %).
This replays long single-task coding-agent loops (bench/sessions.py: real file contents, one to
three tool calls a round, about 2.2 messages a round) turn by turn and governs every request for
GLM (``zai/glm-4.6``, strict profile) with ``cache_stable`` on and off (the literal rules: every
request cut as far as its own budget asks). Each window replays enough rounds to spend most turns
with a history that no longer fits (230 rounds at 24k, 1,000 at 128k).

Columns (means over every turn of every loop, except where said):

* reuse: share of the previous governed request (tool schemas + messages, in tokens) that the
  next one repeats identically at its start; min: the worst turn. Target (issue #51): at least
  0.95 on each loop with ``cache_stable`` at 24k.
* over: turns over budget (must be 0); task: share of turns whose request still holds the task.
* use: tokens sent / budget, over the turns from the first cut on: how much of the room the mode
  gives the model once the history no longer fits.
* sent: tokens sent per turn; billed: tokens billed per turn, the repeated prefix at 10 %
  (Anthropic's cache-read price).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import multiprocessing
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from bench.sessions import make_tools, replay
from litellm_governance import GovernanceConfig, govern
from litellm_governance._tokens import TokenCache, TokenCounter

MODEL = "zai/glm-4.6"
CACHED_PRICE = 0.10
WINDOW = 24_000
SEEDS = (0, 1)
#: Tool rounds replayed per window: enough for most turns to come after the first cut.
ROUNDS = {24_000: 230, 32_000: 300, 64_000: 600, 128_000: 1_000}
MODES = ("literal", "cache_stable")
TARGET_REUSE = 0.95


@dataclass
class Turn:
    """One governed request of a replayed loop."""

    reuse: float | None  # None on the first turn (nothing to repeat)
    billed: float | None
    sent: int
    use: float  # tokens sent / budget, as the report estimates them for the provider
    cut: bool  # the request was cut (history snipped)
    over: bool
    task: bool


@dataclass
class Row:
    window: int
    mode: str
    reuse: tuple[float, ...]  # each loop's mean
    worst: float
    over: int
    task: float
    use: float | None
    sent: float
    billed: float


def config_for(window: int, mode: str) -> GovernanceConfig:
    return GovernanceConfig(context_window_tokens=window, cache_stable=mode == "cache_stable")


def rounds_for(window: int) -> int:
    """Rounds to replay at `window`: the planned figure, else scaled from the nearest one."""
    if window in ROUNDS:
        return ROUNDS[window]
    return max(230, round(window * 1_000 / 128_000 + 100))


def replay_session(
    config: GovernanceConfig, seed: int, rounds: int, counter: TokenCounter, *, start: int = 1
) -> list[Turn]:
    """Govern each turn of the loop `seed` (`rounds` tool rounds) with `config`, from turn `start`
    (governing is stateless: earlier turns do not change later ones, so they may be skipped)."""
    tools = make_tools()
    tools_tokens = counter.tools(tools)
    turns: list[Turn] = []
    previous: list[dict[str, object]] | None = None
    previous_tokens: list[int] = []
    for turn, request in enumerate(replay(rounds, seed=seed)):
        if turn < max(1, start):
            continue
        result = govern(request, model=MODEL, tools=tools, config=config)
        report = result.report
        sent = result.messages
        tokens = [counter.message(m) for m in sent]
        total = tools_tokens + sum(tokens)
        reuse = billed = None
        if previous is not None:
            shared = 0
            while shared < min(len(previous), len(sent)) and previous[shared] == sent[shared]:
                shared += 1
            reuse = (tools_tokens + sum(previous_tokens[:shared])) / (tools_tokens + sum(previous_tokens))
            cached = tools_tokens + sum(tokens[:shared])
            billed = total - cached + CACHED_PRICE * cached
        assert report.budget, "the bench needs a window"
        turns.append(
            Turn(
                reuse=reuse,
                billed=billed,
                sent=total,
                use=report.tokens_after / report.budget,
                cut=bool(report.steps.get("snipped")),
                over=report.over_budget,
                task=holds_task(sent, request[1]),
            )
        )
        previous, previous_tokens = sent, tokens
    return turns


def holds_task(sent: Sequence[dict[str, object]], task: dict[str, object]) -> bool:
    """Whether the governed request still carries the task: the task message itself, or a user
    message its text is part of (a strict provider's rules merge a note for cut turns into it)."""
    text = task.get("content")
    return any(
        m is task or m == task or (isinstance(text, str) and m.get("role") == "user" and text in str(m.get("content")))
        for m in sent
    )


def after_first_cut(turns: Sequence[Turn]) -> list[Turn]:
    """The turns from the first one whose request was cut."""
    first = next((i for i, t in enumerate(turns) if t.cut), len(turns))
    return list(turns[first:])


def mean_reuse(turns: Sequence[Turn]) -> float:
    return statistics.fmean(t.reuse for t in turns if t.reuse is not None)


def summarize(window: int, mode: str, sessions: Sequence[Sequence[Turn]]) -> Row:
    mean = statistics.fmean
    turns = [t for s in sessions for t in s]
    cut = [t for s in sessions for t in after_first_cut(s)]
    return Row(
        window=window,
        mode=mode,
        reuse=tuple(mean_reuse(s) for s in sessions),
        worst=min(t.reuse for t in turns if t.reuse is not None),
        over=sum(t.over for t in turns),
        task=mean(t.task for t in turns),
        use=mean(t.use for t in cut) if cut else None,
        sent=mean(t.sent for t in turns),
        billed=mean(t.billed for t in turns if t.billed is not None),
    )


def _job(args: tuple[int, str, int, int]) -> tuple[int, str, int, list[Turn]]:
    window, mode, seed, rounds = args
    counter = TokenCounter("cl100k_base", TokenCache(1_000_000))
    return window, mode, seed, replay_session(config_for(window, mode), seed, rounds, counter)


def measure(windows: Sequence[int], seeds: Sequence[int], rounds: int | None = None, processes: int = 2) -> list[Row]:
    """Replay every (window, mode, seed), in `processes` worker processes, and summarize."""
    jobs = [(w, m, s, rounds or rounds_for(w)) for w in windows for m in MODES for s in seeds]
    jobs.sort(key=lambda job: -job[0] * job[3])  # longest first
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            found = pool.map(_job, jobs, chunksize=1)
    else:
        found = [_job(job) for job in jobs]
    sessions: dict[tuple[int, str], list[list[Turn]]] = {}
    for window, mode, _, turns in sorted(found, key=lambda item: item[:3]):
        sessions.setdefault((window, mode), []).append(turns)
    return [summarize(window, mode, sessions[window, mode]) for window in windows for mode in MODES]


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| window | mode | reuse (each loop) | min | over | task | use | sent | billed |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        use = "n/a" if r.use is None else f"{r.use:.2f}"
        reuse = " / ".join(f"{value:.3f}" for value in r.reuse)
        lines.append(
            f"| {r.window // 1000}k | {r.mode} | {reuse} | {r.worst:.2f} | {r.over} | {r.task:.0%} | {use} | "
            f"{r.sent:,.0f} | {r.billed:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 rounds, one loop, 16k and 24k")
    parser.add_argument("--windows", help=f"comma-separated context windows (default {WINDOW})")
    parser.add_argument(
        "--seeds", type=int, default=len(SEEDS), help=f"loops per window and mode (default {len(SEEDS)})"
    )
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args(argv)
    seeds: tuple[int, ...] = tuple(range(args.seeds))
    windows: tuple[int, ...] = (WINDOW,)
    rounds: int | None = None
    if args.quick:
        rounds, seeds, windows = 60, (0,), (16_000, 24_000)
    if args.windows:
        windows = tuple(int(w) for w in args.windows.split(","))
    rows = measure(windows, seeds, rounds, processes=1 if args.quick else args.processes)
    plan = str(rounds) if rounds else ", ".join(f"{w // 1000}k: {rounds_for(w)}" for w in windows)
    print(f"Prompt-cache replay: {len(seeds)} loops per window and mode ({plan} tool rounds), {MODEL}\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
