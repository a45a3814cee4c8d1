"""Benchmark: governing each request format — chat, Anthropic Messages (Claude Code), Responses
(Codex) — against the tiktoken floor, warm, and with 4x the history.

Run ``python bench/formats.py`` from the repository root (``--quick`` for a smoke run;
``--profile`` prints, instead, cProfile's hot spots of cold and warm per format at 400 messages;
``--phases`` prints where the time of a cold and a warm pass goes, stage by stage (`print_phases`);
``--proxy-heap`` times in a heap of a proxy's size, LiteLLM imported: `bench.speed.proxy_sized_heap`).
For each format, on the same realistic sessions (`bench.sessions`, dressed by `bench.agent_shapes`)
for ``openai/gpt-4o`` (o200k_base), with the request's tool schemas:

* **tiktoken pass**: one ``encode_ordinary`` over every string governance must count in the
  request (message text, tool-call names, ids and arguments, thinking, reasoning items, tool
  schemas), extracted beforehand: the floor for counting exactly, as the targets take it;
  **buffer pass**: the same strings counted as governance counts them, from tiktoken's buffer of
  ranks (no list of ints: a few per cent less), so that *cold / buffer pass* is what governance
  adds to its own tokenizing;
* **cold**: `govern_request` on the body with the token cache emptied (the encoding stays loaded);
* **warm**: the session plus one new tool round, re-parsed from JSON (new objects, as the proxy
  gets them), right after the session itself was governed: what an agent loop sends next;
* **4x**: cold and warm at 4x the messages over 1x (linear ≈ 4).

Targets (issue "Govern what Claude Code and Codex send"): cold within 1.2x the tiktoken pass,
warm within 0.1x cold, linear growth. Medians of interleaved repetitions (`bench.speed`): on a
shared machine the ratios are what to read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import gc
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench import speed
from bench.agent_shapes import to_claude_code, to_codex
from bench.sessions import make_session, make_tools, next_round
from litellm_governance import (
    GovernanceConfig,
    _anthropic,
    _conversations,
    _formats,
    _pipeline,
    _responses,
    _tokens,
    govern_request,
)
from litellm_governance._conversations import conversations
from litellm_governance._pipeline import token_cache
from litellm_governance._request import detect_format, read_request
from litellm_governance._tokens import _json, _message_pieces

MODEL = "openai/gpt-4o"
CONFIG = GovernanceConfig(context_window_tokens=1_000_000)  # measure counting and repairs, not cutting

Body = dict[str, Any]


def chat_body(session: list[dict[str, Any]]) -> Body:
    return {"model": MODEL, "messages": session, "tools": make_tools()}


def anthropic_body(session: list[dict[str, Any]]) -> Body:
    return {"model": MODEL, "max_tokens": 4096, **to_claude_code(session)}


def responses_body(session: list[dict[str, Any]]) -> Body:
    return {"model": MODEL, **to_codex(session)}


FORMATS: dict[str, Callable[[list[dict[str, Any]]], Body]] = {
    "chat": chat_body,
    "anthropic": anthropic_body,
    "responses": responses_body,
}


def strings(body: Body) -> list[str]:
    """Every string governance counts in `body` (as its counter sees them)."""
    outline, _ = read_request(body, detect_format(body))
    texts: list[str] = []  # (`_message_pieces` gives a structured value as its JSON)
    for message in outline.view:
        _message_pieces(message, texts)
    if body.get("tools"):
        texts.append(_json(body["tools"]))
    return texts


def measures(fmt: str, n: int) -> tuple[dict[str, speed.Measure], int]:
    session = make_session(n, seed=0)
    following = next_round(session, seed=0)
    body, after = FORMATS[fmt](session), FORMATS[fmt](following)
    cache = token_cache(CONFIG.token_cache_size)
    seen = conversations(CONFIG.conversation_cache_size)
    floor, tokens = speed.tiktoken_pass(MODEL, strings(body))

    def cold_setup() -> Body:
        cache.clear()
        seen.clear()
        return body

    def warm_setup() -> Body:
        cache.clear()
        seen.clear()
        govern_request(body, config=CONFIG)
        return json.loads(json.dumps(after))

    def run(request: Body) -> object:
        return govern_request(request, config=CONFIG)

    return {
        "tiktoken": floor,
        "buffer": speed.rank_buffer_pass(MODEL, strings(body)),
        "cold": speed.Measure(fn=run, setup=cold_setup),
        "warm": speed.Measure(fn=run, setup=warm_setup),
    }, tokens


def print_profiles(*, reps: int, n: int = 400, top: int = 12) -> int:
    """The functions taking the most own time, cold and warm, per format (cProfile; a ranking)."""
    for fmt in FORMATS:
        found, _ = measures(fmt, n)
        for name in ("cold", "warm"):
            rows = speed.profile(found[name], reps=reps, top=top)
            print(f"\n## {fmt}, {name}, {n} messages (cProfile, {reps} calls)\n")
            print("| function | calls / request | own | inclusive | own ms / request |")
            print("|---|---:|---:|---:|---:|")
            for row in rows:
                print(
                    f"| `{row['function']}` | {row['calls_per_request']:.0f} | {row['own_share']:.1%} | "
                    f"{row['inclusive_share']:.1%} | {row['own_ms_per_request']:.2f} |"
                )
    return 0


#: The stages `print_phases` times, in a pass's order: (label, [(owner, attribute)]), each looked up where
#: `_pipeline` (or the class) finds it.
PHASES: list[tuple[str, list[tuple[Any, str]]]] = [
    ("read", [(_formats.FormatSpec, "read")]),
    ("conversation check", [(_conversations.Conversations, "recall"), (_conversations.Recall, "leave")]),
    ("tokenizing", [(_tokens.TokenCounter, name) for name in ("message", "messages", "tools", "content")]),
    ("repairs", [(_pipeline, "_REPAIR")]),
    ("shrink", [(_pipeline, "shrink")]),
    ("truncation, roles", [(_pipeline, "_TRUNCATE"), (_pipeline, "_ROLES")]),
    (
        "render",
        [(cls, "render") for cls in (_formats.ChatOutline, _anthropic.AnthropicOutline, _responses.ResponsesOutline)],
    ),
]


@contextmanager
def timed_phases(spent: dict[str, float]) -> Iterator[None]:
    """Time each of `PHASES` while inside: add to ``spent[label]`` the time spent in its functions, less
    what another stage's functions took inside them (tokenizing inside the shrink is tokenizing), so
    that the stages add up to no more than the pass. Restores every function on leaving."""
    stack: list[float] = []

    def timed(function: Callable[..., Any], label: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            stack.append(0.0)
            try:
                return function(*args, **kwargs)
            finally:
                inner = stack.pop()
                elapsed = time.perf_counter() - start
                spent[label] = spent.get(label, 0.0) + elapsed - inner
                if stack:
                    stack[-1] += elapsed

        return run

    saved: list[tuple[Any, str, Any]] = []
    for label, places in PHASES:
        for owner, name in places:
            found = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            saved.append((owner, name, found))
            if isinstance(found, tuple):  # the repair steps, called in turn
                setattr(owner, name, tuple(timed(step, label) for step in found))
            else:
                setattr(owner, name, timed(found, label))
    try:
        yield
    finally:
        for owner, name, found in reversed(saved):
            setattr(owner, name, found)


def print_phases(*, reps: int, n: int = 400, heap: str = "") -> int:
    """Where a cold and a warm pass go (`timed_phases`), per format at `n` messages: medians of `reps`
    passes, each after a collection (as `bench.speed.interleave` times them: the CPU caches as cold as
    after a proxy's own work); "rest" is the pass less its stages (the budget, the ledger, the report).
    `heap`: the title's note on the heap (`bench.speed.proxy_heap_note`)."""
    labels = [label for label, _ in PHASES]
    print(f"# Where a pass goes, per stage ({MODEL}, {n} messages, medians of {reps}, in ms{heap})\n")
    print("| format | pass | " + " | ".join(labels) + " | rest |")
    print("|---|---:|" + "---:|" * len(labels) + "---:|")
    for fmt in FORMATS:
        found, _ = measures(fmt, n)
        for name in ("cold", "warm"):
            measure = found[name]
            rows: list[dict[str, float]] = []
            for _ in range(reps + 1):  # (the first: a warm-up, not kept)
                arg = measure.setup() if measure.setup is not None else None
                spent: dict[str, float] = {}
                gc.collect()
                with timed_phases(spent):
                    start = time.perf_counter()
                    measure.fn(arg)
                    spent["pass"] = time.perf_counter() - start
                spent["rest"] = spent["pass"] - sum(spent.get(label, 0.0) for label in labels)
                rows.append(spent)
            med = {key: speed.median([row.get(key, 0.0) for row in rows[1:]]) for key in ["pass", *labels, "rest"]}
            cells = " | ".join(f"{med[key] * 1e3:.2f}" for key in [*labels, "rest"])
            print(f"| {fmt} | {name} {med['pass'] * 1e3:.2f} | {cells} |")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--profile", action="store_true", help="cProfile cold and warm per format (400 messages)")
    parser.add_argument("--phases", action="store_true", help="where a cold and a warm pass go, stage by stage")
    parser.add_argument("--proxy-heap", action="store_true", help="time in a heap of a proxy's size (LiteLLM imported)")
    args = parser.parse_args(argv)
    if args.profile:
        return print_profiles(reps=args.reps or 20)
    if args.phases:
        return print_phases(reps=args.reps or (5 if args.quick else 40), heap=speed.proxy_heap_note(args.proxy_heap))
    sizes = (100, 400) if args.quick else (100, 400, 1600)
    reps = args.reps or (3 if args.quick else 9)
    all_measures: dict[tuple[str, int, str], speed.Measure] = {}
    tokens: dict[tuple[str, int], int] = {}
    for fmt in FORMATS:
        for n in sizes:
            found, tokens[(fmt, n)] = measures(fmt, n)
            for name, measure in found.items():
                all_measures[(fmt, n, name)] = measure
    heap = speed.proxy_heap_note(args.proxy_heap)
    timed = speed.interleave(all_measures, reps=reps)
    med = {key: speed.median(values) for key, values in timed.items()}
    print(f"# govern_request per format ({MODEL}, medians of {reps}, interleaved{heap})\n")
    print(
        "| format | messages | tokens | tiktoken pass | buffer pass | cold | warm | cold / pass "
        "| cold / buffer pass | warm / cold |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for fmt in FORMATS:
        for n in sizes:
            floor, buffer, cold, warm = (med[(fmt, n, k)] for k in ("tiktoken", "buffer", "cold", "warm"))
            print(
                f"| {fmt} | {n:,} | {tokens[(fmt, n)]:,} | {floor * 1e3:.2f} ms | {buffer * 1e3:.2f} ms | "
                f"{cold * 1e3:.2f} ms | {warm * 1e3:.2f} ms | {cold / floor:.2f} | {cold / buffer:.2f} | "
                f"{warm / cold:.3f} |"
            )
    if len(sizes) > 2:
        print("\n| format | cold 1,600 / 400 | warm 1,600 / 400 |")
        print("|---|---:|---:|")
        for fmt in FORMATS:
            cold = med[(fmt, 1600, "cold")] / med[(fmt, 400, "cold")]
            warm = med[(fmt, 1600, "warm")] / med[(fmt, 400, "warm")]
            print(f"| {fmt} | {cold:.2f} | {warm:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
