"""Action recall: how much of what the agent did is still recognisable in each governed request.

    python bench/recall.py            # six replayed coding-agent loops at a 32k window (about 2 minutes)
    python bench/recall.py --quick    # two loops, fewer rounds (the test suite's smoke run)
    python bench/recall.py --windows 24000,32000,64000 --mode cache_stable

An agent that loses every trace of its earlier turns repeats them. This replays long single-task
coding-agent loops (bench/sessions.py: real file contents, one to three tool calls a round) turn
by turn, governs every request for GLM (``zai/glm-4.6``, strict profile) with the default config,
and measures, for each request from the first cut on:

* recall: the share of the client's tool calls in the request whose own trace reached the model:
  the call itself (kept, its result whole or stubbed — a stub names its call), or its line in the
  note for cut turns, naming its tool and main argument (command, path, pattern, query …);
* newest: whether the results the model is about to read reached it whole;
* over: requests over budget (must be 0);
* note: the note's size, in tokens and as a share of the budget.

For comparison, in the same run: the same requests governed without the note
(``note_cut_turns: false``), and "before": also with the stubs of earlier versions, which named
only the tool (``[Read result omitted from context]``).

The per-loop figures are the mean and the minimum over its requests. Targets (issue "Never take
away what the agent needs"): mean recall >= 0.9 and no loop below 0.7, every request within
budget, every newest result whole.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sessions import make_tools, replay
from litellm_governance import GovernanceConfig, _microcompact, govern
from litellm_governance._calls import call_info
from litellm_governance._tokens import TokenCache, TokenCounter
from litellm_governance._trace import NOTE_START

MODEL = "zai/glm-4.6"
SEEDS = (0, 1, 2, 3, 4, 5)
ROUNDS = 300
TARGET_MEAN, TARGET_MIN = 0.9, 0.7


@dataclass
class Request:
    """One governed request of a replayed loop."""

    recall: float
    #: The same request governed with ``note_cut_turns: false`` (cut turns leave no trace).
    recall_without_note: float
    #: ... and with the stubs of earlier versions (``[Read result omitted from context]``): before.
    recall_before: float
    calls: int
    newest_whole: bool
    over: bool
    note_tokens: int
    budget: int


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


@contextlib.contextmanager
def _stubs_of_earlier_versions() -> Iterator[None]:
    """Stubs that name only the tool, as before this version (for the baseline column)."""
    saved = _microcompact.stub_text
    _microcompact.stub_text = lambda name, call, size, reason="": f"[{name} result omitted from context]"
    try:
        yield
    finally:
        _microcompact.stub_text = saved


def _note_texts(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The text of each message holding a note for cut turns (alone, or merged into the task)."""
    return [t for m in messages if m.get("role") == "user" for t in _texts(m.get("content")) if NOTE_START in t]


