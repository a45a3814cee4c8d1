"""Where a warm request's time goes, step by step (wall-clock timers, not a profiler).

    python bench/steps.py            # 400 messages, 21 repetitions per format
    python bench/steps.py --quick

The workload is `bench.formats`' (``openai/gpt-4o``, a 1M window, the session plus one new tool round
re-parsed from JSON, right after the session itself was governed). Each part of the pipeline is timed
with ``perf_counter`` around it (so, unlike cProfile's, the figures carry no per-call overhead):
reading the body, the repairs, shrinking (and, inside it, cataloguing results and laying out units),
the ledger, the role rules and rendering; *other* is the rest of the request (counting it first,
the report). Medians per part.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import gc
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from bench.formats import FORMATS, measures
from litellm_governance import _formats, _ledger, _pipeline, _stable
from litellm_governance._anthropic import AnthropicOutline
from litellm_governance._backfill import Backfill
from litellm_governance._ids import UniqueToolCallIds
from litellm_governance._orphans import DropOrphans
from litellm_governance._responses import ResponsesOutline
from litellm_governance._roles import EnforceRoles
from litellm_governance._snip import Layout

#: (owner, attribute, label, part of another part): what is timed.
PARTS: tuple[tuple[Any, str, str, bool], ...] = (
    (_formats.FormatSpec, "read", "read", False),
    (DropOrphans, "__call__", "repair: orphans", False),
    (Backfill, "__call__", "repair: backfill", False),
    (UniqueToolCallIds, "__call__", "repair: ids", False),
    (_pipeline, "shrink", "shrink", False),
    (_stable, "catalogue", "  of which: catalogue", True),
    (Layout, "of", "  of which: units", True),
    (_ledger.Ledger, "after_shrink", "ledger", False),
    (_ledger.Ledger, "after", "ledger", False),
    (EnforceRoles, "__call__", "role rules", False),
    (AnthropicOutline, "render", "render", False),
    (ResponsesOutline, "render", "render", False),
    (_formats.ChatOutline, "render", "render", False),
)


def instrument(spent: dict[str, float]) -> Callable[[], None]:
    """Wrap every part with a timer adding to `spent`; returns what undoes it."""
    undo = []
    for owner, name, label, _ in PARTS:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        function = getattr(owner, name)

        def timed(*args: Any, _function: Any = function, _label: str = label, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                spent[_label] += time.perf_counter() - started

        if isinstance(owner, type) and not isinstance(original, (classmethod, staticmethod)):
            setattr(owner, name, lambda self, *a, _timed=timed, **k: _timed(self, *a, **k))
        else:
            setattr(owner, name, timed)
        undo.append((owner, name, original))

    def restore() -> None:
        for owner, name, original in undo:
            setattr(owner, name, original)

    return restore


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 messages, 3 repetitions")
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--reps", type=int, default=21)
    args = parser.parse_args(argv)
    if args.quick:
        args.messages, args.reps = 100, 3
    labels = list(dict.fromkeys(label for _, _, label, _ in PARTS))
    nested = {label for _, _, label, inner in PARTS if inner}
    table: dict[str, dict[str, float]] = {}
    for fmt in FORMATS:
        warm = measures(fmt, args.messages)[0]["warm"]
        samples: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.reps):
            request = warm.setup() if warm.setup is not None else None  # governed untimed, uninstrumented
            spent: dict[str, float] = defaultdict(float)
            restore = instrument(spent)
            gc.collect()
            try:
                started = time.perf_counter()
                warm.fn(request)
                total = time.perf_counter() - started
            finally:
                restore()
            samples["total"].append(total)
            samples["other"].append(total - sum(v for k, v in spent.items() if k not in nested))
            for label in labels:
                samples[label].append(spent[label])
        table[fmt] = {label: statistics.median(values) for label, values in samples.items()}
    print(f"# A warm request, part by part (`python bench/steps.py{' --quick' if args.quick else ''}`)\n")
    print(f"{args.messages} messages, medians of {args.reps}, milliseconds (timers add a little to each part).\n")
    print("| part | " + " | ".join(FORMATS) + " |")
    print("|---|" + "---:|" * len(FORMATS))
    for label in [*labels, "other", "total"]:
        print(f"| {label} | " + " | ".join(f"{table[fmt][label] * 1000:.2f}" for fmt in FORMATS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
