"""LiteLLM callbacks the proxy benchmarks load into the proxies they start: each measures something
inside the proxy and writes it, after every logged request, to ``$PROXY_PROBE_DIR/<pid>.<probe>.json``
(nothing when the variable is unset); `read` gives it back to the bench.

* ``bench.proxy_probes.collections`` (`bench/collector_proxy.py`): every run of the cyclic collector,
  its generation and duration (count, seconds, longest per generation), and the heap's objects;
* ``bench.proxy_probes.passes`` (`bench/proxy_latency.py`): the plugin's own measure of its passes,
  the ``litellm_governance_latency_seconds`` histogram's sum and count per format, from
  prometheus_client's registry in that process (empty without prometheus_client);
* ``bench.proxy_probes.hooks`` (`bench/proxy_latency.py`): every hook method of the plugin's callback
  (`GovernanceHook`'s coroutines), timed around it: seconds and calls per method (nothing in a proxy
  without the plugin, where none is called); and, under `WALKS`, the walks over a history the hooks
  make before governing it (`integration.fields.scan_history`, which they need only for a request
  whose size the proxy does not declare or whose compaction a deployment needs replaced).
* ``bench.proxy_probes.spin`` (`bench/proxy_latency.py`'s control proxy, without the plugin): a
  pre-call hook that spins on the CPU for as many microseconds as the request's `SPIN_HEADER` says,
  reading nothing else of the request (what a callback costs that takes that long and touches no
  memory); the seconds spun and the requests.

Each is made on first access (a module ``__getattr__``, as LiteLLM resolves the dotted path), so a
proxy that loads only ``passes`` does not time its collections.
"""

from __future__ import annotations

import functools
import gc
import inspect
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIR_ENV = "PROXY_PROBE_DIR"
FORMATS = ("chat", "anthropic", "responses")
#: The hooks probe's key for the hooks' walks over a history, next to its methods'.
WALKS = "scan_history"
#: The request header that tells the spin probe how long to spin (microseconds).
SPIN_HEADER = "x-bench-spin-us"


def _probe(name: str, snapshot: Callable[[], object], **hooks: Callable[..., Any]) -> Any:
    """A callback writing ``snapshot()`` after each logged request (LiteLLM imported only here: the
    benches import this module for `read`), with `hooks` as methods of its own."""
    from litellm.integrations.custom_logger import CustomLogger

    class Probe(CustomLogger):
        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            directory = os.environ.get(DIR_ENV)
            if directory:
                with open(os.path.join(directory, f"{os.getpid()}.{name}.json"), "w") as out:
                    json.dump(snapshot(), out)

    # One class name per probe: LiteLLM keeps one callback of a class name, so two probes of one
    # name would leave the second unregistered.
    Probe.__name__ = Probe.__qualname__ = f"{name.title()}Probe"
    for method, hook in hooks.items():  # on the class itself: LiteLLM calls a hook its class defines
        setattr(Probe, method, hook)
    return Probe()


def read(directory: Path, pid: int, probe: str) -> Any:
    """What `probe` last wrote in the proxy process `pid` (None: nothing yet)."""
    try:
        return json.loads((directory / f"{pid}.{probe}.json").read_text())
    except (OSError, ValueError):
        return None


def _collections() -> Any:
    runs: dict[int, list[float]] = {0: [0, 0.0, 0.0], 1: [0, 0.0, 0.0], 2: [0, 0.0, 0.0]}  # count, s, longest
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        spent = time.perf_counter() - started[0]
        found = runs[info["generation"]]
        found[0] += 1
        found[1] += spent
        found[2] = max(found[2], spent)

    gc.callbacks.append(timed)
    return _probe("collections", lambda: {"runs": runs, "objects": len(gc.get_objects())})


def _passes() -> Any:
    def snapshot() -> dict[str, list[float]]:
        try:
            from prometheus_client import REGISTRY
        except ImportError:
            return {}
        found = {}
        for fmt in FORMATS:
            total = REGISTRY.get_sample_value("litellm_governance_latency_seconds_sum", {"format": fmt})
            count = REGISTRY.get_sample_value("litellm_governance_latency_seconds_count", {"format": fmt})
            if total is not None and count is not None:
                found[fmt] = [total, count]
        return found

    return _probe("passes", snapshot)


def _hooks() -> Any:
    from litellm_governance.integration.hook import GovernanceHook

    spent: dict[str, list[float]] = {}  # method -> [seconds, calls]

    def timed(name: str, method: Any) -> Any:
        @functools.wraps(method)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                found = spent.setdefault(name, [0.0, 0])
                found[0] += time.perf_counter() - started
                found[1] += 1

        return wrapper

    for name, method in list(vars(GovernanceHook).items()):
        if name.startswith("async_") and inspect.iscoroutinefunction(method):  # not the streaming generator
            setattr(GovernanceHook, name, timed(name, method))
    from litellm_governance.integration import context_editing, fields, hook, passes

    scan = fields.scan_history

    @functools.wraps(scan)
    def walk(history: Any, fmt: Any) -> Any:
        started = time.perf_counter()
        try:
            return scan(history, fmt)
        finally:
            found = spent.setdefault(WALKS, [0.0, 0])
            found[0] += time.perf_counter() - started
            found[1] += 1

    for module in (fields, context_editing, hook, passes):  # wherever the plugin looks it up
        if hasattr(module, "scan_history"):
            module.scan_history = walk  # type: ignore[attr-defined]
    return _probe("hooks", lambda: spent)


def _spin() -> Any:
    spun = [0.0, 0]  # seconds, requests

    async def async_pre_call_hook(self: Any, user_api_key_dict: Any, cache: Any, data: Any, call_type: Any) -> None:
        started = time.perf_counter()
        headers = (data.get("proxy_server_request") or {}).get("headers") or {}
        wanted = next((v for k, v in headers.items() if k.lower() == SPIN_HEADER), None)
        until = started + int(wanted) / 1e6 if wanted and wanted.isdigit() else started
        while time.perf_counter() < until:
            pass
        spun[0] += time.perf_counter() - started
        spun[1] += 1

    return _probe("spin", lambda: spun, async_pre_call_hook=async_pre_call_hook)


_MADE: dict[str, Any] = {}
_MAKERS = {"collections": _collections, "passes": _passes, "hooks": _hooks, "spin": _spin}


def __getattr__(name: str) -> Any:
    if name not in _MAKERS:
        raise AttributeError(name)
    if name not in _MADE:
        _MADE[name] = _MAKERS[name]()
    return _MADE[name]
