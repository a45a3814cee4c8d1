"""What the plugin's per-process caches hold when full: the most memory they can take.

    python bench/memory.py

Each cache is filled to its bound with entries like an agent loop's (tracemalloc, in this process):
the token cache (``token_cache_size`` entries, default 65,536: message and text keys to counts), the
per-result stores (a result's size for its stub, whether it reports a failure: `_calls._SIZES_KEPT`
entries each, keyed by the text's length and hash, never the text) and the call-name caches (what a stub
says of a call, and the shortened texts it shows, keyed by a hash of the call or the text: 8,192 entries
each), filled with calls shaped like `bench.sessions`' (edits, file writes, reads, searches, commands),
each made unique, and the conversation store (``conversation_cache_size`` messages, default 32,768:
each recent conversation's counts and steps' walks, `litellm_governance._conversations`), filled with
400-message sessions as chat, Claude Code and Codex send them: at a 1M window, and at a 32k one, where
each request cuts and the store keeps the note's lines of the cut units too. A proxy's memory grows while these fill
and stops there: `bench/load.py --rounds 3` shows it on a real proxy.

    python bench/memory.py --rounds 3

instead governs, in this process, rounds of `bench/load.py`'s fresh sessions (48 a round, 6 requests
each from 300 messages, half chat to GLM, half Claude Code's to Claude, 32k windows) and prints how many
entries each cache holds after each round, how fast each fills towards its bound, and what the
process holds then (after a collection): its resident memory, and the memory blocks Python has
allocated (`sys.getallocatedblocks`: what goes on growing once the objects the collector tracks stop,
as strings and numbers do). Where those level off, in seconds a round rather than `bench/load.py`'s
minutes, is where the plugin's share of a proxy's memory does.
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
import tracemalloc
from collections.abc import Callable, Sequence

from litellm_governance import GovernanceConfig, _calls
from litellm_governance._tokens import TokenCache

CALL_CACHE = _calls._CALLS_KEPT  # the bound of `_calls`' call names and shortened texts


def traced(fill: Callable[[], object]) -> float:
    """MiB still allocated after `fill()` (what it keeps)."""
    gc.collect()
    before, _ = tracemalloc.get_traced_memory()
    kept = fill()
    gc.collect()
    after, _ = tracemalloc.get_traced_memory()
    del kept
    return (after - before) / 2**20


def fill_token_cache(size: int) -> TokenCache:
    cache = TokenCache(size)
    for i in range(size - 1):  # one short of the bound: the generations have not turned over
        cache.put(hash(("o200k_base", 3 + i % 4_000, hash(f"message {i}"))), 40 + i % 5_000)  # the counter's keys
    return cache


def fill_result_stores(entries: int) -> None:
    for i in range(entries - 1):
        text = f"{i} tests/test_module.py::test_case PASSED\n" * 50  # a 2-3k character result
        _calls.describe_size(text)
        _calls.looks_like_error({"role": "tool", "content": text})


def agent_calls() -> list[dict[str, str]]:
    """The calls of a `bench.sessions` session (made before tracing: the generator keeps caches of its own)."""
    from bench.sessions import make_session

    return [call["function"] for message in make_session(400) for call in message.get("tool_calls") or ()]


def fill_call_caches(entries: int, shapes: list[dict[str, str]]) -> None:
    for i in range(entries - 1):
        function = shapes[i % len(shapes)]
        arguments = json.loads(function["arguments"])
        first = next(iter(arguments))  # made unique: the first argument (a path, a pattern, a command)
        arguments[first] = f"{arguments[first]} {i}"
        call = {"name": function["name"], "arguments": json.dumps(arguments)}
        _calls.call_info({"id": f"c{i}", "type": "function", "function": call})


def conversation_bodies(size: int, config: GovernanceConfig) -> list[str]:
    """Enough distinct 400-message sessions to fill a conversation store of `size` messages, dressed
    as chat, Claude Code and Codex requests in turn, as JSON (made before tracing). Each is its own
    conversation (its first user message differs), and each was governed once with no store, so what
    tracing then sees is the store's own growth."""
    from bench.agent_shapes import to_claude_code, to_codex
    from bench.sessions import make_session, make_tools
    from litellm_governance import govern_request

    base = make_session(400, seed=0)
    shapes = (
        lambda s: {"model": "openai/gpt-4o", "messages": s, "tools": make_tools()},
        lambda s: {"model": "anthropic/claude-sonnet-4-5", "max_tokens": 4096, **to_claude_code(s)},
        lambda s: {"model": "openai/gpt-4o", **to_codex(s)},
    )
    bodies = []
    for i in range(size // 300 + 6):
        session = [base[0], {**base[1], "content": f"{base[1]['content']} (session {i})"}, *base[2:]]
        bodies.append(json.dumps(shapes[i % 3](session)))
        govern_request(json.loads(bodies[-1]), config=config.replace(conversation_cache_size=0))
    return bodies


#: Conversations the window holds whole (counts and walks), and ones it cuts (the note's lines too).
CONVERSATION_CONFIG = GovernanceConfig(context_window_tokens=1_000_000)
CUT_CONFIG = GovernanceConfig(context_window_tokens=32_768)


def fill_conversations(size: int, bodies: list[str], config: GovernanceConfig) -> object:
    from litellm_governance import govern_request
    from litellm_governance._conversations import conversations

    store = conversations(size)
    store.clear()
    for body in bodies:
        govern_request(json.loads(body), config=config.replace(conversation_cache_size=size))
    return store


def fill_rate(rounds: int, *, sessions: int) -> int:
    """Entries per cache after each round of fresh sessions governed here (see the module docstring)."""
    from bench.load import WINDOW, Plan, resident_kib
    from litellm_governance import govern_request
    from litellm_governance._conversations import conversations
    from litellm_governance._pipeline import token_cache

    models = {"glm": "zai/glm-4.6", "claude": "anthropic/claude-sonnet-4-5-20250929"}
    plan = Plan(sessions, 1, 6, 300)
    print(
        f"# Cache entries after each round of {sessions} fresh sessions (`python bench/memory.py --rounds {rounds}`)\n"
    )
    print(
        "| after round | token cache | per-result stores (size, failure) | call-name caches "
        "| conversations (messages) | resident memory | allocated blocks |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    store = conversations(GovernanceConfig().conversation_cache_size)
    for number in range(rounds):
        for requests in plan.requests(10_000 * number):
            for _, raw in requests:
                body = json.loads(raw)
                govern_request(body, model=models[body["model"]], model_info={"max_input_tokens": WINDOW})
        calls = len(_calls._CALLS)
        gc.collect()
        print(
            f"| {number + 1} | {len(token_cache()):,} | {len(_calls._SIZES):,}, {len(_calls._FAILURES):,} | {calls:,} "
            f"| {store.messages:,} | {resident(resident_kib())} | {sys.getallocatedblocks():,} |"
        )
    return 0


def resident(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each bound (a smoke run)")
    parser.add_argument("--rounds", type=int, default=0, help="govern rounds of bench/load.py's sessions instead")
    args = parser.parse_args(argv)
    if args.rounds:
        return fill_rate(args.rounds, sessions=2 if args.quick else 48)
    share = 10 if args.quick else 1
    token_entries = GovernanceConfig().token_cache_size // share
    store_entries = _calls._SIZES_KEPT // share
    call_entries = CALL_CACHE // share
    conversation_messages = GovernanceConfig().conversation_cache_size // share
    shapes = agent_calls()
    tracemalloc.start()
    rows = [
        ("token cache", f"{token_entries:,}", traced(lambda: fill_token_cache(token_entries))),
        (
            "per-result stores (size, failure)",
            f"2 x {store_entries:,}",
            traced(lambda: fill_result_stores(store_entries)),
        ),
        ("call-name caches", f"2 x {call_entries:,}", traced(lambda: fill_call_caches(call_entries, shapes))),
    ]
    from litellm_governance._conversations import conversations

    stores = []
    for label, config in (("whole at 1M", CONVERSATION_CONFIG), ("cut at 32k", CUT_CONFIG)):
        bodies = conversation_bodies(conversation_messages, config)  # (after the rows above: it fills their caches too)
        conversations(conversation_messages).clear()  # (the row before filled it)
        stores.append(
            (
                f"conversations, {label} (messages kept)",
                f"{conversation_messages:,}",
                traced(lambda b=bodies, c=config: fill_conversations(conversation_messages, b, c)),  # type: ignore[misc]
            )
        )
    tracemalloc.stop()
    print(f"# The plugin's caches when full (`python bench/memory.py{' --quick' if args.quick else ''}`)\n")
    print("| cache | entries | memory |")
    print("|---|---:|---:|")
    for name, entries, mib in rows + stores:
        print(f"| {name} | {entries} | {mib:.1f} MiB |")
    most = sum(mib for _, _, mib in rows) + max(mib for _, _, mib in stores)
    print(f"| all (the larger conversation row) | | {most:.1f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
