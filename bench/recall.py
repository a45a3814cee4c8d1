"""Action recall: how much of what the agent did is still recognisable in each governed request.

    python bench/recall.py            # three long multi-task conversations at 32k (make bench runs it)
    python bench/recall.py --single   # six single-task coding-agent loops instead
    python bench/recall.py --quick    # two conversations, shorter (a smoke run)

An agent that loses every trace of its earlier turns repeats them. This replays long agent
conversations (bench/sessions.py: real file contents, one to three tool calls a round) turn by
turn, governs every request for GLM (``zai/glm-4.6``, strict profile) at a 32k window with the
default config, and measures, for each request from the first cut on:

* recall: the share of the client's tool calls in the request whose trace reached the model: the
  call itself (kept, its result whole or stubbed — a stub names its call), or its tool and main
  argument, as stubs and notes print them (``read_file(path="src/app.py")``), in the note for cut
  turns;
* over: requests over budget (must be 0); newest: whether the results the model is about to read
  reached it whole; note: the note's size, as a share of the budget.

By default the conversations chain several tasks (`bench.sessions.replay_tasks`: twelve tasks of 18
tool rounds, about 480 messages at the end); ``--single`` replays single-task loops
(`bench.sessions.replay`, 300 rounds). Baseline, in the same run: the same requests governed
without the note (``note_cut_turns: false``). Targets (issue #51): mean recall at least 0.85 and
no conversation's mean below 0.6.
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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bench.sessions import make_tools, replay, replay_tasks, session_tokens
from litellm_governance import GovernanceConfig, govern
from litellm_governance._calls import call_info

MODEL = "zai/glm-4.6"
WINDOW = 32_000
SEEDS = (0, 1, 2, 3, 4, 5)
ROUNDS = 300  # a single-task loop's
TASKS, TASK_ROUNDS = 12, 18  # a multi-task conversation's
CONVERSATIONS = 3  # multi-task conversations replayed (seeds)
TARGET_MEAN, TARGET_MIN = 0.85, 0.6


@dataclass(frozen=True)
class Request:
    """One governed request of a replayed conversation."""

    recall: float
    #: The same request governed with ``note_cut_turns: false`` (cut turns leave no trace).
    recall_without_note: float
    calls: int
    newest_whole: bool
    over: bool
    note_share: float  # the note's tokens over the budget


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]


def notes(request: Sequence[dict[str, Any]], governed: Sequence[dict[str, Any]]) -> list[str]:
    """What governing added to the user turns of `request`: a user message of its own (a note for
    cut turns), or text after a user turn's own (a note merged into it, as strict profiles want)."""
    sent = [t for m in request if m.get("role") == "user" for t in _texts(m.get("content"))]
    added = []
    for message in governed:
        if message.get("role") != "user":
            continue
        for text in _texts(message.get("content")):
            own = max((t for t in sent if text.startswith(t)), key=len, default="")
            if text[len(own) :].strip():
                added.append(text[len(own) :])
    return added


