"""The probe `bench/proxy_latency.py` loads into both of its proxies (``bench.proxy_probes.hooks``
in ``litellm_settings.callbacks``): every hook method of the plugin's callback (`GovernanceHook`)
timed around it, added up per request, in the proxy. It writes the list of those per-request times
(seconds, in the order the requests came) to ``$PROXY_PROBE_DIR/<pid>.json`` after each logged
request; `read` gives it back. In the proxy without the plugin the list stays empty.

Only the hooks a response waits for are counted: the log events (`AFTER_RESPONSE`) run after the
response has gone. A request's hooks are told apart by a context variable: LiteLLM serves each
request in a task of its own, and its first hook (the pre-call hook) opens the request's entry,
which the hooks after it (in that task, or in tasks it starts) add to.

The probe is made on first access (a module ``__getattr__``, as LiteLLM resolves the dotted path),
so importing this module for `read` imports neither LiteLLM nor the plugin.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import os
import time
from pathlib import Path
from typing import Any

DIR_ENV = "PROXY_PROBE_DIR"
#: The plugin's hook methods that run after the response has gone (LiteLLM's logging task).
AFTER_RESPONSE = frozenset({"async_log_success_event", "async_log_failure_event"})

#: The current request's seconds in the plugin's hooks (a one-item list, shared with the tasks it starts).
_REQUEST: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("bench_probe_request", default=None)
#: Every request's, in the order their first hook ran.
_REQUESTS: list[list[float]] = []


def read(directory: Path, pid: int) -> list[float]:
    """The seconds the proxy process `pid` has spent in the plugin's hooks per request so far."""
    try:
        return [float(seconds) for seconds in json.loads((directory / f"{pid}.json").read_text())]
    except (OSError, ValueError):
        return []


def _timed(method: Any) -> Any:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        finally:
            spent = _REQUEST.get()
            if spent is None:
                spent = [0.0]
                _REQUEST.set(spent)
                _REQUESTS.append(spent)
            spent[0] += time.perf_counter() - started

    return wrapper


def _hooks() -> Any:
    from litellm.integrations.custom_logger import CustomLogger

    from litellm_governance import GovernanceHook

    for cls in GovernanceHook.__mro__:  # the plugin's own hook methods, each on the class that defines it
        if cls.__module__.startswith("litellm_governance"):
            for name, method in list(vars(cls).items()):
                if name.startswith("async_") and name not in AFTER_RESPONSE and inspect.iscoroutinefunction(method):
                    setattr(cls, name, _timed(method))

    class HooksProbe(CustomLogger):
        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            directory = os.environ.get(DIR_ENV)
            if directory:
                path = Path(directory) / f"{os.getpid()}.json"
                path.with_suffix(".tmp").write_text(json.dumps([spent[0] for spent in _REQUESTS]))
                path.with_suffix(".tmp").replace(path)  # whole, never half-written

    return HooksProbe()


_MADE: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    if name != "hooks":
        raise AttributeError(name)
    if name not in _MADE:
        _MADE[name] = _hooks()
    return _MADE[name]
