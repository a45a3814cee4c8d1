"""The prompt cache on a translated route: a Claude Code or Codex session to GLM through a real LiteLLM proxy.

    python bench/translated_cache.py                    # seeds 5 1 2 3, a 64k window, 200 turns each
    python bench/translated_cache.py --client codex     # Codex (`/v1/responses`) instead of Claude Code
    python bench/translated_cache.py --quick            # one seed, 12 turns (the smoke test)
    PYTHONPATH=/path/to/an/older/checkout python bench/translated_cache.py   # the same, for that code

Starts a local upstream that emulates GLM (its count, its window, its usage) and one real
`litellm --config` proxy with the plugin, a GLM deployment of the given window (``cache_stable`` from
64k on), and sends it one growing Claude Code session per seed: `/v1/messages` bodies of 300, 302, …
messages (`bench.agent_shapes.claude_code_body`; with ``--client codex``, `/v1/responses` bodies of
as many items, `bench.agent_shapes.codex_body`), which LiteLLM translates to chat for GLM. So the
plugin governs each request twice (the pre-call pass on the client's body, the deployment pass on the
translated chat call), and learns the deployment's token ratio from GLM's usage as it goes.

Per seed it prints what the provider's prompt cache sees:

* **reuse**: the share of the previous request's messages GLM received again, unchanged, at the start
  of the next request (the mean over the turns; a cache hit is at most that prefix);
* **rewrites**: turns where less than 0.99 of it came again;
* **recuts**: turns where the deployment pass compacted or cut the translated request again (the
  proxy's INFO log lines of that pass);
* **ratio moves**: turns whose budget used another token ratio than the turn before (the header's
  ``ratio=``), and how many of the rewrites came on such a turn;
* **budget used**: the tokens GLM received over the budget (the header's figures), the mean over the
  turns that had to be cut.

The proxy process imports ``litellm_governance`` as this interpreter would (``PYTHONPATH`` first), so
pointing ``PYTHONPATH`` at a checkout of another commit measures that commit with the same sessions.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_shapes import claude_code_body, codex_body
from litellm_governance.testing import RecordingUpstream, start_proxy


def _prefix(before: list[Any], after: list[Any]) -> int:
    """How many of `before`'s messages `after` starts with."""
    same = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        same += 1
    return same


def session(
    window: int, first: int, turns: int, seed: int, *, calibrate: bool, client: str = "claude"
) -> dict[str, Any]:
    """One session's figures (module docstring)."""
    with RecordingUpstream(reply="ok", emulate="glm", window=window) as upstream:
        config = {
            "model_list": [
                {
                    "model_name": "glm",
                    "litellm_params": {"model": "zai/glm-4.6", "api_base": upstream.base_url, "api_key": "sk-local"},
                    "model_info": {"max_input_tokens": window},
                }
            ],
            "litellm_settings": {"num_retries": 0, "callbacks": ["litellm_governance.proxy_handler_instance"]},
            "callback_settings": {"governance": {"calibrate": calibrate}},
        }
        with tempfile.TemporaryDirectory() as tmp:
            proxy = start_proxy(config, workdir=Path(tmp))
            ratios: list[str] = []
            used: list[float] = []
            shape, route = (codex_body, "/v1/responses") if client == "codex" else (claude_code_body, "/v1/messages")
            try:
                for turn in range(turns):
                    body = shape(first + 2 * turn, seed=seed, model="glm")
                    status, headers, raw = proxy.post(route, body, timeout=180)
                    if status != 200:
                        raise SystemExit(f"turn {turn}: HTTP {status}: {raw[:300]!r}")
                    summary = headers.get("x-litellm-governance") or ""
                    found = re.search(r"ratio=([\d.]+)", summary)
                    ratios.append(found.group(1) if found else "")
                    after, budget = re.search(r"tokens=\d+->(\d+)", summary), re.search(r"budget=(\d+)", summary)
                    if "snipped=" in summary and after and budget:
                        used.append(int(after.group(1)) / int(budget.group(1)))
            finally:
                proxy.stop()
            log = (Path(tmp) / "proxy.log").read_text()
        bodies = [b["messages"] for b in upstream.bodies()]
    reuse = [_prefix(a, b) / len(a) for a, b in itertools.pairwise(bodies)]
    rewrites = [turn for turn, share in enumerate(reuse, start=1) if share < 0.99]
    moves = {turn for turn in range(1, len(ratios)) if ratios[turn] != ratios[turn - 1]}
    second = [line for line in log.splitlines() if "deployment]:" in line]
    return {
        "requests": len(bodies),
        "reuse": statistics.mean(reuse),
        "rewrites": len(rewrites),
        "recuts": sum("compacted=" in line or "snipped=" in line for line in second),
        "ratio moves": len(moves),
        "rewrites on a move": sum(turn in moves for turn in rewrites),
        "budget used": statistics.mean(used) if used else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window", type=int, default=65_536)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--first", type=int, default=300, help="messages in the first request")
    parser.add_argument("--seeds", type=int, nargs="+", default=[5, 1, 2, 3])
    parser.add_argument("--no-calibrate", action="store_true", help="calibrate: false")
    parser.add_argument("--client", choices=["claude", "codex"], default="claude")
    parser.add_argument("--quick", action="store_true", help="one seed, 12 turns")
    args = parser.parse_args(argv)
    seeds, turns = ([args.seeds[0]], 12) if args.quick else (args.seeds, args.turns)
    print("# The prompt cache on a translated route (`python bench/translated_cache.py`)\n")
    who = "Codex" if args.client == "codex" else "Claude Code"
    print(
        f"{who} to GLM through a real proxy: {args.window:,}-token window, {turns} turns from "
        f"{args.first} messages, calibrate {'off' if args.no_calibrate else 'on'}.\n"
    )
    columns = ["requests", "reuse", "rewrites", "recuts", "ratio moves", "rewrites on a move", "budget used"]
    print("| seed | " + " | ".join(columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    for seed in seeds:
        figures = session(args.window, args.first, turns, seed, calibrate=not args.no_calibrate, client=args.client)
        cells = [f"{figures[c]:.3f}" if isinstance(figures[c], float) else str(figures[c]) for c in columns]
        print(f"| {seed} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
