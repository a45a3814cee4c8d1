"""One governance pass over a request, and the state linking the proxy's two passes: the pre-call
pass (the model group, before routing) and the deployment pass (after it, again on each fallback),
which returns at once when the same history was already governed for the same target."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from .._config import GovernanceConfig
from .._errors import ConfigError, InvalidRequestError
from .._models import Deployment, resolve_model
from .._report import GovernanceReport
from .._request import Format, GovernedRequest, govern_request, max_output_tokens
from .failures import Failures
from .fields import HISTORY, HistoryFacts, call_id_of, metadata_key
from .learning import Learning, Ratio
from .metrics import deployment_label, metrics
from .overrides import bounded_window, request_overrides
from .reporting import log_report, record, with_notes
from .summaries import SUMMARY_MARKER, Summaries, attribution, summary_scope
from .translation import Translations, budgeted

__all__ = ["OFF_LOOP_BYTES", "OFF_LOOP_CHARS", "STATE_KEY", "PassState", "Stage", "known_plain", "run_pass"]

#: Which pass: the proxy's, before routing, or the deployment hook's (proxy, SDK, Router).
Stage = Literal["pre_call", "deployment"]

#: Requests with more text than this are governed in a worker thread (tokenizing ~1 MB takes ~0.1 s).
OFF_LOOP_CHARS: Final = 500_000
#: The same in a proxy, where the body's length is known without a walk (`fields.declared_size`): a
#: body's bytes are 1.4-2.4 times its history's characters (JSON's syntax and the tools' schemas
#: around the texts; measured on `bench.formats`' bodies), so twice as many.
OFF_LOOP_BYTES: Final = 2 * OFF_LOOP_CHARS
# What a pass records for a request that opted out (``metadata.governance.disable``, where allowed).
_DISABLED: Final = {"skipped": True, "reason": "disabled", "changed": False, "summary": "skipped (disabled)"}
#: Private state in the request metadata (LiteLLM's logging payload does not keep it): what the
#: last pass governed, so an identical second pass is skipped, and the pre-call pass's report.
STATE_KEY: Final = "_governance_state"


@dataclass(frozen=True)
class PassState:
    """What the last pass over a request governed: the history, for which target, with which config."""

    history_id: int
    target_key: object
    config: GovernanceConfig
    pre_call_report: GovernanceReport | None
    #: The learned ratio the pass used (None: the profile's).
    token_ratio: float | None = None
    #: Whether that history may hold compaction blocks or items (False when it was looked at and holds
    #: none: governing never adds one), so that the next hook's context editing need not look again.
    compaction: bool = True

    def __deepcopy__(self, memo: dict[int, object]) -> PassState:
        """Itself: nothing in it changes after the pass (a frozen config and report). LiteLLM deep-copies
        a request's metadata, where it sits, on every request (the router's snapshot for a fallback,
        `safe_deep_copy`): copying the config and the report took some 80 microseconds a request."""
        return self

    def matches(
        self, history: object, target: Deployment, config: GovernanceConfig, token_ratio: float | None = None
    ) -> bool:
        """Whether governing `history` for `target` now would repeat that pass."""
        # id() is safe here: the list is alive in the very request this state belongs to.
        return (
            id(history) == self.history_id
            and target.key() == self.target_key
            and config == self.config
            and token_ratio == self.token_ratio
        )


def _state(request: Mapping[str, Any], fmt: Format) -> PassState | None:
    """The state the proxy's previous pass left in `request`'s metadata, if any."""
    metadata = request.get(metadata_key(request, fmt))
    state = metadata.get(STATE_KEY) if isinstance(metadata, dict) else None
    return state if isinstance(state, PassState) else None


def known_plain(request: Mapping[str, Any], fmt: Format) -> bool:
    """Whether `request`'s history is the one the proxy's previous pass governed, and holds no
    compaction block or item (then the deployment hook need not scan it again)."""
    state = _state(request, fmt)
    # id() is safe here: the list is alive in the very request this state belongs to.
    return state is not None and not state.compaction and id(request.get(HISTORY[fmt])) == state.history_id


async def run_pass(
    request: dict[str, Any],
    stage: Stage,
    fmt: Format,
    config: GovernanceConfig,
    target_of: Callable[[], Deployment],
    *,
    learning: Learning,
    failures: Failures,
    summaries: Summaries | None = None,
    facts: HistoryFacts | None = None,
    translations: Translations | None = None,
) -> dict[str, Any] | None:
    """Govern `request` (in format `fmt`) for the deployment `target_of` names: the governed request,
    or None when it goes on unchanged. Fails open (or closed: see `Failures`). `facts` are what the
    hook knows of the request's history (`fields.HistoryFacts`; None: nothing yet);
    `translations` what LiteLLM's translation adds to requests, learned on translated routes."""
    home = metadata_key(request, fmt)
    metadata = request.get(home)
    if isinstance(metadata, dict) and metadata.get(SUMMARY_MARKER):
        return None  # the plugin's own summary request: nothing to govern
    previous = _state(request, fmt)
    # Only the proxy runs two passes; only there is the pass state kept (in the proxy's own
    # request dict). The report itself is plain JSON, written into the request's metadata,
    # which LiteLLM's logging payload reads (LiteLLM writes its own keys there too).
    in_proxy = stage == "pre_call" or previous is not None
    history = request.get(HISTORY[fmt])
    target: Deployment | None = None
    # Calibration: the deployment's learned ratio, and what to remember until its provider answers.
    ratio: Ratio | None = None
    started = time.perf_counter()
    try:
        config, client_window, notes = request_overrides(config, metadata)
        if not config.enabled:
            record(request, fmt, {**_DISABLED, "format": fmt, "stage": stage})
            return None
        target = target_of()
        if client_window is not None:
            config = bounded_window(config, client_window, _known_window(config, target))
        window = _known_window(config, target)
        if config.calibrate:
            ratio = await learning.ratio(target, request, held=config.stable_for(window))
        token_ratio = ratio.value if ratio is not None else None
        call_id = call_id_of(request)
        if previous is not None and previous.matches(history, target, config, token_ratio):
            # The proxy's pre-call pass already fitted this history to this target: what it
            # estimated is what is sent (remembered here too, for a pre-call pass without a call id).
            if ratio is not None and previous.pre_call_report is not None:
                learning.remember_sent(request, fmt, call_id, ratio.key, previous.pre_call_report, replace=False)
            return None
        learning.forget(call_id)
        scope = _summary_scope(config, target, metadata)
        ready = summaries.ready_for(scope) if summaries is not None and scope is not None else None
        if facts is None:
            facts = HistoryFacts(history, fmt)
        big = facts.big(OFF_LOOP_CHARS, OFF_LOOP_BYTES)
        fitted = config
        if translations is not None and config.calibrate and stage == "pre_call" and fmt != "chat":
            # On a route LiteLLM translates, fit what the provider will receive (`translation`).
            factor = await translations.lookup((fmt, target.key()))
            if factor is not None and window is not None:
                fitted, note = _for_translation(config, window, request, fmt, factor)
                notes.extend(note)
        governed = await _govern(request, fmt, fitted, target, ratio, summaries=ready, big=big)
    except ConfigError as exc:
        where = target.describe() if target is not None else "the request"
        error = ConfigError(f"{where}: {exc.redacted}")
        metrics().governed_pass(fmt, time.perf_counter() - started, None, None)
        failures.config_error(request, fmt, stage, error, fail_closed=config.fail_closed)
        return None
    except InvalidRequestError as exc:
        metrics().governed_pass(fmt, time.perf_counter() - started, None, None)
        failures.failed(request, fmt, stage, exc, fail_closed=config.fail_closed, client_error=True)
        return None
    except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
        raise
    except BaseException as exc:  # noqa: BLE001 - fail-open is the contract (and Rust panics are BaseExceptions)
        metrics().governed_pass(fmt, time.perf_counter() - started, None, None)
        failures.failed(request, fmt, stage, exc, fail_closed=config.fail_closed)
        return None

    metrics().governed_pass(
        fmt, time.perf_counter() - started, deployment_label(target.model, target.provider), governed.report.token_ratio
    )
    report = with_notes(governed.report, notes)
    log_report(report, stage)
    # The pre-call pass's report stays the start of the story: a deployment pass (again on each
    # fallback) runs on the pre-call output, and the report covers both.
    first = previous.pre_call_report if previous is not None and stage == "deployment" else None
    combined = first.then(report) if first is not None else report
    if first is not None and first.format != report.format:
        combined = with_notes(combined, [_translated_note(first, report)])
        if translations is not None and config.calibrate and previous is not None:
            translations.observe(
                (first.format, previous.target_key),
                first.estimated_tokens,
                report.tokens_before / report.token_ratio,
                budget=first.budget,
                sent_tokens=first.tokens_after,
            )
    record(request, fmt, {**combined.to_dict(), "summary": combined.summary(), "stage": stage})
    updated = governed.request if report.changed else request
    if in_proxy and isinstance(updated.get(home), dict):
        updated[home][STATE_KEY] = PassState(
            history_id=id(updated.get(HISTORY[fmt])),
            target_key=target.key(),
            config=config,
            pre_call_report=report if stage == "pre_call" else first,
            token_ratio=token_ratio,
            compaction=facts.may_hold_compaction(),
        )
    if ratio is not None:
        learning.remember_sent(updated, fmt, call_id, ratio.key, report)
    if summaries is not None and scope and config.summary_model and governed.cut is not None and report.cache_stable:
        caller = attribution(metadata) if isinstance(metadata, Mapping) else {}
        summaries.schedule(governed.cut, config.summary_model, _summary_tokens(report), scope=scope, caller=caller)
    return updated if updated is not request else None


