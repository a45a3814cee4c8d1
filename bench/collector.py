"""What Python's cyclic garbage collector costs the requests the plugin governs, in a proxy-sized heap.

    python bench/collector.py           # 400 requests per format and mode
    python bench/collector.py --quick

Each run is a fresh process that imports LiteLLM's proxy server (a heap of some 700,000 objects,
as in a running proxy), warms up on 20 requests of a growing agent session (400 messages and
more; the same request formats as ``bench/formats.py``), then parses and governs N requests,
cycling through them, with ``gc.callbacks`` timing every collection. Modes:

* ``parse only``: the request parsed from JSON and dropped (what the proxy does without the plugin);
* ``collector on``: parsed and governed with the collector left as it is;
* ``held off``: parsed and governed inside `collector_paused` (what the hook does).

Prints, per format and mode, the collections of each generation, the time they took, the longest
one, and the collector's time per request above *parse only*: what governing adds to the mean
request, all of it in the few requests that meet a full collection. The counts repeat from run to
run (the same allocations); wall times of separate processes do not (they differ by up to 2x on a
shared machine, so they are not compared here). Holding the collector off costs a pass two C calls
and a lock.
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
import subprocess
import time
from typing import Any

MODES = ("parse only", "collector on", "held off")
SESSION = 400
BODIES = 20


def child(fmt: str, mode: str, n: int, size: int = SESSION, proxy_heap: bool = True) -> dict[str, Any]:
    """One mode in this process: the collections over `n` requests."""
    if proxy_heap:
        import litellm.proxy.proxy_server  # noqa: F401 - a proxy-sized heap

    from bench.formats import CONFIG, FORMATS
    from bench.sessions import make_session, next_round
    from litellm_governance import govern_request
    from litellm_governance.integration.collector import collector_paused

    bodies, session = [], make_session(size, seed=0)
    for i in range(BODIES):
        session = next_round(session, seed=i)
        bodies.append(json.dumps(FORMATS[fmt](session)))
    for raw in bodies:
        govern_request(json.loads(raw), config=CONFIG)  # warm: the token cache holds the session
    collections = {g: [0, 0.0] for g in range(3)}
    started, longest = [0.0], [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            found = collections[info["generation"]]
            spent = time.perf_counter() - started[0]
            found[0] += 1
            found[1] += spent
            longest[0] = max(longest[0], spent)

    gc.collect()
    gc.callbacks.append(timed)
    for i in range(n):
        request = json.loads(bodies[i % len(bodies)])
        if mode == "collector on":
            govern_request(request, config=CONFIG)
        elif mode == "held off":
            with collector_paused():
                govern_request(request, config=CONFIG)
        del request
    gc.callbacks.remove(timed)
    return {
        "objects": len(gc.get_objects()),
        "collections": {str(g): collections[g] for g in collections},
        "longest": longest[0],
    }


def run_child(fmt: str, mode: str, n: int, size: int, proxy_heap: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", fmt, mode, str(n), "--session", str(size)]
    command += [] if proxy_heap else ["--plain-heap"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 requests per format and mode")
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--formats", default="chat,anthropic,responses")
    parser.add_argument("--session", type=int, default=SESSION, help="messages in the first request")
    parser.add_argument("--plain-heap", action="store_true", help="without LiteLLM's proxy server (smoke runs)")
    parser.add_argument("--modes", default=",".join(MODES), help="which of the modes to run (comma-separated)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        fmt, mode, n = args.child
        print(json.dumps(child(fmt, mode, int(n), args.session, not args.plain_heap)))
        return 0
    n = args.requests or (60 if args.quick else 400)
    print(f"# The collector and governed requests (`python bench/collector.py`), {n} requests per run\n")
    columns = "heap objects | gen 0 | gen 1 | gen 2 | longest | collector ms / request | above parse only"
    print(f"| format | mode | {columns} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for fmt in args.formats.split(","):
        modes = [mode for mode in MODES if mode in args.modes.split(",")]
        found = {mode: run_child(fmt, mode, n, args.session, not args.plain_heap) for mode in modes}
        per_request = {}
        for mode in modes:
            gens = found[mode]["collections"]
            per_request[mode] = 1000 * sum(g[1] for g in gens.values()) / n
        for mode in modes:
            row = found[mode]
            gens = row["collections"]
            cells = " | ".join(f"{gens[str(g)][0]} ({1000 * gens[str(g)][1]:.0f} ms)" for g in range(3))
            above = per_request[mode] - per_request.get("parse only", 0.0)
            print(
                f"| {fmt} | {mode} | {row['objects']:,} | {cells} | {1000 * row['longest']:.1f} ms | "
                f"{per_request[mode]:.2f} | {above:+.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
