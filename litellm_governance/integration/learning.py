"""Calibration glue: each deployment's learned token ratio for a pass, what each governed request was
estimated at until its provider answers, and learning from that answer (``usage`` on success, a
context-length rejection on failure). The estimator is `_calibration`; the store `calibration_store`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _calibration
from .._calibration import ContextError, Sample
from .._config import GovernanceConfig, short_repr
from .._models import Deployment, import_litellm
from .._report import GovernanceReport
from .._request import Format, max_output_tokens
from .calibration_store import CalibrationStore, Sent
from .fields import HISTORY, call_id_of
from .logonce import LogOnce
from .metrics import deployment_label, metrics
from .reporting import logger
from .routing import known_window

__all__ = ["Learning", "Ratio", "usage_of", "usage_of_log_event"]


@dataclass(frozen=True)
class Ratio:
    """The token ratio a pass budgets with: the deployment's `key`, its learned `value` and where that
    came from (``value`` None: the profile's static ratio)."""

    key: str
    value: float | None = None
    source: str | None = None


def usage_of(response: object) -> object:
    """The usage object or dict of a LiteLLM response in any format (None when it has none)."""
    if isinstance(response, Mapping):
        return response.get("usage")
    return getattr(response, "usage", None)


def usage_of_log_event(kwargs: Mapping[str, Any], response: object) -> object:
    """A success log event's usage: the response's, else the standard logging payload's prompt tokens."""
    usage = usage_of(response)
    if _calibration.prompt_tokens_of(usage) is None:
        payload = kwargs.get("standard_logging_object")
        usage = {"prompt_tokens": payload.get("prompt_tokens")} if isinstance(payload, Mapping) else None
    return usage


class Learning:
    """What the hook learns from providers' answers, and what it needs to remember to do so.

    Learning never breaks a request: any failure in it is logged once (then at DEBUG) and budgets
    fall back to the profile's ratio.
    """

    def __init__(self, store: CalibrationStore | None = None) -> None:
        self.store = store if store is not None else CalibrationStore()
        self._failures = LogOnce(logger)

    # ---- before a pass: the ratio to budget with ----------------------------------------------------

    async def ratio(self, target: Deployment, request: Mapping[str, Any], config: GovernanceConfig) -> Ratio:
        """The learned ratio of `target` (key: ``model_info.id``, else model + ``api_base``), held for a
        ``cache_stable`` budget (`Calibration.ratio_for`)."""
        held = config.stable_for(known_window(config, target))
        key = _calibration.deployment_key(target.model_info, target.model, request.get("api_base"))
        try:
            learned = await self.store.lookup(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - calibration never breaks a request
            self._failed(exc)
            return Ratio(key)
        if learned is None or (value := learned.ratio_for(held=held)) is None:
            return Ratio(key)
        return Ratio(key, value, learned.source)

    # ---- after a pass: what was sent --------------------------------------------------------------

    def forget(self, call_id: str | None) -> None:
        """An earlier pass's estimate for this call is not what is sent now."""
        if call_id is not None:
            self.store.forget(call_id)

    def remember_sent(
        self, request: Mapping[str, Any], fmt: Format, key: str, report: GovernanceReport, *, replace: bool = True
    ) -> None:
        """Remember the estimate of what is sent until the provider answers (by LiteLLM's call id).
        The estimate covers what is sent unless the history is a string (left alone) or is stored
        upstream (``previous_response_id``): then there is nothing to learn from the answer."""
        call_id = call_id_of(request)
        if call_id is None or not isinstance(request.get(HISTORY[fmt]), list) or request.get("previous_response_id"):
            return
        if not replace and self.store.has(call_id):
            return
        sent = Sent(
            key=key,
            estimated=report.estimated_tokens,
            ratio=report.token_ratio,
            max_output=max_output_tokens(request, fmt),
            window=report.context_window,
            over_budget=report.over_budget,
        )
        self.store.remember(call_id, sent)

    # ---- the provider's answer ----------------------------------------------------------------------

    def learn_success(self, data: Mapping[str, Any], usage: object) -> None:
        """A deployment answered: learn its ratio from the prompt tokens it reported."""
        try:
            call_id = call_id_of(data)
            reported = _calibration.prompt_tokens_of(usage)
            if call_id is None or reported is None:
                return  # (a streaming answer's usage comes with the log event)
            sent = self.store.take(call_id)
            if sent is None:
                return
            ratio = _calibration.sample_ratio(reported, sent.estimated)
            if ratio is not None:
                self.store.learn(sent.key, Sample(ratio))
        except Exception as exc:  # noqa: BLE001 - learning never breaks a request
            self._failed(exc)

    def learn_failure(self, data: Mapping[str, Any], exception: BaseException) -> None:
        """A deployment rejected the request: a context-length error tightens its ratio at once."""
        try:
            call_id = call_id_of(data)
            if call_id is None:
                return
            error = _calibration.parse_context_error(str(exception))
            window_error = getattr(import_litellm(), "ContextWindowExceededError", None)
            if error is None and isinstance(window_error, type) and isinstance(exception, window_error):
                error = ContextError()
            # The deployment as the metrics name it (``provider/model``), in the log line too.
            deployment = deployment_label(data.get("model"), data.get("custom_llm_provider"))
            if error is not None:
                metrics().context_rejection(call_id, deployment)
            sent = self.store.take(call_id)
            if error is None or sent is None:
                return
            event = _calibration.rejection(
                error,
                estimated=sent.estimated,
                used=sent.ratio,
                max_output_sent=sent.max_output,
                window=sent.window,
                over_budget=sent.over_budget,
            )
            state = self.store.learn(sent.key, event)
            prompt = error.prompt(sent.max_output)
            # Figures only: the provider's text may quote the request.
            logger.info(
                "calibration: context-length rejection by deployment %s (calibration key %s; estimated %d tokens at "
                "ratio %.3f, provider count %s): ratio now %s",
                short_repr(deployment),
                short_repr(sent.key),
                sent.estimated,
                sent.ratio,
                prompt if prompt is not None else "not given",
                f"{state.ratio:.3f}" if state.ratio is not None else "static",
            )
        except Exception as exc:  # noqa: BLE001 - learning never breaks a request
            self._failed(exc)

    def reset(self) -> None:
        """Forget what this process learned (the shared cache keeps its keys)."""
        self.store.reset()

    def _failed(self, exc: BaseException) -> None:
        self._failures.failure(exc, "calibration skipped (%s at %s): budgets use the profile's ratio")
