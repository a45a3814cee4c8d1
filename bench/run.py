"""Benchmark: govern() against the tiktoken floor, itself warm, longer histories, and trim_messages.

Run ``python bench/run.py`` (or ``make bench``) from the repository root; it needs no network and
takes about a minute on a 2-CPU machine, a third of it in LiteLLM's ``trim_messages``. ``--quick``
runs fewer sizes and repetitions (a smoke test); ``--json PATH`` also writes every raw timing;
``--profile`` adds cProfile tables of govern() warm and cold at the largest size.

What it measures, on realistic coding-agent sessions from `bench.sessions` (seed 0, with the
sessions' ten tool schemas in every request), for a permissive model (openai/gpt-4o, o200k_base)
and a strict one (zai/glm-4.6, cl100k_base):

* the floor: one tiktoken ``encode_ordinary`` pass over the message text (content text parts, tool
  calls' function names and arguments), with the encoding govern() uses for the model; and, for
  reference, a pass over every string govern() counts (also names, tool-call ids and the tool
  schemas' JSON);
* govern() cold: the token cache emptied before each repetition (the encoding stays loaded;
  loading it is a one-time cost, reported apart);
* govern() warm: the session plus one new tool round (`bench.sessions.next_round`) right after the
  session itself was governed once, which is what an agent loop sends next; also with the request
  rebuilt from JSON (new objects, equal content), as the proxy receives it;
* growth with session length (time at 4n over time at n);
* ``litellm.utils.trim_messages`` on the same session and budget (slow, so fewer sizes and reps);
* the token cache's memory, and that it stays within ``token_cache_size``.

Each figure is the median of 11 repetitions after one untimed warm-up round, timed with
``time.perf_counter``, with ``gc.collect()`` before each repetition. All measures of all sizes and
models run interleaved, one repetition of each per round in a seeded random order, so that load
from other processes on a shared machine (and cold CPU caches) hits them alike and the ratios stay
meaningful even when absolute times suffer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/run.py` finds `bench`

import argparse
import gc
import importlib.metadata
import json
import platform
import shlex
import time
from collections.abc import Sequence
from typing import Any

from bench import speed
from bench.sessions import make_session, make_tools, next_round
from litellm_governance import PROFILES, GovernanceConfig, govern
from litellm_governance._tokens import encoding_for_model

MODELS = ("openai/gpt-4o", "zai/glm-4.6")
SEED = 0
SIZES = (100, 200, 400, 800, 1600, 2000)
TRIM_SIZES = (100, 400, 1000)
QUICK_SIZES = (100, 400)
QUICK_TRIM_SIZES = (100,)
WINDOW = 128_000
TRIM_WINDOW = 32_768
SMALL_CACHE = 1_000
TARGET_COLD = 1.2
TARGET_WARM = 0.1
TARGET_GROWTH = 4.4


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated message counts, got {text!r}") from None
    if not sizes or sizes[0] < 4:
        raise argparse.ArgumentTypeError("every size must be at least 4 messages")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/run.py",
        description="Benchmark govern() against a tiktoken pass, warm requests, longer sessions and trim_messages.",
    )
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (smoke test)")
    parser.add_argument("--json", metavar="PATH", help="also write every raw number to PATH as JSON")
    parser.add_argument("--sizes", type=_sizes, help=f"session lengths in messages (default {SIZES})")
    parser.add_argument("--trim-sizes", type=_sizes, help=f"session lengths for trim_messages (default {TRIM_SIZES})")
    parser.add_argument("--reps", type=int, help="timed repetitions per govern/tiktoken figure (default 11, quick 3)")
    parser.add_argument("--trim-reps", type=int, help="timed repetitions per trim_messages figure (default 5, quick 1)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile govern() warm and cold at the largest size with cProfile (where the time goes)",
    )
    parser.add_argument("--window", type=int, default=WINDOW, help=f"context window for govern (default {WINDOW})")
    parser.add_argument(
        "--trim-window",
        type=int,
        default=TRIM_WINDOW,
        help=f"context window for the trim_messages comparison (default {TRIM_WINDOW})",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else SIZES
    if args.trim_sizes is None:
        args.trim_sizes = QUICK_TRIM_SIZES if args.quick else TRIM_SIZES
    if args.reps is None:
        args.reps = 3 if args.quick else 11
    if args.trim_reps is None:
        args.trim_reps = 1 if args.quick else 5
    if args.reps < 1 or args.trim_reps < 1:
        parser.error("--reps and --trim-reps must be at least 1")
    return args


def _command(argv: Sequence[str] | None) -> str:
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", "bench/run.py", *map(shlex.quote, args)])


def machine_facts() -> dict[str, Any]:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "cpu": cpu or "unknown",
        "cpu_count": os.cpu_count(),
        "litellm": version("litellm"),
        "tiktoken": version("tiktoken"),
        "litellm-governance": version("litellm-governance"),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------


SIZE_MEASURES = ("tiktoken", "tiktoken_all", "cold", "warm", "warm_fresh_json")


def size_measures(
    model: str,
    session: list[dict[str, Any]],
    following: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]],
    config: GovernanceConfig,
) -> tuple[dict[str, speed.Measure], dict[str, Any]]:
    """The measures of one model and session length, and facts about the session."""
    text = speed.text_strings(session)
    everything = [*speed.message_strings(session), speed.tools_json(tools)]
    floor, text_tokens = speed.tiktoken_pass(model, text)
    floor_all, tokens = speed.tiktoken_pass(model, everything)
    measures = {
        "tiktoken": floor,
        "tiktoken_all": floor_all,
        "cold": speed.cold(session, model=model, tools=tools, config=config),
        "warm": speed.warm(session, following, model=model, tools=tools, config=config),
        "warm_fresh_json": speed.warm(session, following, model=model, tools=tools, config=config, fresh_objects=True),
    }
    facts = {
        "strings": len(text),
        "chars": sum(map(len, text)),
        "text_tokens": text_tokens,
        "all_strings": len(everything),
        "tokens": tokens,
    }
    return measures, facts


def size_row(
    model: str,
    session: list[dict[str, Any]],
    following: list[dict[str, Any]],
    facts: dict[str, Any],
    timed: dict[str, list[float]],
    *,
    tools: list[dict[str, Any]],
    config: GovernanceConfig,
) -> dict[str, Any]:
    cold = govern(session, model=model, tools=tools, config=config)
    warm = govern(following, model=model, tools=tools, config=config)
    return {
        "messages": len(session),
        **facts,
        "messages_after": cold.report.messages_after,
        "tokens_after": cold.report.tokens_after,
        "steps": dict(cold.report.steps),
        "over_budget": cold.report.over_budget,
        "warm_messages": len(following),
        "warm_steps": dict(warm.report.steps),
        "tiktoken_s": speed.median(timed["tiktoken"]),
        "tiktoken_all_s": speed.median(timed["tiktoken_all"]),
        "cold_s": speed.median(timed["cold"]),
        "warm_s": speed.median(timed["warm"]),
        "warm_fresh_json_s": speed.median(timed["warm_fresh_json"]),
        "reps": len(timed["cold"]),
        "raw": timed,
    }


def measure_trim(
    model: str,
    session: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]],
    config: GovernanceConfig,
    trim_reps: int,
) -> dict[str, Any]:
    cold = govern(session, model=model, tools=tools, config=config)
    budget = cold.report.budget
    assert budget is not None
    # On the session exactly as govern() gets it (untimed): does trim_messages cope with it at all?
    raw_s, _, raw_failed = speed.trim_messages_call(session, model=model, max_tokens=budget)
    safe = speed.trim_failure_safe_copy(session)
    trim_measure, outputs = speed.trim(safe, model=model, max_tokens=budget)
    timed = speed.interleave(
        {"govern_cold": speed.cold(session, model=model, tools=tools, config=config), "trim": trim_measure},
        reps=trim_reps,
    )
    kept = outputs[-1] if isinstance(outputs[-1], list) else []
    return {
        "messages": len(session),
        "budget": budget,
        "govern_cold_s": speed.median(timed["govern_cold"]),
        "govern_messages_after": cold.report.messages_after,
        "govern_pairing_errors": speed.count_pairing_errors(cold.messages),
        "trim_s": speed.median(timed["trim"]),
        "trim_messages_after": len(kept),
        "trim_pairing_errors": speed.count_pairing_errors(kept),
        "trim_failed": outputs[-1] is safe,
        "trim_raw_session_s": raw_s,
        "trim_raw_session_failed": raw_failed,
        "raw": timed,
    }


def measure_memory(
    sessions: dict[int, list[dict[str, Any]]],
    followers: dict[int, list[dict[str, Any]]],
    *,
    tools: list[dict[str, Any]],
    window: int,
    reps: int,
) -> dict[str, Any]:
    model = MODELS[0]
    largest = max(followers)
    config = GovernanceConfig(context_window_tokens=window)
    full = speed.cache_memory([sessions[largest], followers[largest]], model=model, tools=tools, config=config)
    small_config = GovernanceConfig(context_window_tokens=window, token_cache_size=SMALL_CACHE)
    every = [msgs for n in sorted(followers) for msgs in (sessions[n], followers[n])]
    small = speed.cache_memory(every, model=model, tools=tools, config=small_config)
    timed = speed.interleave(
        {
            "cold": speed.cold(sessions[largest], model=model, tools=tools, config=small_config),
            "warm": speed.warm(sessions[largest], followers[largest], model=model, tools=tools, config=small_config),
        },
        reps=reps,
    )
    return {
        "model": model,
        "messages": len(sessions[largest]),
        "default": vars(full) | {"bytes_per_entry": full.bytes_per_entry},
        "small": vars(small) | {"bytes_per_entry": small.bytes_per_entry},
        "small_cold_s": speed.median(timed["cold"]),
        "small_warm_s": speed.median(timed["warm"]),
    }


def growth(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """time(4n) / time(n) for every n whose 4n was measured, with the token ratio beside it."""
    by_size = {row["messages"]: row for row in rows}
    out = []
    for n, row in sorted(by_size.items()):
        big = by_size.get(4 * n)
        if big is not None:
            out.append(
                {
                    "from": n,
                    "to": 4 * n,
                    "time_ratio": big[key] / row[key],
                    "token_ratio": big["tokens"] / row["tokens"],
                    # The generated sessions' later rounds carry bigger tool results, so 4x the
                    # messages is 4.1-4.8x the tokens: scale the time ratio to exactly 4x the tokens.
                    "per_token_ratio": 4 * (big[key] / row[key]) / (big["tokens"] / row["tokens"]),
                }
            )
    return out


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    value = seconds * 1e3
    if value >= 100:
        return f"{value:,.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def times(ratio: float) -> str:
    return f"{ratio:,.0f}x" if ratio >= 100 else f"{ratio:.2f}x"


def verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "MISS"


def table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(rule) + " |",
        *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows),
    ]


def warm_over_cold(row: dict[str, Any]) -> float:
    """Warm / cold, warm as the proxy pays it: a request re-parsed from JSON (no reused objects)."""
    return float(row["warm_fresh_json_s"]) / float(row["cold_s"])


def headline(results: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The README table (one column per model) and the verdict lines."""
    models = list(results["models"])
    columns: dict[str, list[str]] = {}
    verdicts: list[str] = []
    labels: list[str] = []
    for model in models:
        data = results["models"][model]
        top = data["sizes"][-1]
        worst_cold = max(data["sizes"], key=lambda r: r["cold_s"] / r["tiktoken_s"])
        worst_warm = max(data["sizes"], key=warm_over_cold)
        cold_ratio = top["cold_s"] / top["tiktoken_s"]
        warm_ratio = warm_over_cold(top)
        cells = [
            f"{top['messages']:,} msgs, {top['tokens'] / 1000:,.0f}k tokens",
            ms(top["tiktoken_s"]),
            f"{ms(top['tiktoken_all_s'])} (cold / it: {top['cold_s'] / top['tiktoken_all_s']:.2f}x)",
            ms(top["cold_s"]),
            ms(top["warm_fresh_json_s"]),
            f"{times(cold_ratio)} {verdict(cold_ratio, TARGET_COLD)}",
            f"{warm_ratio:.3f} {verdict(warm_ratio, TARGET_WARM)}",
            f"{worst_cold['cold_s'] / worst_cold['tiktoken_s']:.2f}x at {worst_cold['messages']:,} msgs "
            f"{verdict(worst_cold['cold_s'] / worst_cold['tiktoken_s'], TARGET_COLD)}; "
            f"{warm_over_cold(worst_warm):.3f} at {worst_warm['messages']:,} msgs "
            f"{verdict(warm_over_cold(worst_warm), TARGET_WARM)}",
        ]
        labels = [
            "session",
            "tiktoken pass over message text (floor: content, function names and arguments)",
            "tiktoken pass over every string govern() counts (adds ids, names, tool schemas)",
            "govern() cold",
            "govern() warm (+1 tool round, request re-parsed from JSON as the proxy sees it)",
            f"cold / tiktoken pass (target ≤ {TARGET_COLD})",
            f"warm / cold (target ≤ {TARGET_WARM})",
            "worst over all sizes: cold / tiktoken pass; warm / cold",
        ]
        verdicts.append(
            f"- {model}: cold / tiktoken pass = {cold_ratio:.2f} ({verdict(cold_ratio, TARGET_COLD)}, "
            f"target ≤ {TARGET_COLD}); warm / cold = {warm_ratio:.3f} ({verdict(warm_ratio, TARGET_WARM)}, "
            f"target ≤ {TARGET_WARM}) at {top['messages']:,} messages. Worst over all sizes: cold / tiktoken "
            f"{worst_cold['cold_s'] / worst_cold['tiktoken_s']:.2f} at {worst_cold['messages']:,} messages, "
            f"warm / cold {warm_over_cold(worst_warm):.3f} at {worst_warm['messages']:,}"
        )
        for key, name in (("cold_s", "cold"), ("warm_s", "warm")):
            grown = data["growth"][key]
            if grown:
                step = grown[-1]
                cells.append(
                    f"{times(step['time_ratio'])} for {times(step['token_ratio'])} the tokens = "
                    f"{times(step['per_token_ratio'])} per 4x tokens {verdict(step['per_token_ratio'], TARGET_GROWTH)}"
                )
                labels.append(f"4x history, {name} ({step['from']:,} → {step['to']:,} msgs; target ≤ {TARGET_GROWTH}x)")
                verdicts.append(
                    f"- {model}: 4x history, {name}: {step['from']:,}→{step['to']:,} msgs took "
                    f"{step['time_ratio']:.2f}x the time for {step['token_ratio']:.2f}x the tokens, "
                    f"{step['per_token_ratio']:.2f}x per 4x tokens ({verdict(step['per_token_ratio'], TARGET_GROWTH)}, "
                    f"target ≤ {TARGET_GROWTH}x); all pairs per 4x tokens: "
                    + ", ".join(f"{g['from']}→{g['to']} {g['per_token_ratio']:.2f}x" for g in grown)
                )
        if data["trim"]:
            ratios = [r["trim_s"] / r["govern_cold_s"] for r in data["trim"]]
            sizes = " / ".join(f"{r['messages']:,}" for r in data["trim"])
            cells.append(" / ".join(times(x) for x in ratios))
            labels.append(
                f"trim_messages / govern() cold ({sizes} msgs, {results['settings']['trim_window']:,} window)"
            )
            verdicts.append(
                f"- {model}: trim_messages / govern() cold = "
                + ", ".join(
                    f"{times(x)} at {r['messages']:,} messages" for x, r in zip(ratios, data["trim"], strict=True)
                )
            )
        columns[model] = cells
    rows = [[label, *(columns[m][i] for m in models)] for i, label in enumerate(labels)]
    return table(["", *(f"`{m}`" for m in models)], rows), verdicts


