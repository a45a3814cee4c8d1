"""`make bench`: every benchmark a target reads, in one run; their figures, baselines and verdicts in
``bench/results.json``, and the table of ``docs/benchmarks.md`` rendered from it.

    python bench/run.py            # all of them (about 6 minutes on 2 CPUs, no network)
    python bench/run.py --render   # judge bench/results.json's raw figures again and render the page's table

In this order, each in the configuration its own command runs by default:

* ``bench/formats.py``: a cold pass against one tiktoken pass over the same text, per format, 400 messages;
* ``bench/proxy_latency.py``: two real proxies (with and without the plugin), 400-message agent loops
  per format at a 32k and a 1M window: the plugin's hooks per request, and the latency it adds;
* ``bench/load.py``: concurrent agent sessions through two proxies at once: p95 and memory per round;
* ``bench/cache.py``: prompt-cache reuse with ``cache_stable`` at 24k, two long loops replayed;
* ``bench/recall.py``: action recall on long multi-task conversations at 32k.

Each figure is judged against its target (issues #53 and #51) beside the same run's baseline; a
figure that misses its target is reported, never hidden (the run still succeeds).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python bench/run.py` finds `bench`

import argparse
import datetime
import importlib.metadata
import json
import platform
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
PAGE = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- generated: bench/run.py renders this table from bench/results.json (make bench) -->"
END = "<!-- end generated -->"
#: How the page names each format.
LABELS = {"chat": "chat", "anthropic": "/v1/messages", "responses": "/v1/responses"}
TIMES = "\N{MULTIPLICATION SIGN}"


def machine() -> dict[str, Any]:
    def version(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "litellm": version("litellm"),
        "tiktoken": version("tiktoken"),
        "commit": commit.stdout.strip() or "unknown",
        "load_average": _load_average(),
    }


def _load_average() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes (other processes slow every figure)."""
    return [round(x, 1) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


# ---- running ------------------------------------------------------------------------------------


def _formats() -> dict[str, Any]:
    from bench import formats

    return {"rows": formats.results()}


def _proxy_latency() -> dict[str, Any]:
    from bench import proxy_latency

    return proxy_latency.results()


def _load() -> dict[str, Any]:
    from bench import load

    return load.results(load.Plan(load.SESSIONS, load.CONCURRENCY, load.TURNS, load.START))


def _cache() -> dict[str, Any]:
    from bench import cache

    rows = cache.measure((cache.WINDOW,), cache.SEEDS)
    return {
        "window": cache.WINDOW,
        "rounds": cache.rounds_for(cache.WINDOW),
        "modes": {row.mode: {"reuse": [round(r, 3) for r in row.reuse], "over": row.over} for row in rows},
    }


def _recall() -> dict[str, Any]:
    from bench import recall

    seeds = recall.SEEDS[: recall.CONVERSATIONS]
    found = recall.measure(seeds, recall.TASK_ROUNDS)
    return {"window": recall.WINDOW, "tasks": recall.TASKS, "rounds": recall.TASK_ROUNDS, **recall.summary(found)}


#: (name, command, runner), in the order they run: the one-process bench first, on a quiet heap.
BENCHES: tuple[tuple[str, str, Callable[[], dict[str, Any]]], ...] = (
    ("formats", "python bench/formats.py", _formats),
    ("proxy_latency", "python bench/proxy_latency.py", _proxy_latency),
    ("load", "python bench/load.py", _load),
    ("cache", "python bench/cache.py", _cache),
    ("recall", "python bench/recall.py", _recall),
)


def run() -> dict[str, Any]:
    """Every bench, timed; their raw figures and the judged ones."""
    started, load_before = time.monotonic(), _load_average()
    raw: dict[str, Any] = {}
    for name, command, runner in BENCHES:
        began = time.monotonic()
        print(f"{command} ...", flush=True)
        raw[name] = {"command": command, **runner(), "seconds": round(time.monotonic() - began)}
    results = {
        "date": datetime.date.today().isoformat(),
        "machine": {**machine(), "load_average_start": load_before},
        "seconds": round(time.monotonic() - started),
        "command": "make bench",
        "benches": raw,
    }
    return {**results, "figures": figures(raw)}


# ---- judging ------------------------------------------------------------------------------------


def _figure(
    name: str, value: str, baseline: str, target: str, *, met: bool | None, command: str, meaning: str
) -> dict[str, Any]:
    return {
        "figure": name,
        "value": value,
        "baseline": baseline,
        "target": target,
        "met": met,
        "command": command,
        "meaning": meaning,
    }


def figures(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Each figure a target reads, beside its baseline from the same run, and whether it meets it."""
    from bench import cache, load, proxy_latency, recall
    from bench.formats import TARGET_COLD_OVER_PASS

    found = []
    proxy = raw["proxy_latency"]
    command = proxy["command"]
    rows = {(row["format"], row["window"]): row for row in proxy["rows"]}
    windows = list(proxy_latency.WINDOWS)
    for fmt, label in LABELS.items():
        mine = [rows[fmt, w] for w in windows]
        found.append(
            _figure(
                f"{label}: the plugin's hooks per request, p50 (p95), {proxy_latency.START} messages",
                " · ".join(
                    f"{w}: {r['hooks_p50_ms']:.1f} ({r['hooks_p95_ms']:.1f}) ms"
                    for w, r in zip(windows, mine, strict=True)
                ),
                "a request through the proxy without it: " + " · ".join(f"{r['without_ms']:.0f} ms" for r in mine),
                f"≤ {proxy_latency.TARGET_HOOKS_MS:.0f} ms p50",
                met=all(r["hooks_p50_ms"] <= proxy_latency.TARGET_HOOKS_MS for r in mine),
                command=command,
                meaning="time the proxy spends in the plugin on each request of a long agent loop",
            )
        )
    found.append(
        _figure(
            "latency the plugin adds (median of per-turn differences)",
            " · ".join(
                f"{label} " + " / ".join(f"{rows[fmt, w]['added_ms']:+.0f}" for w in windows) + " ms"
                for fmt, label in LABELS.items()
            ),
            "without it: "
            + " · ".join(" / ".join(f"{rows[fmt, w]['without_ms']:.0f}" for w in windows) + " ms" for fmt in LABELS),
            "reported",
            met=None,
            command=command,
            meaning=f"how much longer a client waits for each answer ({' / '.join(windows)}); a model takes seconds",
        )
    )
    loaded = raw["load"]
    found.append(
        _figure(
            "under load: p95 latency with the plugin / without",
            f"{loaded['p95_ratio']:.2f}{TIMES} ({loaded['with']['p95_ms']:.0f} ms)",
            f"p95 without it: {loaded['without']['p95_ms']:.0f} ms",
            f"≤ {load.TARGET_P95_RATIO:.2f}{TIMES}",
            met=loaded["p95_ratio"] <= load.TARGET_P95_RATIO,
            command=loaded["command"],
            meaning="how much slower the slowest requests get with many agent sessions at once",
        )
    )
    growth = loaded["last_round_growth_mib"]
    memory = loaded["with"]["memory_mib"]
    found.append(
        _figure(
            "under load: resident memory over the second round",
            f"{growth['with']:+.1f} MiB ({memory[-2]:.0f} → {memory[-1]:.0f} MiB)",
            f"without it: {growth['without']:+.1f} MiB",
            f"within {load.MEMORY_SLACK_MIB:.0f} MiB of the baseline",
            met=growth["with"] <= growth["without"] + load.MEMORY_SLACK_MIB,
            command=loaded["command"],
            meaning="the plugin's memory stays level: nothing grows with the sessions served",
        )
    )
    cold = {row["format"]: row for row in raw["formats"]["rows"] if row["messages"] == 400}
    found.append(
        _figure(
            "a cold pass / one tiktoken pass over the same text, 400 messages",
            " · ".join(f"{LABELS[fmt]} {row['cold_over_pass']:.2f}{TIMES}" for fmt, row in cold.items()),
            "one tiktoken pass: " + " · ".join(f"{row['tiktoken_ms']:.0f} ms" for row in cold.values()),
            f"≤ {TARGET_COLD_OVER_PASS:.0f}{TIMES}",
            met=all(row["cold_over_pass"] <= TARGET_COLD_OVER_PASS for row in cold.values()),
            command=raw["formats"]["command"],
            meaning="a history it has never seen (new session, restarted proxy) costs about one token count",
        )
    )
    cached = raw["cache"]
    stable = cached["modes"]["cache_stable"]["reuse"]
    found.append(
        _figure(
            f"prompt-cache reuse, cache_stable at {cached['window'] // 1000}k (each loop)",
            " · ".join(f"{r:.3f}" for r in stable),
            "literal rules: " + " · ".join(f"{r:.3f}" for r in cached["modes"]["literal"]["reuse"]),
            f"≥ {cache.TARGET_REUSE} each",
            met=all(r >= cache.TARGET_REUSE for r in stable),
            command=cached["command"],
            meaning="share of each request the provider can bill at its cache price",
        )
    )
    recalled = raw["recall"]
    found.append(
        _figure(
            f"action recall, {recalled['tasks']}-task conversations at {recalled['window'] // 1000}k",
            f"mean {recalled['recall_mean']:.3f}, lowest conversation {recalled['recall_min_conversation']:.3f}"
            f" (lowest request {recalled['recall_lowest_request']:.3f})",
            f"without the note: {recalled['without_note_mean']:.3f}",
            f"mean ≥ {recall.TARGET_MEAN}, none below {recall.TARGET_MIN}",
            met=recalled["recall_mean"] >= recall.TARGET_MEAN
            and recalled["recall_min_conversation"] >= recall.TARGET_MIN,
            command=recalled["command"],
            meaning="share of the agent's earlier calls it still sees, so it need not repeat them",
        )
    )
    return found


# ---- rendering ----------------------------------------------------------------------------------

VERDICT = {True: "yes", False: "**no**", None: "—"}


def render(results: dict[str, Any]) -> str:
    """The page's generated section (between `BEGIN` and `END`, which it includes)."""
    facts = results["machine"]
    lines = [
        BEGIN,
        "",
        f"Run of {results['date']}: `{results['command']}` at {facts['commit']}, {results['seconds'] / 60:.0f} min on "
        f"{facts['cpu_count']} CPUs (Python {facts['python']}, LiteLLM {facts['litellm']}; the machine's load "
        f"average over a minute {_first(facts.get('load_average_start'))} at the start, "
        f"{_first(facts['load_average'])} at the end).",
        "",
        "| figure | this run | baseline, same run | target | met | command | what it means for you |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in results["figures"]:
        cells = (
            f["figure"],
            f["value"],
            f["baseline"],
            f["target"],
            VERDICT[f["met"]],
            f"`{f['command']}`",
            f["meaning"],
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", END])


def _first(load: list[float] | None) -> str:
    return "unknown" if not load else f"{load[0]:.1f}"


def updated(page: str, section: str) -> str:
    """`page` with its generated section replaced by `section`."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + section + page[end:]


def committed_section(page: str) -> str:
    return page[page.index(BEGIN) : page.index(END) + len(END)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--render", action="store_true", help="judge bench/results.json again and render docs/benchmarks.md, no run"
    )
    args = parser.parse_args(argv)
    if args.render:  # judged again from the raw figures (a changed target or wording needs no new run)
        results = json.loads(RESULTS.read_text(encoding="utf-8"))
        results["figures"] = figures(results["benches"])
    else:
        results = run()
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    PAGE.write_text(updated(PAGE.read_text(encoding="utf-8"), render(results)), encoding="utf-8")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