def _translated_note(first: GovernanceReport, then: GovernanceReport) -> str:
    """The report's note when LiteLLM translated the request between the proxy's two passes (the
    stages' figures add up to the tokens before and after, less what the translation changed)."""
    done = ", ".join(f"{step}={count}" for step, count in then.steps.items()) if then.changed else ""
    return (
        f"translated by LiteLLM from {first.format} to {then.format} after the pre-call pass "
        f"(estimate {first.tokens_after} -> {then.tokens_before} tokens): governed again as the deployment receives it"
        f" ({done or 'unchanged'})"
    )


def _for_translation(
    config: GovernanceConfig, window: int, request: Mapping[str, Any], fmt: Format, factor: float
) -> tuple[GovernanceConfig, list[str]]:
    """The config a pre-call pass fits with when LiteLLM will translate the request for a deployment
    of `window`, where it then counts `factor` times as much (`translation`), and the report's note
    saying so."""
    max_output = max_output_tokens(request, fmt)
    fitted = budgeted(config, window, config.max_output_tokens if max_output is None else max_output, factor)
    if fitted is config:
        return config, []
    return fitted, [
        f"LiteLLM translates this request for its deployment, where it counts about {factor:g} times as much "
        "(learned from earlier requests): fitted for that"
    ]


def _summary_scope(config: GovernanceConfig, target: Deployment, metadata: object) -> str | None:
    """The scope of the request's summaries (`summaries.summary_scope`); None without a summary model."""
    if not config.summary_model:
        return None
    caller = metadata if isinstance(metadata, Mapping) else {}
    return summary_scope(
        summary_model=config.summary_model, deployment=target.key(), metadata=caller, sharing=config.summary_sharing
    )


def _summary_tokens(report: GovernanceReport) -> int:
    """What a summary may take: the note's share of the budget (less its frame), within bounds."""
    budget = report.budget or 0
    return max(100, min(2_000, budget // 10 - 60))


def _known_window(config: GovernanceConfig, target: Deployment) -> int | None:
    """The window `target` has (its ``model_info``, LiteLLM's model map, the configured default)."""
    return resolve_model(
        target.model, config=config, provider=target.provider, model_info=target.model_info
    ).max_input_tokens


async def _govern(
    request: dict[str, Any],
    fmt: Format,
    config: GovernanceConfig,
    target: Deployment,
    ratio: Ratio | None,
    *,
    summaries: Mapping[str, str] | None,
    big: bool,
) -> GovernedRequest:
    run = functools.partial(
        govern_request,
        request,
        format=fmt,
        config=config,
        model=target.model,
        provider=target.provider,
        model_info=target.model_info,
        token_ratio=ratio.value if ratio is not None else None,
        ratio_source=ratio.source if ratio is not None else None,
        summaries=summaries,
    )
    # Big requests are governed off the event loop, so other requests are not held up.
    return await asyncio.to_thread(run) if big else run()
