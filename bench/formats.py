"""Benchmark: governing each request format — chat, Anthropic Messages (Claude Code), Responses
(Codex) — against one tiktoken pass over the same text, cold and warm.

Run ``python bench/formats.py`` from the repository root (400 messages; ``--sizes 100,400,1600``
for more, ``--quick`` for a smoke run). For each
format, on the same realistic sessions (`bench.sessions`, dressed by `bench.agent_shapes`) for
``openai/gpt-4o`` (o200k_base), with the request's tool schemas:

* **tiktoken pass**: one ``encode_ordinary`` over every string governance counts in the request
  (message text, tool-call names, ids and arguments, thinking, reasoning items, tool schemas);
* **cold**: `govern_request` on the body with the token cache emptied (the encoding stays loaded);
* **warm**: the session plus one new tool round, re-parsed from JSON (new objects, as the proxy
  gets them), right after the session itself was governed: what an agent loop sends next.

Target (the simplification issue): a cold pass within 2x the tiktoken pass. Medians of interleaved
repetitions (`bench.speed`): on a shared machine the ratios are what to read.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from bench import speed
from bench.agent_shapes import to_claude_code, to_codex
from bench.sessions import make_session, make_tools, next_round
from litellm_governance import GovernanceConfig, detect_format, govern_request
from litellm_governance._formats import spec
from litellm_governance._tokens import _json, _message_pieces, token_cache

MODEL = "openai/gpt-4o"
CONFIG = GovernanceConfig(context_window_tokens=1_000_000)  # measure counting and repairs, not cutting
TARGET_COLD_OVER_PASS = 2.0

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
    texts: list[str] = []
    for message in spec(detect_format(body)).read(body).outline.view:
        _message_pieces(message, texts)
    if body.get("tools"):
        texts.append(_json(body["tools"]))
    return texts


def measures(fmt: str, n: int) -> tuple[dict[str, speed.Measure], int]:
    """The tiktoken pass, cold and warm for `fmt` at `n` messages; and the tokens counted."""
    session = make_session(n, seed=0)
    body, after = FORMATS[fmt](session), FORMATS[fmt](next_round(session, seed=0))
    cache = token_cache(CONFIG.token_cache_size)
    floor, tokens = speed.tiktoken_pass(MODEL, strings(body))

    def cold_setup() -> Body:
        cache.clear()
        return body

    def warm_setup() -> Body:
        cache.clear()
        govern_request(body, config=CONFIG)
        return json.loads(json.dumps(after))

    def run(request: Body) -> object:
        return govern_request(request, config=CONFIG)

    return {
        "tiktoken": floor,
        "cold": speed.Measure(fn=run, setup=cold_setup),
        "warm": speed.Measure(fn=run, setup=warm_setup),
    }, tokens


def results(*, sizes: Sequence[int] = (400,), reps: int = 9) -> list[dict[str, Any]]:
    """One row per format and size: medians in ms, and the ratios the target reads."""
    found: dict[tuple[str, int, str], speed.Measure] = {}
    tokens: dict[tuple[str, int], int] = {}
    for fmt in FORMATS:
        for n in sizes:
            each, tokens[(fmt, n)] = measures(fmt, n)
            found.update({(fmt, n, name): measure for name, measure in each.items()})
    med = {key: speed.median(values) for key, values in speed.interleave(found, reps=reps).items()}
    rows = []
    for fmt in FORMATS:
        for n in sizes:
            floor, cold, warm = (med[(fmt, n, k)] for k in ("tiktoken", "cold", "warm"))
            rows.append(
                {
                    "format": fmt,
                    "messages": n,
                    "tokens": tokens[(fmt, n)],
                    "tiktoken_ms": round(floor * 1e3, 2),
                    "cold_ms": round(cold * 1e3, 2),
                    "warm_ms": round(warm * 1e3, 2),
                    "cold_over_pass": round(cold / floor, 2),
                    "warm_over_cold": round(warm / cold, 3),
                }
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 and 400 messages, 3 repetitions")
    parser.add_argument("--sizes", help="comma-separated session lengths in messages (default 400)")
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args(argv)
    sizes: tuple[int, ...] = (100, 400) if args.quick else (400,)
    if args.sizes:
        sizes = tuple(int(size) for size in args.sizes.split(","))
    reps = args.reps or (3 if args.quick else 9)
    print(f"# govern_request per format ({MODEL}, medians of {reps}, interleaved)\n")
    print("| format | messages | tokens | tiktoken pass | cold | warm | cold / pass | warm / cold |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in results(sizes=sizes, reps=reps):
        print(
            f"| {row['format']} | {row['messages']:,} | {row['tokens']:,} | {row['tiktoken_ms']:.2f} ms | "
            f"{row['cold_ms']:.2f} ms | {row['warm_ms']:.2f} ms | {row['cold_over_pass']:.2f} | "
            f"{row['warm_over_cold']:.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