def recognisable(request: Sequence[dict[str, Any]], governed: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(calls of `request` still recognisable in `governed`, calls in `request`). A call is
    recognisable when its own trace reached the model: the call itself (kept whole or with its
    result stubbed: the stub names it too), or its line in the note for cut turns — its tool name
    and main argument, as stubs and notes print them (``Read(file_path="src/app.py")``)."""
    kept = {c.get("id") for m in governed for c in (m.get("tool_calls") or ())}
    notes = "\n".join(_note_texts(governed))
    total = found = 0
    for message in request:
        for call in message.get("tool_calls") or ():
            info = call_info(call)
            if info is None:
                continue
            total += 1
            if call.get("id") in kept or (notes and f"- {info.describe()} → " in notes):
                found += 1
    return found, total


def newest_whole(request: Sequence[dict[str, Any]], governed: Sequence[dict[str, Any]]) -> bool:
    """Whether every result after the request's last assistant turn reached the model unchanged."""
    last = max(i for i, m in enumerate(request) if m.get("role") == "assistant")
    newest = [m.get("content") for m in request[last + 1 :] if m.get("role") == "tool"]
    sent = [m.get("content") for m in governed if m.get("role") == "tool"]
    return all(content in sent for content in newest)


def replay_loop(seed: int, rounds: int, window: int, mode: str) -> list[Request]:
    config = GovernanceConfig(context_window_tokens=window)
    if mode != "default":
        config = config.replace(cache_stable=mode == "cache_stable")
    tools = make_tools()
    counter = TokenCounter("cl100k_base", TokenCache(100_000))
    out: list[Request] = []
    cut_seen = False
    for request in replay(rounds, seed=seed):
        if len(request) < 3:
            continue
        result = govern(request, model=MODEL, tools=tools, config=config)
        report = result.report
        cut_seen = cut_seen or bool(report.steps.get("snipped"))
        if not cut_seen:
            continue
        found, total = recognisable(request, result.messages)
        bare = govern(request, model=MODEL, tools=tools, config=config.replace(note_cut_turns=False))
        found_bare, _ = recognisable(request, bare.messages)
        with _stubs_of_earlier_versions():
            before = govern(request, model=MODEL, tools=tools, config=config.replace(note_cut_turns=False))
        found_before, _ = recognisable(request, before.messages)
        note = sum(counter.text(text[text.index(NOTE_START) :]) for text in _note_texts(result.messages))
        out.append(
            Request(
                recall=found / total if total else 1.0,
                recall_without_note=found_bare / total if total else 1.0,
                recall_before=found_before / total if total else 1.0,
                calls=total,
                newest_whole=newest_whole(request, result.messages),
                over=report.over_budget,
                note_tokens=note,
                budget=report.budget or 0,
            )
        )
    return out


def _job(args: tuple[int, int, int, str]) -> tuple[int, int, str, list[Request]]:
    seed, rounds, window, mode = args
    return seed, window, mode, replay_loop(seed, rounds, window, mode)


def measure(
    seeds: Sequence[int], rounds: int, windows: Sequence[int], mode: str, processes: int = 2
) -> dict[tuple[int, int], list[Request]]:
    jobs = [(seed, rounds, window, mode) for window in windows for seed in seeds]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            results = pool.map(_job, jobs, chunksize=1)
    else:
        results = [_job(job) for job in jobs]
    return {(window, seed): requests for seed, window, _, requests in results}


def table(results: dict[tuple[int, int], list[Request]]) -> str:
    lines = [
        "| window | loop | requests | calls | recall mean | recall min | without note | before | newest whole "
        "| over | note tokens | note / budget |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (window, seed), requests in sorted(results.items()):
        if not requests:
            lines.append(f"| {window // 1000}k | {seed} | 0 | — | — | — | — | — | — | — | — | — |")
            continue
        recall = [r.recall for r in requests]
        notes = [r.note_tokens for r in requests]
        share = max(r.note_tokens / r.budget for r in requests if r.budget)
        lines.append(
            f"| {window // 1000}k | {seed} | {len(requests)} | {statistics.fmean(r.calls for r in requests):.0f} | "
            f"{statistics.fmean(recall):.3f} | {min(recall):.3f} | "
            f"{statistics.fmean(r.recall_without_note for r in requests):.3f} | "
            f"{statistics.fmean(r.recall_before for r in requests):.3f} | "
            f"{sum(r.newest_whole for r in requests)}/{len(requests)} | {sum(r.over for r in requests)} | "
            f"{statistics.median(notes):,.0f} (max {max(notes):,}) | {share:.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two loops of 150 rounds")
    parser.add_argument("--windows", default="32000", help="comma-separated context windows (default 32000)")
    parser.add_argument("--mode", choices=("default", "literal", "cache_stable"), default="default")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    seeds = SEEDS[:2] if args.quick else SEEDS
    rounds = 150 if args.quick else ROUNDS
    windows = [int(w) for w in args.windows.split(",")]
    results = measure(seeds, rounds, windows, args.mode, args.processes)
    print(table(results))
    every = [r for requests in results.values() for r in requests]
    means = [statistics.fmean(r.recall for r in requests) for requests in results.values() if requests]
    print()
    print(
        f"recall: mean {statistics.fmean(r.recall for r in every):.3f} over {len(every)} requests; "
        f"loop means {min(means):.3f}-{max(means):.3f}; lowest request {min(r.recall for r in every):.3f} "
        f"(targets: mean >= {TARGET_MEAN}, no loop below {TARGET_MIN}); "
        f"over budget {sum(r.over for r in every)}; newest whole {sum(r.newest_whole for r in every)}/{len(every)}; "
        f"without the note: mean {statistics.fmean(r.recall_without_note for r in every):.3f}; "
        f"before (tool-only stubs, no note): mean {statistics.fmean(r.recall_before for r in every):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
