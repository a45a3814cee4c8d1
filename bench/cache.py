"""Prompt-cache replay: how much of each governed request repeats the previous one, and how much
of the budget it uses, for the default (``cache_stable: auto``) and each mode.

    python bench/cache.py            # or: make bench (a few minutes; two processes)
    python bench/cache.py --quick    # fewer rounds, one seed, two windows (the test suite's smoke run)
    python bench/cache.py --windows 40000,48000,56000   # other windows (auto threshold)

An agent loop resends its whole history every turn, and providers bill the longest prefix a
request shares with a recent one at a fraction of the price (Anthropic 10 %, OpenAI 10-50 %).
This replays long single-task coding-agent loops (bench/sessions.py: real file contents, one to
three tool calls a round, about 2.2 messages a round) turn by turn, governs every request for GLM
(``zai/glm-4.6``, strict profile) at several context windows, and compares Nanobot's rules
applied to each request ("literal"), ``cache_stable``, and the default ("auto": the mode
`GovernanceConfig.stable_for` picks for the window, measured, not copied). Each window replays
enough rounds to spend most turns with a history that no longer fits (230 rounds at 24k, up to
1,000 at 128k, where the compacted history only outgrows the budget after about 600).

Columns (means over every turn of every session, except where said):

* reuse: share of the previous governed request (tool schemas + messages, in tokens) that the
  next one repeats identically at its start. min: the worst turn.
* over: turns over budget (must be 0).
* task: share of turns whose request still holds the task (the first user message).
* cut from: turn of the first cut (mean over the sessions): from there on the history no longer
  fits the budget and the mode decides how much of it to send.
* use: tokens sent / budget (both as the plugin estimates them for the provider), over the turns
  from the first cut on. Before it the whole conversation is sent and use only says how long it
  is; after it, use is how much of the room the mode gives the model.
* reuse cut: reuse over the same turns (reuse over all turns counts the easy turns before the
  first cut too).
* last10: of the 10 most recent tool results of at least 500 characters, how many reach the
  model whole (not compacted, not snipped): the context an agent uses most.
* rounds: tool rounds visible (whole or compacted) in the request.
* sent: tokens sent per turn.
* billed: tokens billed per turn, counting the repeated prefix at 10 % (Anthropic's cache-read
  price; OpenAI discounts 50-90 %).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sessions import make_tools, replay
from litellm_governance import GovernanceConfig, govern
from litellm_governance._calls import is_stub
from litellm_governance._tokens import TokenCache, TokenCounter

MODEL = "zai/glm-4.6"
CACHED_PRICE = 0.10
SEEDS = (0, 1, 2)
#: Tool rounds replayed per window: enough for most turns to come after the first cut.
ROUNDS = {24_000: 230, 32_000: 300, 64_000: 600, 128_000: 1_000}
MODES = ("default", "literal", "cache_stable")


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
    last10: int
    rounds: int
    stable: bool  # governed with cache_stable


@dataclass
class Row:
    window: int
    mode: str
    reuse: float
    worst: float
    over: int
    task: float
    first_cut: float | None
    use: float | None
    reuse_cut: float | None
    last10: float
    rounds: float
    sent: float
    billed: float


def config_for(window: int, mode: str) -> GovernanceConfig:
    if mode == "default":
        return GovernanceConfig(context_window_tokens=window)
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
        tool_ids = {m.get("tool_call_id") for m in sent if m.get("role") == "tool"}
        whole = tool_ids - {m.get("tool_call_id") for m in sent if m.get("role") == "tool" and _is_stub(m)}
        recent = [m for m in request if m.get("role") == "tool" and len(str(m.get("content"))) >= 500][-10:]
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
                last10=sum(1 for m in recent if m.get("tool_call_id") in whole),
                rounds=sum(1 for m in sent if m.get("tool_calls")),
                stable=report.cache_stable,
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


def _is_stub(message: dict[str, object]) -> bool:
    return is_stub(message.get("content"))


def after_first_cut(turns: Sequence[Turn]) -> list[Turn]:
    """The turns from the first one whose request was cut."""
    first = next((i for i, t in enumerate(turns) if t.cut), len(turns))
    return list(turns[first:])


def summarize(window: int, mode: str, sessions: Sequence[Sequence[Turn]]) -> Row:
    mean = statistics.fmean
    turns = [t for s in sessions for t in s]
    cut = [t for s in sessions for t in after_first_cut(s)]
    firsts = [len(s) - len(after_first_cut(s)) + 1 for s in sessions if after_first_cut(s)]
    reuse = [t.reuse for t in turns if t.reuse is not None]
    reuse_cut = [t.reuse for t in cut if t.reuse is not None]
    return Row(
        window=window,
        mode=mode,
        reuse=mean(reuse),
        worst=min(reuse),
        over=sum(t.over for t in turns),
        task=mean(t.task for t in turns),
        first_cut=mean(firsts) if firsts else None,
        use=mean(t.use for t in cut) if cut else None,
        reuse_cut=mean(reuse_cut) if reuse_cut else None,
        last10=mean(t.last10 for t in turns),
        rounds=mean(t.rounds for t in turns),
        sent=mean(t.sent for t in turns),
        billed=mean(t.billed for t in turns if t.billed is not None),
    )


def _job(args: tuple[int, str, int, int]) -> tuple[int, str, list[Turn]]:
    window, mode, seed, rounds = args
    counter = TokenCounter("cl100k_base", TokenCache(1_000_000))
    return window, mode, replay_session(config_for(window, mode), seed, rounds, counter)


def measure(
    windows: Sequence[int], modes: Sequence[str], seeds: Sequence[int], rounds: int | None = None, processes: int = 2
) -> list[Row]:
    """Replay every (window, mode, seed), in `processes` worker processes, and summarize."""
    jobs = [(w, m, s, rounds or rounds_for(w)) for w in windows for m in modes for s in seeds]
    jobs.sort(key=lambda job: -job[0] * job[3])  # longest first
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.map(_job, jobs, chunksize=1)
    else:
        results = [_job(job) for job in jobs]
    sessions: dict[tuple[int, str], list[list[Turn]]] = {}
    for window, mode, turns in results:
        sessions.setdefault((window, mode), []).append(turns)
    rows = []
    for window in windows:
        for mode in modes:
            label = mode
            if mode == "default":
                stable = {t.stable for s in sessions[window, mode] for t in s}
                label = "auto = " + (
                    "cache_stable" if stable == {True} else "literal" if stable == {False} else "mixed"
                )
            rows.append(summarize(window, label, sessions[window, mode]))
    return rows


def table(rows: list[Row]) -> str:
    def share(value: float | None, digits: int = 2) -> str:
        return "n/a" if value is None else f"{value:.{digits}f}"

    lines = [
        "| window | mode | reuse | min | over | task | cut from | use | reuse cut | last10 | rounds | sent | billed |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        first = "n/a" if r.first_cut is None else f"{r.first_cut:.0f}"
        lines.append(
            f"| {r.window // 1000}k | {r.mode} | {r.reuse:.3f} | {r.worst:.2f} | {r.over} | {r.task:.0%} | {first} | "
            f"{share(r.use)} | {share(r.reuse_cut, 3)} | {r.last10:.1f} | {r.rounds:.1f} | {r.sent:,.0f} | "
            f"{r.billed:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 rounds, one seed, 16k and 24k, both modes")
    parser.add_argument("--windows", help="comma-separated context windows (default: 24k, 32k, 64k, 128k)")
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="sessions per window and mode (default 3)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args(argv)
    seeds: tuple[int, ...] = tuple(range(args.seeds))
    rounds: int | None = None
    windows: tuple[int, ...] = tuple(ROUNDS)
    modes: tuple[str, ...] = MODES
    if args.quick:
        rounds, seeds, windows, modes = 60, (0,), (16_000, 24_000), ("literal", "cache_stable")
    if args.windows:
        windows = tuple(int(w) for w in args.windows.split(","))
    started = time.perf_counter()
    rows = measure(windows, modes, seeds, rounds, processes=1 if args.quick else args.processes)
    plan = str(rounds) if rounds else ", ".join(f"{w // 1000}k: {rounds_for(w)}" for w in windows)
    print(f"Prompt-cache replay: {len(seeds)} sessions per window and mode ({plan} tool rounds), {MODEL}")
    command = "python bench/cache.py" + (" --quick" if args.quick else "")
    command += f" --windows {args.windows}" if args.windows else ""
    print(f"command: {command}\n")
    print(table(rows))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
