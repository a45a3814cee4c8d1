"""Before/after in one process: `govern_request` of an earlier commit against the working tree,
cold and warm per format, interleaved (`bench.speed.interleave`), so that a shared machine's load
falls on both alike.

    python bench/ab.py --against f6b7324            # 400 messages, 1M window
    python bench/ab.py --against f6b7324 --messages 1600 --window 32768

The earlier commit's package is taken with ``git archive`` into a temporary folder and imported
under another name (``litellm_governance_before``); the workload and the tiktoken pass are those of
`bench.formats`. Reported per format: the pass, cold and warm before and after, cold / pass,
warm / cold, and warm after / before (of the medians, and of the fastest repetitions: on a loaded
machine the least disturbed run of each says more than a median).

    python bench/ab.py --against ceed9cf --check    # identical output, no timing

``--check`` times nothing: it asserts that both commits write the same request body (as JSON) and
the same report, per format, cold and warm, at windows of 1M, 128k, 32k and 16k tokens, and over a
few growing sessions, so that a speed-up cannot change a byte the provider's prompt cache reads.
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
import re
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
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


def measures(packages: dict[str, ModuleType], n: int, window: int) -> dict[tuple[str, str], Any]:
    found: dict[tuple[str, str], Any] = {}
    for fmt, make in formats.FORMATS.items():
        session = make_session(n, seed=0)
        body, after = make(session), make(next_round(session, seed=0))
        found[(fmt, "pass")], _ = speed.tiktoken_pass(formats.MODEL, formats.strings(body))
        for name, package in packages.items():
            config = package.GovernanceConfig(context_window_tokens=window)
            cache = importlib.import_module(f"{package.__name__}._pipeline").token_cache(config.token_cache_size)

            def cold_setup(cache: Any = cache, body: Any = body) -> Any:
                cache.clear()
                return body

            def warm_setup(
                cache: Any = cache, package: Any = package, config: Any = config, body: Any = body, after: Any = after
            ) -> Any:
                cache.clear()
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
                    importlib.import_module(f"{package.__name__}._pipeline").token_cache(
                        config.token_cache_size
                    ).clear()
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--against", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--window", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--check", action="store_true", help="assert identical output instead of timing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        packages = {"before": load_before(args.against, Path(tmp)), "after": litellm_governance}
        if args.check:
            return check(packages, args.messages)
        timed = speed.interleave(measures(packages, args.messages, args.window), reps=args.reps)
    med = {key: statistics.median(values) for key, values in timed.items()}
    low = {key: min(values) for key, values in timed.items()}  # the least disturbed repetition
    print(
        f"# `{args.against}` against the working tree: {args.messages} messages, {args.window:,}-token window, "
        f"medians of {args.reps} interleaved\n"
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
