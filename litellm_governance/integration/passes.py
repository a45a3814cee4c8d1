"""One governance pass over a request, and the state linking the proxy's two passes: the pre-call
pass (the model group, before routing) and the deployment pass (after it, again on each fallback),
which returns at once when the same history was already governed for the same target."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

from .._config import GovernanceConfig
from .._errors import ConfigError, InvalidRequestError
from .._models import Deployment
from .._report import GovernanceReport
from .._request import Format, GovernedRequest, govern_request
from .failures import Failures, LogOnce, logger
from .fields import HISTORY, call_id_of, client_format, history_chars, metadata_key, record
from .learning import Learning, Ratio
from .metrics import deployment_label, metrics
from .overrides import bounded_window, request_overrides
from .routing import known_window
from .summaries import SUMMARY_MARKER, Summaries, attribution, summary_scope

#: Which pass: the proxy's, before routing, or the deployment hook's (proxy, SDK, Router).
Stage = Literal["pre_call", "deployment"]

#: Requests with more text than this are governed in a worker thread (tokenizing ~1 MB takes ~0.1 s).
OFF_LOOP_CHARS: Final = 500_000
# What a pass records for a request that opted out (``metadata.governance.disable``, where allowed).
_DISABLED: Final = {"skipped": True, "reason": "disabled", "changed": False, "summary": "skipped (disabled)"}
#: Private state in the request metadata (LiteLLM's logging payload does not keep it): what the
#: last pass governed, so an identical second pass is skipped, and the pre-call pass's report.
STATE_KEY: Final = "_governance_state"
#: The report's note on the call LiteLLM made of a client's /v1/messages or /v1/responses request for
#: a deployment that takes another format: governed there, once, as the deployment receives it.
TRANSLATED_NOTE: Final = "translated by LiteLLM for its deployment: governed once, as the deployment receives it"
# Deployments whose budget was 0 (warned about once each).
_no_budget = LogOnce(logger)


@dataclass(frozen=True)
class PassState:
    """What the last pass over a request governed: the history, for which target, with which config
    and learned ratio (None: the profile's)."""

    history_id: int
    target_key: object
    config: GovernanceConfig
    pre_call_report: GovernanceReport | None
    token_ratio: float | None = None

    def matches(self, history: object, target: Deployment, config: GovernanceConfig, ratio: float | None) -> bool:
        """Whether governing `history` for `target` now would repeat that pass (id() is safe: the list
        is alive in the very request this state belongs to)."""
        now = (id(history), target.key(), config, ratio)
        return now == (self.history_id, self.target_key, self.config, self.token_ratio)


@dataclass(frozen=True)
class Helpers:
    """What a pass uses besides the request: calibration, failure reporting, summaries."""

    learning: Learning
    failures: Failures
    summaries: Summaries | None = None


async def run_pass(
    request: dict[str, Any],
    stage: Stage,
    fmt: Format,
    config: GovernanceConfig,
    *,
    target_of: Callable[[], Deployment],
    helpers: Helpers,
) -> dict[str, Any] | None:
    """Govern `request` (in format `fmt`) for the deployment `target_of` names: the governed request,
    or None when it goes on unchanged. Fails open (or closed: see `Failures`)."""
    metadata = request.get(metadata_key(request, fmt))
    if isinstance(metadata, dict) and metadata.get(SUMMARY_MARKER):
        return None  # the plugin's own summary request: nothing to govern
    state = metadata.get(STATE_KEY) if isinstance(metadata, dict) else None
    previous = state if isinstance(state, PassState) else None
    target: Deployment | None = None
    started = time.perf_counter()
    try:
        config, client_window, notes = request_overrides(config, metadata)
        if not config.enabled:
            record(request, fmt, {**_DISABLED, "format": fmt, "stage": stage})
            return None
        target = target_of()
        if client_window is not None:
            config = bounded_window(config, client_window, known_window(config, target))
        ratio = await helpers.learning.ratio(target, request, config) if config.calibrate else None
        if previous is not None and previous.matches(request.get(HISTORY[fmt]), target, config, _value(ratio)):
            # The proxy's pre-call pass already fitted this history to this target.
            if ratio is not None and previous.pre_call_report is not None:
                helpers.learning.remember_sent(request, fmt, ratio.key, previous.pre_call_report, replace=False)
            return None
        helpers.learning.store.forget(call_id_of(request))
        scope = _summary_scope(config, target, metadata)
        summaries = helpers.summaries.ready_for(scope) if helpers.summaries and scope else None
        governed = await _govern(request, fmt, config, target, ratio=ratio, summaries=summaries)
    except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
        raise
    except BaseException as exc:  # noqa: BLE001 - fail-open is the contract (and Rust panics are BaseExceptions)
        metrics().governed_pass(fmt, time.perf_counter() - started, None, None)
        _failed(request, fmt, stage, exc, config=config, target=target, failures=helpers.failures)
        return None
    label = deployment_label(target.model, target.provider)
    metrics().governed_pass(fmt, time.perf_counter() - started, label, governed.report.token_ratio)
    client = client_format(request, fmt)  # the report says the client's format, as sent
    notes += [TRANSLATED_NOTE] if client != fmt else []
    report = replace(governed.report, notes=(*governed.report.notes, *notes), format=client)
    log_report(report, stage)
    updated = _record(request, stage, fmt, report=report, governed=governed, previous=previous)
    if stage == "pre_call" or previous is not None:  # only the proxy runs two passes: its state stays there
        first = report if stage == "pre_call" else previous.pre_call_report if previous is not None else None
        _keep(updated, fmt, PassState(id(updated.get(HISTORY[fmt])), target.key(), config, first, _value(ratio)))
    if ratio is not None:
        helpers.learning.remember_sent(updated, fmt, ratio.key, report)
    if helpers.summaries is not None and scope and config.summary_model and governed.cut and report.cache_stable:
        tokens = max(100, min(2_000, (report.budget or 0) // 10 - 60))  # the note's share of the budget
        caller = attribution(metadata) if isinstance(metadata, Mapping) else {}
        helpers.summaries.schedule(governed.cut, config.summary_model, tokens, scope=scope, caller=caller)
    return updated if updated is not request else None


def _value(ratio: Ratio | None) -> float | None:
    return ratio.value if ratio is not None else None


def log_report(report: GovernanceReport, stage: str) -> None:
    """The one INFO line for a changed request (figures only), and a WARNING, once per deployment, when
    nothing of the window was left for the history (a max output the operator let the client keep)."""
    if report.budget == 0 and report.context_window:
        _no_budget.log(
            report.model,
            logging.WARNING,
            "no budget left for the history of requests to %s: max output %d of a %d-token window "
            "(set max_output_share, or fit_max_output: true)",
            report.model,
            report.max_output_tokens,
            report.context_window,
        )
    if report.changed:
        logger.info(
            "governed %s [%s, %s, %s]: %s", report.model, report.format, report.profile, stage, report.summary()
        )


def _failed(
    request: dict[str, Any],
    fmt: Format,
    stage: Stage,
    exc: BaseException,
    *,
    config: GovernanceConfig,
    target: Deployment | None,
    failures: Failures,
) -> None:
    """Report a pass that failed: a configuration error as one, a request no provider takes as the
    client's, anything else as an internal failure (open, or closed where the operator said so)."""
    if isinstance(exc, ConfigError):
        where = target.describe() if target is not None else "the request"
        error = ConfigError(f"{where}: {exc.redacted}")
        failures.config_error(request, fmt, stage, error, fail_closed=config.fail_closed)
    else:
        client = isinstance(exc, InvalidRequestError)
        failures.failed(request, fmt, stage, exc, fail_closed=config.fail_closed, client=client)


def _record(
    request: dict[str, Any],
    stage: Stage,
    fmt: Format,
    *,
    report: GovernanceReport,
    governed: GovernedRequest,
    previous: PassState | None,
) -> dict[str, Any]:
    """Record the report (after a pre-call pass, its report and this one as one); the request that goes on."""
    first = previous.pre_call_report if previous is not None and stage == "deployment" else None
    combined = first.then(report) if first is not None else report
    record(request, fmt, {**combined.to_dict(), "summary": combined.summary(), "stage": stage})
    return governed.request if report.changed else request


def _keep(request: dict[str, Any], fmt: Format, state: PassState) -> None:
    metadata = request.get(metadata_key(request, fmt))
    if isinstance(metadata, dict):
        metadata[STATE_KEY] = state


def _summary_scope(config: GovernanceConfig, target: Deployment, metadata: object) -> str | None:
    """The scope of the request's summaries (`summaries.summary_scope`); None without a summary model."""
    if not config.summary_model:
        return None
    caller = metadata if isinstance(metadata, Mapping) else {}
    return summary_scope(
        summary_model=config.summary_model, deployment=target.key(), metadata=caller, sharing=config.summary_sharing
    )


async def _govern(
    request: dict[str, Any],
    fmt: Format,
    config: GovernanceConfig,
    target: Deployment,
    *,
    ratio: Ratio | None,
    summaries: Mapping[str, str] | None,
) -> GovernedRequest:
    run = functools.partial(
        govern_request,
        request,
        format=fmt,
        config=config,
        model=target.model,
        provider=target.provider,
        model_info=target.model_info,
        token_ratio=_value(ratio),
        ratio_source=ratio.source if ratio is not None else None,
        summaries=summaries,
    )
    # Big requests are governed off the event loop, so other requests are not held up.
    return await asyncio.to_thread(run) if history_chars(request.get(HISTORY[fmt])) > OFF_LOOP_CHARS else run()
