"""A LiteLLM callback that reads the plugin's own measure of its passes in the proxy it is loaded
into (for `bench/proxy_latency.py`): the ``litellm_governance_latency_seconds`` histogram's sum and
count per format, from prometheus_client's registry in that process, written after each logged
request to ``$PASS_PROBE_DIR/<pid>.json`` (nothing when the directory is unset or the plugin records
no metrics)."""

from __future__ import annotations

import json
import os
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

FORMATS = ("chat", "anthropic", "responses")


def _passes() -> dict[str, list[float]]:
    """format -> [seconds, passes] so far (empty without prometheus_client)."""
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


class PassProbe(CustomLogger):
    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        directory = os.environ.get("PASS_PROBE_DIR")
        if directory:
            with open(os.path.join(directory, f"{os.getpid()}.json"), "w") as out:
                json.dump(_passes(), out)


handler = PassProbe()
