"""Before/after in one process: `govern_request` of an earlier commit against the working tree,
cold and warm per format, interleaved (`bench.speed.interleave`), so that a shared machine's load
falls on both alike.

    python bench/ab.py --against f6b7324            # 400 messages, 1M window
    python bench/ab.py --against f6b7324 --messages 1600 --window 32768
    python bench/ab.py --against f6b7324 --window 32768 --model zai/glm-4.6   # strict roles

The earlier commit's package is taken with ``git archive`` into a temporary folder and imported
under another name (``litellm_governance_before``); the workload and the tiktoken pass are those of
`bench.formats`. Reported per format: the pass, cold and warm before and after, cold / pass,
warm / cold, and warm after / before (of the medians, and of the fastest repetitions: on a loaded
machine the least disturbed run of each says more than a median).

    python bench/ab.py --against ceed9cf --check    # identical output, no timing

``--check`` times nothing: it asserts that both commits write the same request body (as JSON) and
the same report, per format, cold and warm, at windows of 1M, 128k, 32k and 16k tokens, and over a
few growing sessions, so that a speed-up cannot change a byte the provider's prompt cache reads.

    python bench/ab.py --against ceed9cf --check --fuzz 2000

``--fuzz N`` adds N generated requests (seeded, the same on every run) that the bench sessions rarely
hold: short tool loops reading the same few files with and without ranges (reads that supersede
others), failing calls, ``cache_control`` breakpoints on results and user turns, for GPT-4o, GLM
(strict roles) and Claude, as chat, Anthropic Messages and Responses bodies, at windows from 1,500
tokens (everything cut) to 1M, with and without ``cache_stable``, at several ``keep_recent``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import importlib
import io
import json
import random
import re
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import litellm_governance
from bench import formats, speed
from bench.sessions import make_session, next_round

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "litellm_governance_before"


def load_before(commit: str, folder: Path) -> ModuleType:
    """The package as it was at `commit`, importable as `BEFORE` (its own imports renamed)."""
    archive = subprocess.run(
        ["git", "archive", commit, "litellm_governance"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "litellm_governance").rename(folder / BEFORE)
    for path in (folder / BEFORE).rglob("*.py"):
        path.write_text(re.sub(r"\blitellm_governance\b", BEFORE, path.read_text()))
    sys.path.insert(0, str(folder))
    return importlib.import_module(BEFORE)


def caches(package: ModuleType, config: Any) -> Callable[[], None]:
    """What empties `package`'s process-wide caches (cold: nothing seen before): its token cache
    and, in a commit that had one, its store of conversations."""
    found = []
    for module, name, size in (
        ("_tokens", "token_cache", config.token_cache_size),
        ("_pipeline", "token_cache", config.token_cache_size),
        ("_conversations", "conversations", getattr(config, "conversation_cache_size", 0)),
    ):
        try:
            found.append(getattr(importlib.import_module(f"{package.__name__}.{module}"), name)(size))
        except (ModuleNotFoundError, AttributeError):  # a commit without it
            continue

    def clear() -> None:
        for cache in found:
            cache.clear()

    return clear


def measures(packages: dict[str, ModuleType], n: int, window: int, model: str) -> dict[tuple[str, str], Any]:
    found: dict[tuple[str, str], Any] = {}
    for fmt, make in formats.FORMATS.items():
        session = make_session(n, seed=0)
        body, after = make(session), make(next_round(session, seed=0))
        body, after = {**body, "model": model}, {**after, "model": model}
        found[(fmt, "pass")], _ = speed.tiktoken_pass(model, formats.strings(body))
        for name, package in packages.items():
            config = package.GovernanceConfig(context_window_tokens=window)
            cache = caches(package, config)

            def cold_setup(cache: Any = cache, body: Any = body) -> Any:
                cache()
                return body

            def warm_setup(
                cache: Any = cache, package: Any = package, config: Any = config, body: Any = body, after: Any = after
            ) -> Any:
                cache()
                package.govern_request(body, config=config)
                return json.loads(json.dumps(after))

            def run(request: Any, package: Any = package, config: Any = config) -> object:
                return package.govern_request(request, config=config)

            found[(fmt, f"{name} cold")] = speed.Measure(fn=run, setup=cold_setup)
            found[(fmt, f"{name} warm")] = speed.Measure(fn=run, setup=warm_setup)
    return found


CHECK_WINDOWS = (1_000_000, 128_000, 32_768, 16_384)


def check(packages: dict[str, ModuleType], n: int) -> int:
    """Assert the same governed body and report from every package, cold and warm (module doc)."""
    cases = 0
    for fmt, make in formats.FORMATS.items():
        for seed, size in ((0, n), (1, n // 2), (2, n // 8)):
            session = make_session(size, seed=seed)
            bodies = [make(session)]
            for step in range(3):  # the session growing round by round: warm requests
                session = next_round(session, seed=seed + step)
                bodies.append(make(session))
            for window in CHECK_WINDOWS:
                seen: dict[str, list[str]] = {}
                for name, package in packages.items():
                    config = package.GovernanceConfig(context_window_tokens=window)
                    caches(package, config)()
                    out = seen[name] = []
                    for body in bodies:
                        governed = package.govern_request(json.loads(json.dumps(body)), config=config)
                        out.append(json.dumps([governed.request, governed.report.to_dict()], default=repr))
                first, *others = seen.values()
                for name, other in zip(list(seen)[1:], others, strict=True):
                    for i, (a, b) in enumerate(zip(first, other, strict=True)):
                        where = f"{fmt}, seed {seed}, {size} messages, window {window}, request {i}"
                        assert a == b, f"{where}: {name} differs"
                        cases += 1
    print(f"identical: {cases} requests (formats x sessions x windows x cold and warm)")
    return 0


_FUZZ_PATHS = ("a.py", "b.py", "src/c.py")
_FUZZ_MODELS = ("openai/gpt-4o", "zai/glm-4.6", "anthropic/claude-sonnet-4-5-20250929")


def fuzz_loop(rng: random.Random) -> list[dict[str, Any]]:
    """A chat tool loop for `--fuzz` (module doc; the tests draw them too, with Hypothesis's `randoms`)."""
    breakpoint_ = {"type": "ephemeral"}
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    messages.append({"role": "user", "content": "Fix the failing test."})
    for turn in range(rng.randint(1, 18)):
        calls = []
        for n in range(rng.randint(1, 3)):
            tool = rng.choice(("read_file", "Read", "exec", "grep"))
            arguments: dict[str, Any] = {"file_path" if tool == "Read" else "path": rng.choice(_FUZZ_PATHS)}
            if rng.random() < 0.5:
                arguments["offset"] = rng.choice((0, 10, 50))
            if rng.random() < 0.5:
                arguments["limit"] = rng.choice((10, 100))
            calls.append(
                {
                    "id": f"c{turn}_{n}",
                    "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(arguments)},
                }
            )
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in calls:
            text = rng.choice(("line of file\n" * rng.randint(30, 900), "ok", "Error: no such file"))
            content: Any = text
            if rng.random() < 1 / 7:
                content = [{"type": "text", "text": text, "cache_control": breakpoint_}]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        if rng.random() < 0.25:
            part: dict[str, Any] = {"type": "text", "text": rng.choice(("go on", "done", "   "))}
            if rng.random() < 0.5:
                part["cache_control"] = breakpoint_
            messages.append({"role": "user", "content": [part]})
    if rng.random() < 0.5:
        messages.append({"role": "user", "content": "next"})
    return messages


def _as_anthropic(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A `fuzz_loop` as an Anthropic Messages body (results and user text folded into user turns). Not
    `bench.agent_shapes.to_claude_code`: that one dresses a session as Claude Code sends it (string
    user turns, its own breakpoint on the newest message, ``call_`` ids renamed), which would drop the
    breakpoints and blank parts placed here."""
    out: list[dict[str, Any]] = []
    for message in messages[1:]:
        if message["role"] == "assistant":
            blocks = [
                {
                    "type": "tool_use",
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"]),
                }
                for c in message["tool_calls"]
            ]
            out.append({"role": "assistant", "content": blocks})
            continue
        if message["role"] == "tool":
            blocks = [{"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}]
        else:
            content = message["content"]
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if out and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + blocks}
        else:
            out.append({"role": "user", "content": blocks})
    return {"system": messages[0]["content"], "max_tokens": 100, "messages": out}


def _as_responses(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A `fuzz_loop` as a Responses body (calls and outputs as items; not `bench.agent_shapes.to_codex`,
    which turns every call into Codex's ``shell`` and so leaves no reads to supersede)."""
    items: list[dict[str, Any]] = []
    for message in messages[1:]:
        if message["role"] == "assistant":
            for c in message["tool_calls"]:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    }
                )
        elif message["role"] == "tool":
            content = message["content"]
            output = content if isinstance(content, str) else content[0]["text"]
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": output})
        else:
            content = message["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            items.append({"role": "user", "content": [{"type": "input_text", "text": text}]})
    return {"instructions": messages[0]["content"], "max_output_tokens": 100, "input": items}


def fuzz(packages: dict[str, ModuleType], count: int, seed: int = 0) -> int:
    """Assert the same body and report from every package on `count` generated requests (module doc)."""
    rng = random.Random(seed)
    for case in range(count):
        messages = fuzz_loop(rng)
        fmt = rng.choice(("chat", "anthropic", "responses"))
        model = rng.choice(_FUZZ_MODELS)
        if fmt == "chat":
            body: dict[str, Any] = {"messages": messages, "max_tokens": 100}
        else:
            body = _as_anthropic(messages) if fmt == "anthropic" else _as_responses(messages)
        body["model"] = model
        options = {
            "context_window_tokens": rng.choice((1_500, 3_000, 6_000, 12_000, 1_000_000)),
            "max_output_tokens": 100,
            "safety_buffer_tokens": 50,
            "keep_recent": rng.choice((0, 1, 3, 10)),
            "cache_stable": rng.random() < 0.5,
            "compact_batch": rng.choice((None, 1, 3)),
            "respect_cache_control": rng.random() < 0.7,
        }
        seen = []
        for package in packages.values():
            governed = package.govern_request(json.loads(json.dumps(body)), config=package.GovernanceConfig(**options))
            seen.append(json.dumps([governed.request, governed.report.to_dict()], sort_keys=True, default=repr))
        assert all(one == seen[0] for one in seen), f"generated request {case} ({fmt}, {model}, {options}) differs"
    print(f"identical: {count} generated requests (seed {seed})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--window", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument(
        "--model", default=formats.MODEL, help="the model the requests name (zai/glm-4.6: strict roles, notes merged)"
    )
    parser.add_argument("--check", action="store_true", help="assert identical output instead of timing")
    parser.add_argument("--fuzz", type=int, default=0, metavar="N", help="with --check: N generated requests too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        packages = {"before": load_before(args.against, Path(tmp)), "after": litellm_governance}
        if args.check:
            return check(packages, args.messages) or (fuzz(packages, args.fuzz) if args.fuzz else 0)
        timed = speed.interleave(measures(packages, args.messages, args.window, args.model), reps=args.reps)
    med = {key: statistics.median(values) for key, values in timed.items()}
    low = {key: min(values) for key, values in timed.items()}  # the least disturbed repetition
    print(
        f"# `{args.against}` against the working tree: {args.model}, {args.messages} messages, "
        f"{args.window:,}-token window, medians of {args.reps} interleaved\n"
    )
    print(
        "| format | pass | cold before | cold after | warm before | warm after | cold / pass | warm / cold "
        "| warm after / before | (fastest runs) |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|---:|---:|")
    for fmt in formats.FORMATS:
        floor = med[(fmt, "pass")]
        cb, ca, wb, wa = (med[(fmt, k)] for k in ("before cold", "after cold", "before warm", "after warm"))
        fastest = low[(fmt, "after warm")] / low[(fmt, "before warm")]
        print(
            f"| {fmt} | {floor * 1e3:.1f} ms | {cb * 1e3:.1f} ms | {ca * 1e3:.1f} ms | {wb * 1e3:.2f} ms | "
            f"{wa * 1e3:.2f} ms | {cb / floor:.2f} → {ca / floor:.2f} | {wb / cb:.3f} → {wa / ca:.3f} | "
            f"{wa / wb:.2f} | {fastest:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