def report(results: dict[str, Any]) -> str:
    settings = results["settings"]
    facts = results["machine"]
    out: list[str] = ["# litellm-governance benchmark", ""]
    out.append(f"Command: `{results['command']}`")
    out.append(
        f"Machine: {facts['python']} on {facts['platform']} ({facts['machine']}), {facts['cpu_count']} CPUs "
        f"({facts['cpu']}); litellm {facts['litellm']}, tiktoken {facts['tiktoken']}, "
        f"litellm-governance {facts['litellm-governance']}; load average at start {facts['load_average']}"
    )
    loads = [x[0] for x in (facts["load_average"], results.get("load_average_end")) if x]
    cpus = facts["cpu_count"] or 1
    if loads and max(loads) > cpus - 0.5:
        out.append(
            f"Note: the 1-minute load average reached {max(loads):.2f} on {cpus} CPUs (this benchmark itself counts "
            "for about 1): other processes competed for the CPU, so absolute times are inflated; the ratios, "
            "measured interleaved, are less affected."
        )
    out.append(
        f"Settings: `GovernanceConfig(context_window_tokens={settings['window']:_})` (budget = window - 4,096 "
        f"output - 1,024 safety = {settings['budget']:,} tokens; other fields default, token_cache_size "
        f"{settings['token_cache_size']:,}); sessions `bench.sessions.make_session(n, seed={SEED})` with the "
        f"{settings['tools']} tool schemas of `make_tools()` in every request. Medians of "
        f"{settings['reps']} repetitions after a warm-up round, all measures of all sizes and models interleaved "
        "(one repetition of each per round, in a seeded random order, so load from other processes and cold CPU "
        "caches hit them alike), gc.collect() before each. trim_messages: "
        f"{settings['trim_reps']} repetitions interleaved with govern() cold on the same session and budget, "
        f"sizes {', '.join(map(str, settings['trim_sizes']))} only, window {settings['trim_window']:,}."
    )
    out.append(
        "Profiles: "
        + "; ".join(
            f"`{m}` → {d['profile']} (tokenizer {d['encoding']}, token ratio {d['token_ratio']})"
            for m, d in results["models"].items()
        )
    )
    out += ["", "## Headline", ""]
    head, verdicts = headline(results)
    out += head
    out += ["", "Targets:", *verdicts]

    out += ["", "## One-time costs", ""]
    rows = [
        [f"encoding load {name} (first{', includes import tiktoken' if i == 0 else ''})", ms(t["first_s"])]
        for i, (name, t) in enumerate(results["encoding_load"].items())
    ]
    rows += [
        [f"encoding load {name} (rebuild, median)", ms(t["rebuild_s"])] for name, t in results["encoding_load"].items()
    ]
    for label, seconds in results["first_calls"].items():
        rows.append([label, ms(seconds)])
    out += table(["", "time"], rows)

    for model, data in results["models"].items():
        out += ["", f"## Session length: `{model}` ({data['profile']} profile, {data['encoding']})", ""]
        rows = []
        for r in data["sizes"]:
            k = r["tokens"] / 1000
            rows.append(
                [
                    f"{r['messages']:,}",
                    f"{r['tokens']:,}",
                    f"{r['messages_after']:,}",
                    ms(r["tiktoken_s"]),
                    ms(r["tiktoken_all_s"]),
                    ms(r["cold_s"]),
                    ms(r["warm_s"]),
                    ms(r["warm_fresh_json_s"]),
                    f"{r['cold_s'] / r['tiktoken_s']:.2f}",
                    f"{r['cold_s'] / r['tiktoken_all_s']:.2f}",
                    f"{warm_over_cold(r):.3f}",
                    f"{r['cold_s'] * 1e6 / k:.0f}",
                    f"{r['warm_s'] * 1e6 / k:.1f}",
                    r["reps"],
                ]
            )
        out += table(
            [
                "messages",
                "tokens",
                "kept",
                "tiktoken pass",
                "tiktoken, all strings",
                "cold",
                "warm",
                "warm, fresh JSON",
                "cold/tiktoken",
                "cold/all strings",
                "warm/cold",
                "cold µs/1k tok",
                "warm µs/1k tok",
                "reps",
            ],
            rows,
        )
        for key, name in (("cold_s", "cold"), ("warm_s", "warm"), ("tiktoken_s", "tiktoken pass")):
            grown = data["growth"][key]
            if grown:
                out.append("")
                out.append(
                    f"4x history, {name}: "
                    + "; ".join(
                        f"{g['from']:,}→{g['to']:,} msgs {g['time_ratio']:.2f}x (tokens {g['token_ratio']:.2f}x; "
                        f"{g['per_token_ratio']:.2f}x scaled to 4x the tokens)"
                        for g in grown
                    )
                )

    if any(d["trim"] for d in results["models"].values()):
        out += [
            "",
            f"## litellm.utils.trim_messages (window {settings['trim_window']:,}, same session and budget)",
            "",
        ]
        rows = []
        for model, data in results["models"].items():
            for r in data["trim"]:
                rows.append(
                    [
                        f"`{model}`",
                        f"{r['messages']:,}",
                        f"{r['budget']:,}",
                        ms(r["trim_s"]),
                        ms(r["govern_cold_s"]),
                        times(r["trim_s"] / r["govern_cold_s"]),
                        f"{r['trim_messages_after']:,} / {r['govern_messages_after']:,}",
                        f"{r['trim_pairing_errors']} / {r['govern_pairing_errors']}",
                        "failed, returned input untrimmed" if r["trim_raw_session_failed"] else "ok",
                    ]
                )
        out += table(
            [
                "model",
                "messages",
                "budget",
                "trim_messages",
                "govern() cold",
                "trim / govern",
                "kept: trim / govern",
                "pairing errors: trim / govern",
                "trim on the raw session",
            ],
            rows,
        )
        out += [
            "",
            "On a session as agents send it, trim_messages raises (`len(None)`) whenever it has to shorten an "
            "assistant tool-call message (`content: None`), catches its own error and returns the input untrimmed; "
            "the last column says whether that happened in one untimed run on the raw session. To time its work "
            'rather than that failure, it is timed on a copy with `content: None` replaced by `""`. It ignores '
            "`tools`. Pairing errors = tool results without their call plus calls without a result. Its cost is "
            "O(n x kept) token counts and depends on where its loop stops as much as on the length (800 tokens less "
            "budget made the 1,000-message openai/gpt-4o call take 17 s instead of 0.6 s), so its sizes and "
            "repetitions are capped.",
        ]

    mem = results["memory"]
    full, small = mem["default"], mem["small"]
    out += ["", f"## Token cache memory (`{mem['model']}`, tracemalloc)", ""]
    out += table(
        ["cache", "requests governed", "entries after", "most entries", "retained", "per entry"],
        [
            [
                f"default, token_cache_size={full['size_limit']:,}",
                f"{mem['messages']:,}-msg session + next round",
                f"{full['entries']:,}",
                f"{full['max_entries_seen']:,}",
                f"{full['retained_bytes'] / 1024:,.0f} KiB",
                f"{full['bytes_per_entry']:.0f} B",
            ],
            [
                f"token_cache_size={small['size_limit']:,}",
                f"{small['calls']} (every size + next round)",
                f"{small['entries']:,}",
                f"{small['max_entries_seen']:,}",
                f"{small['retained_bytes'] / 1024:,.0f} KiB",
                f"{small['bytes_per_entry']:.0f} B",
            ],
        ],
    )
    bounded = small["max_entries_seen"] <= small["size_limit"]
    out += [
        "",
        f"Bounded: the {small['size_limit']:,}-entry cache never held more than {small['max_entries_seen']:,} "
        f"entries ({'PASS' if bounded else 'FAIL'}). With it, the {mem['messages']:,}-message session does not fit: "
        f"warm {ms(mem['small_warm_s'])} vs cold {ms(mem['small_cold_s'])} "
        f"({mem['small_warm_s'] / mem['small_cold_s']:.2f}). The default {full['size_limit']:,} entries hold "
        f"about {full['size_limit'] // max(full['entries'], 1):,} such sessions, "
        f"~{full['size_limit'] * full['bytes_per_entry'] / 2**20:.1f} MiB when full.",
    ]
    if "profile" in results:
        prof = results["profile"]
        for label, rows in prof["calls"].items():
            out += ["", f"## Profile: govern() {label}, {prof['messages']:,} messages (cProfile)", ""]
            out += table(
                ["function", "calls / request", "own ms / request", "own share", "inclusive share"],
                [
                    [
                        f"`{r['function']}`",
                        f"{r['calls_per_request']:,.0f}",
                        f"{r['own_ms_per_request']:.2f}",
                        f"{r['own_share']:.1%}",
                        f"{r['inclusive_share']:.1%}",
                    ]
                    for r in rows
                ],
            )
        out += [
            "",
            "cProfile's overhead inflates code that makes many small Python calls: read the shares as a ranking.",
        ]
    out += ["", f"Total benchmark time: {results['elapsed_s']:.0f} s."]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    encoding_load = speed.encoding_load_times(["o200k_base", "cl100k_base"], reps=1 if args.quick else 3)
    tools = make_tools()
    config = GovernanceConfig(context_window_tokens=args.window)
    trim_config = GovernanceConfig(context_window_tokens=args.trim_window)

    first_calls: dict[str, float] = {}
    for label, call_config in (("window from the config", config), ("window from LiteLLM's model map", None)):
        had_litellm = "litellm" in sys.modules
        start = time.perf_counter()
        govern(make_session(4, seed=SEED), model=MODELS[0], tools=tools, config=call_config)
        seconds = time.perf_counter() - start
        imported = "" if had_litellm or "litellm" not in sys.modules else ", imports LiteLLM"
        first_calls[f"first govern() call, {label}{imported}"] = seconds

    sessions = {n: make_session(n, seed=SEED) for n in sorted({*args.sizes, *args.trim_sizes})}
    followers = {n: next_round(sessions[n], seed=SEED) for n in args.sizes}
    # LiteLLM and the sessions are millions of objects that a full gc.collect() would scan before
    # every repetition (~0.2 s each): move them to the permanent generation while measuring.
    gc.collect()
    gc.freeze()
    try:
        results = _measure(
            args,
            argv,
            tools=tools,
            config=config,
            trim_config=trim_config,
            sessions=sessions,
            followers=followers,
            encoding_load=encoding_load,
            first_calls=first_calls,
        )
    finally:
        gc.unfreeze()
    results["elapsed_s"] = time.perf_counter() - started
    results["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None

    print(report(results), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"\nRaw numbers written to {args.json}")
    return 0


def _measure(
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    *,
    tools: list[dict[str, Any]],
    config: GovernanceConfig,
    trim_config: GovernanceConfig,
    sessions: dict[int, list[dict[str, Any]]],
    followers: dict[int, list[dict[str, Any]]],
    encoding_load: dict[str, dict[str, float]],
    first_calls: dict[str, float],
) -> dict[str, Any]:
    first = govern(sessions[args.sizes[0]], model=MODELS[0], tools=tools, config=config)

    results: dict[str, Any] = {
        "command": _command(argv),
        "machine": machine_facts(),
        "settings": {
            "models": list(MODELS),
            "seed": SEED,
            "window": args.window,
            "budget": first.report.budget,
            "token_cache_size": config.token_cache_size,
            "tools": len(tools),
            "sizes": list(args.sizes),
            "reps": args.reps,
            "trim_window": args.trim_window,
            "trim_sizes": list(args.trim_sizes),
            "trim_reps": args.trim_reps,
            "quick": args.quick,
        },
        "encoding_load": encoding_load,
        "first_calls": first_calls,
        "models": {},
    }
    # One sweep over every model, size and measure, round after round: a burst of load from other
    # processes then hits all sizes alike, and the growth ratios stay meaningful too.
    measures: dict[tuple[str, int, str], speed.Measure] = {}
    facts: dict[tuple[str, int], dict[str, Any]] = {}
    for model in MODELS:
        for n in args.sizes:
            per_size, facts[model, n] = size_measures(model, sessions[n], followers[n], tools=tools, config=config)
            measures.update({(model, n, kind): m for kind, m in per_size.items()})
    timed = speed.interleave(measures, reps=args.reps)
    for model in MODELS:
        rows = [
            size_row(
                model,
                sessions[n],
                followers[n],
                facts[model, n],
                {kind: timed[model, n, kind] for kind in SIZE_MEASURES},
                tools=tools,
                config=config,
            )
            for n in args.sizes
        ]
        trims = [
            measure_trim(model, sessions[n], tools=tools, config=trim_config, trim_reps=args.trim_reps)
            for n in args.trim_sizes
        ]
        profile = govern(sessions[args.sizes[0]], model=model, tools=tools, config=config).report.profile
        results["models"][model] = {
            "profile": profile,
            "encoding": encoding_for_model(model),
            "token_ratio": PROFILES[profile].token_ratio,
            "sizes": rows,
            "growth": {key: growth(rows, key) for key in ("tiktoken_s", "cold_s", "warm_s")},
            "trim": trims,
        }
    results["memory"] = measure_memory(sessions, followers, tools=tools, window=args.window, reps=args.reps)
    if args.profile:
        largest = max(args.sizes)
        session, following = sessions[largest], followers[largest]
        results["profile"] = {
            "messages": len(session),
            "calls": {
                f"{model}, {kind}": speed.profile(measure, reps=max(3, args.reps))
                for model in MODELS
                for kind, measure in (
                    ("warm", speed.warm(session, following, model=model, tools=tools, config=config)),
                    ("cold", speed.cold(session, model=model, tools=tools, config=config)),
                )
            },
        }
    return results


if __name__ == "__main__":
    sys.exit(main())
