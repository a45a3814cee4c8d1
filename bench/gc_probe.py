"""A LiteLLM callback that counts the cyclic collector's runs in the proxy it is loaded into (for
`bench/collector_proxy.py`): every collection's generation and duration, written after each
logged request to ``$GC_PROBE_DIR/<pid>.json``."""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

_runs: dict[int, list[float]] = {0: [0, 0.0, 0.0], 1: [0, 0.0, 0.0], 2: [0, 0.0, 0.0]}  # count, seconds, longest
_started = [0.0]


def _timed(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    spent = time.perf_counter() - _started[0]
    found = _runs[info["generation"]]
    found[0] += 1
    found[1] += spent
    found[2] = max(found[2], spent)


gc.callbacks.append(_timed)


class GcProbe(CustomLogger):
    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        directory = os.environ.get("GC_PROBE_DIR")
        if directory:
            with open(os.path.join(directory, f"{os.getpid()}.json"), "w") as out:
                json.dump({"runs": _runs, "objects": len(gc.get_objects())}, out)


handler = GcProbe()