def recognisable(request: Sequence[dict[str, Any]], governed: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(calls of `request` whose trace reached `governed`, calls in `request`)."""
    kept = {c.get("id") for m in governed for c in (m.get("tool_calls") or ())}
    noted = "\n".join(notes(request, governed))
    total = found = 0
    for message in request:
        for call in message.get("tool_calls") or ():
            info = call_info(call)
            if info is None:
                continue
            total += 1
            if call.get("id") in kept or (noted and info.describe() in noted):
                found += 1
    return found, total


def newest_whole(request: Sequence[dict[str, Any]], governed: Sequence[dict[str, Any]]) -> bool:
    """Whether every result after the request's last assistant turn reached the model unchanged."""
    last = max(i for i, m in enumerate(request) if m.get("role") == "assistant")
    newest = [m.get("content") for m in request[last + 1 :] if m.get("role") == "tool"]
    sent = [m.get("content") for m in governed if m.get("role") == "tool"]
    return all(content in sent for content in newest)


def conversation(seed: int, *, single: bool, rounds: int) -> Iterator[list[dict[str, Any]]]:
    """Each turn's request of conversation `seed`: a single-task loop of `rounds` rounds, or
    `TASKS` tasks of `rounds` rounds each."""
    return replay(rounds, seed=seed) if single else replay_tasks(TASKS, rounds, seed=seed)


def replay_conversation(seed: int, rounds: int, *, single: bool = False) -> list[Request]:
    """The requests of conversation `seed` from its first cut on, each governed with and without the note."""
    config = GovernanceConfig(context_window_tokens=WINDOW)
    bare_config = config.replace(note_cut_turns=False)
    tools = make_tools()
    out: list[Request] = []
    cut_seen = False
    for request in conversation(seed, single=single, rounds=rounds):
        if len(request) < 3:
            continue
        result = govern(request, model=MODEL, tools=tools, config=config)
        report = result.report
        cut_seen = cut_seen or bool(report.steps.get("snipped"))
        if not cut_seen:
            continue
        found, total = recognisable(request, result.messages)
        bare = govern(request, model=MODEL, tools=tools, config=bare_config)
        found_bare, _ = recognisable(request, bare.messages)
        note = sum(session_tokens([{"role": "user", "content": text}]) for text in notes(request, result.messages))
        out.append(
            Request(
                recall=found / total if total else 1.0,
                recall_without_note=found_bare / total if total else 1.0,
                calls=total,
                newest_whole=newest_whole(request, result.messages),
                over=report.over_budget,
                note_share=note / report.budget if report.budget else 0.0,
            )
        )
    return out


def _job(args: tuple[int, int, bool]) -> tuple[int, list[Request]]:
    seed, rounds, single = args
    return seed, replay_conversation(seed, rounds, single=single)


def measure(seeds: Sequence[int], rounds: int, *, single: bool = False, processes: int = 2) -> dict[int, list[Request]]:
    """Every conversation's requests from its first cut on, by seed (in `processes` worker processes)."""
    jobs = [(seed, rounds, single) for seed in seeds]
    if processes > 1:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            found = pool.map(_job, jobs, chunksize=1)
    else:
        found = [_job(job) for job in jobs]
    return dict(found)


def summary(found: dict[int, list[Request]]) -> dict[str, Any]:
    """The figures the targets read, over every request and per conversation."""
    every = [r for requests in found.values() for r in requests]
    means = {seed: statistics.fmean(r.recall for r in requests) for seed, requests in found.items() if requests}
    return {
        "requests": len(every),
        "recall_mean": round(statistics.fmean(r.recall for r in every), 3),
        "recall_min_conversation": round(min(means.values()), 3),
        "recall_lowest_request": round(min(r.recall for r in every), 3),
        "without_note_mean": round(statistics.fmean(r.recall_without_note for r in every), 3),
        "over_budget": sum(r.over for r in every),
        "newest_whole": sum(r.newest_whole for r in every),
        "note_share_max": round(max(r.note_share for r in every), 3),
        "per_conversation": {str(seed): round(mean, 3) for seed, mean in means.items()},
    }


def table(found: dict[int, list[Request]]) -> str:
    lines = [
        "| conversation | requests | calls | recall mean | recall min | without note | newest whole | over "
        "| note / budget |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for seed, requests in sorted(found.items()):
        if not requests:
            lines.append(f"| {seed} | 0 | — | — | — | — | — | — | — |")
            continue
        recall = [r.recall for r in requests]
        lines.append(
            f"| {seed} | {len(requests)} | {statistics.fmean(r.calls for r in requests):.0f} | "
            f"{statistics.fmean(recall):.3f} | {min(recall):.3f} | "
            f"{statistics.fmean(r.recall_without_note for r in requests):.3f} | "
            f"{sum(r.newest_whole for r in requests)}/{len(requests)} | {sum(r.over for r in requests)} | "
            f"{max(r.note_share for r in requests):.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two conversations, fewer rounds")
    parser.add_argument("--single", action="store_true", help="single-task loops instead of multi-task conversations")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args(argv)
    seeds = SEEDS[:2] if args.quick else SEEDS if args.single else SEEDS[:CONVERSATIONS]
    rounds = (150 if args.single else 8) if args.quick else ROUNDS if args.single else TASK_ROUNDS
    found = measure(seeds, rounds, single=args.single, processes=args.processes)
    print(table(found))
    figures = summary(found)
    print(
        f"\nrecall: mean {figures['recall_mean']:.3f} over {figures['requests']} requests, lowest conversation "
        f"{figures['recall_min_conversation']:.3f} (targets: mean ≥ {TARGET_MEAN}, none below {TARGET_MIN}); "
        f"without the note: mean {figures['without_note_mean']:.3f}; over budget {figures['over_budget']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
