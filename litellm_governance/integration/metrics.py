"""Prometheus metrics (`SERIES`), registered with ``prometheus_client`` next to LiteLLM's own, so the
proxy's ``/metrics`` serves them when its ``prometheus`` callback is on, in multi-worker mode too
(``PROMETHEUS_MULTIPROC_DIR``). Labels are model groups and deployments (``provider/model``) only,
never users, keys or content; at most `MAX_LABEL_VALUES` values per label (later ones count as
``other``). Without ``prometheus_client`` nothing is recorded; recording never breaks a request."""

from __future__ import annotations

import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._config import GovernanceConfig
from .._steps import COMPACTED_SESSION, STAGES
from .failures import LogOnce, logger
from .fields import format_of, logged_report

#: A request's outcome: changed by governance, left as it was, not governed (disabled, or the client
#: opted out), governance failed and the request went through as it was, a configuration error, or a
#: compaction request the gateway answered (`session_compaction`).
OUTCOMES: Final = ("governed", "unchanged", "skipped", "failed_open", "config_error", COMPACTED_SESSION)
#: Latency buckets (seconds): a warm pass takes a few milliseconds, a cold 1,600-message one ~0.2 s.
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: Distinct values one label may take in one process; later ones are recorded as ``other``.
MAX_LABEL_VALUES: Final = 200
#: Characters of a label value kept.
MAX_LABEL_CHARS: Final = 100
# The environment variables that put prometheus_client in multi-process mode.
_MULTIPROC_ENV: Final = ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir")
# Client requests remembered as counted (by LiteLLM's trace id), and rejections (by call id).
_SEEN: Final = 10_000
_SKIPPED: Final = "metrics skipped (%s at %s): the request is not affected"


@dataclass(frozen=True)
class Series:
    """One exported metric: its name as Prometheus shows it, its type and labels."""

    name: str
    kind: str  # counter | gauge | histogram
    labels: tuple[str, ...]
    documentation: str

    def samples(self) -> tuple[str, ...]:
        """The sample names Prometheus shows for it (a histogram's buckets, sum and count)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


#: What the plugin exports.
SERIES: Final[tuple[Series, ...]] = (
    Series(
        "litellm_governance_requests_total",
        "counter",
        ("model_group", "format", "outcome"),
        "Requests seen by litellm-governance, by outcome: " + ", ".join(OUTCOMES) + ".",
    ),
    Series(
        "litellm_governance_tokens_removed_total",
        "counter",
        ("model_group", "step"),
        "Provider tokens removed from requests, by pipeline stage: " + ", ".join(s.name for s in STAGES) + ".",
    ),
    Series(
        "litellm_governance_over_budget_total",
        "counter",
        ("model_group",),
        "Requests still over their budget after governance (even the smallest valid request did not fit).",
    ),
    Series(
        "litellm_governance_max_output_lowered_total",
        "counter",
        ("model_group",),
        "Requests whose max output went out lowered so that the history keeps its share of the window.",
    ),
    Series(
        "litellm_governance_latency_seconds",
        "histogram",
        ("format",),
        "Time a governing pass took, in seconds.",
    ),
    Series(
        "litellm_governance_token_ratio",
        "gauge",
        ("deployment",),
        "Provider tokens per tiktoken token the last pass for this deployment budgeted with.",
    ),
    Series(
        "litellm_governance_provider_context_rejections_total",
        "counter",
        ("deployment",),
        "Context-length rejections by the provider (the request was too long for it).",
    ),
)


def deployment_label(model: object, provider: object = None) -> str:
    """A deployment as metrics name it: LiteLLM's ``provider/model``."""
    name = model if isinstance(model, str) and model else "unknown"
    if isinstance(provider, str) and provider and not name.startswith(provider + "/"):
        return f"{provider}/{name}"
    return name


def outcome_of(entry: Mapping[str, Any]) -> str:
    """The outcome a recorded report entry stands for (see `OUTCOMES`)."""
    if entry.get("config_error") is not None:
        return "config_error"
    if entry.get("skipped"):
        return "skipped" if entry.get("reason") == "disabled" else "failed_open"
    steps = entry.get("steps")
    if isinstance(steps, Mapping) and steps.get(COMPACTED_SESSION):
        return COMPACTED_SESSION  # (the outcome has its step's name)
    return "governed" if entry.get("changed") else "unchanged"


class _Labels:
    """Bounded label values: the first `MAX_LABEL_VALUES` distinct ones of a label, then ``other``."""

    def __init__(self) -> None:
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, label: str, value: object) -> str:
        text = value[:MAX_LABEL_CHARS] if isinstance(value, str) and value else "unknown"
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if text not in seen and len(seen) >= MAX_LABEL_VALUES:
                return "other"
            seen.add(text)
            return text


class _Once:
    """Keys seen lately (bounded): whether a key is new."""

    def __init__(self) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first(self, key: str) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._keys[key] = None
            while len(self._keys) > _SEEN:
                self._keys.popitem(last=False)
            return True


class Metrics:
    """The plugin's metrics in one registry (``prometheus_client``'s default one unless given).
    ``available`` is False, and every method does nothing, without ``prometheus_client``."""

    def __init__(self, registry: Any = None) -> None:
        try:
            client: Any = importlib.import_module("prometheus_client")
        except ImportError:
            client = None
        self.available = client is not None
        self.multiprocess = any(os.environ.get(name) for name in _MULTIPROC_ENV)  # (either spelling)
        self._labels = _Labels()
        self._requests_seen = _Once()
        self._rejections_seen = _Once()
        self._failures = LogOnce(logger)
        if client is None:
            return
        target = registry if registry is not None else client.REGISTRY
        by_name = {s.name: s for s in SERIES}

        def make(kind: Any, name: str, **extra: Any) -> Any:
            found = by_name[name]  # (prometheus_client adds ``_total`` to a counter's name itself)
            return kind(found.name.removesuffix("_total"), found.documentation, found.labels, registry=target, **extra)

        self._requests = make(client.Counter, "litellm_governance_requests_total")
        self._tokens = make(client.Counter, "litellm_governance_tokens_removed_total")
        self._over_budget = make(client.Counter, "litellm_governance_over_budget_total")
        self._lowered = make(client.Counter, "litellm_governance_max_output_lowered_total")
        self._rejections = make(client.Counter, "litellm_governance_provider_context_rejections_total")
        self._latency = make(client.Histogram, "litellm_governance_latency_seconds", buckets=BUCKETS)
        # Several workers each know a ratio per deployment: the one set last is the one in use.
        self._ratio = make(client.Gauge, "litellm_governance_token_ratio", multiprocess_mode="mostrecent")

    def describe(self) -> str:
        """For the start-up line: whether metrics are recorded, and how they are served."""
        if not self.available:
            return "metrics: off (prometheus_client is not installed)"
        mode = " (multi-process)" if self.multiprocess else ""
        return f'metrics: litellm_governance_* recorded{mode}, served on /metrics when callbacks include "prometheus"'

    def logged(self, kwargs: Mapping[str, Any], config_of: Callable[[], GovernanceConfig]) -> None:
        """A request was logged (success or failure): count it once, with its final report."""
        if self.available:
            with self._failures.guard(_SKIPPED):
                self._logged(kwargs, config_of)

    def governed_pass(self, fmt: str, seconds: float, deployment: str | None, ratio: float | None) -> None:
        """A pass governed a request (or failed to) in `seconds`, for `deployment` at `ratio`."""
        if self.available:
            with self._failures.guard(_SKIPPED):
                self._latency.labels(fmt).observe(seconds)
                if deployment is not None and ratio is not None:
                    self._ratio.labels(self._labels("deployment", deployment)).set(ratio)

    def context_rejection(self, call_id: str | None, deployment: str) -> None:
        """A provider rejected a request for its length (counted once per call, whichever hook saw it)."""
        if self.available and (call_id is None or self._rejections_seen.first(call_id)):
            with self._failures.guard(_SKIPPED):
                self._rejections.labels(self._labels("deployment", deployment)).inc()

    def _logged(self, kwargs: Mapping[str, Any], config_of: Callable[[], GovernanceConfig]) -> None:
        payload = kwargs.get("standard_logging_object")
        payload = payload if isinstance(payload, Mapping) else {}
        fmt = format_of(payload.get("call_type") or kwargs.get("call_type"))
        if fmt is None:
            return  # not a request governance reads (embeddings, /v1/completions ...)
        entry = logged_report(payload, kwargs)
        entry = entry if entry is not None else _disabled(config_of)
        request = payload.get("trace_id") or kwargs.get("litellm_trace_id") or kwargs.get("litellm_call_id")
        if entry is None or (isinstance(request, str) and request and not self._requests_seen.first(request)):
            return  # governed elsewhere (a translated inner call), or a retry or fallback already counted
        group = self._labels("model_group", payload.get("model_group") or kwargs.get("model"))
        report_format = entry.get("format")
        self._requests.labels(group, report_format if isinstance(report_format, str) else fmt, outcome_of(entry)).inc()
        removed = entry.get("tokens_removed")
        for stage, tokens in removed.items() if isinstance(removed, Mapping) else ():
            if isinstance(tokens, int) and tokens > 0 and isinstance(stage, str):
                self._tokens.labels(group, self._labels("step", stage)).inc(tokens)
        if entry.get("over_budget") is True:
            self._over_budget.labels(group).inc()
        if isinstance(entry.get("max_output_lowered_from"), int):
            self._lowered.labels(group).inc()


def _disabled(config_of: Callable[[], GovernanceConfig]) -> Mapping[str, Any] | None:
    """The entry of a request without a report: ``skipped`` when the operator turned governance off,
    else None (governed elsewhere, or not at all: not counted). A broken config reports itself."""
    try:
        enabled = config_of().enabled
    except Exception:  # noqa: BLE001 - a broken config reports itself on the request
        return None
    return None if enabled else {"skipped": True, "reason": "disabled"}


_built: list[Metrics] = []
_build_lock = threading.Lock()


def metrics() -> Metrics:
    """The process's metrics, on ``prometheus_client``'s default registry (built on first use, once:
    every hook of the process shares them)."""
    with _build_lock:
        if not _built:
            _built.append(Metrics())
    return _built[0]
