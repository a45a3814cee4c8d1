"""Calibration in the hook (docs/calibration.md): the learned ratio a pass budgets with, the estimate
of each governed request until its provider answers, learning from the answer, and where the learned
ratios live (`CalibrationStore`). The estimator is `_calibration`."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .. import _calibration
from .._calibration import Calibration, ContextError, Event, Sample, apply_in_order
from .._config import GovernanceConfig, short_repr
from .._models import Deployment, import_litellm
from .._report import GovernanceReport
from .._request import Format, max_output_tokens
from .failures import LogOnce, logger
from .fields import HISTORY, call_id_of
from .metrics import deployment_label, metrics
from .routing import known_window, shared_cache, shared_get, shared_set

#: Key of a deployment's learned ratio in the proxy's shared cache, followed by its calibration key
#: (delete ``litellm_governance:calibration:*`` to start over; a new estimator gets a new version).
CALIBRATION_KEY_PREFIX: Final = f"litellm_governance:calibration:v{_calibration.VALUE_VERSION}:"
# Seconds a learned ratio lives in the shared cache after its last update.
_CALIBRATION_TTL: Final = 7 * 24 * 3600
# Seconds a process uses its copy of a learned ratio before re-reading it (in the background).
_CALIBRATION_REFRESH: Final = 1.0
# Seconds between two writes of one deployment's ratio by one process (news in between is batched).
_CALIBRATION_WRITE_INTERVAL: Final = 1.0
# Requests awaiting their answer, deployments, and events kept while the shared cache cannot be reached.
_CALIBRATION_IN_FLIGHT: Final = 10_000
_CALIBRATION_DEPLOYMENTS: Final = 4096
_CALIBRATION_PENDING: Final = 256
_SKIPPED: Final = "calibration skipped (%s at %s): budgets use the profile's ratio"


@dataclass(frozen=True)
class Ratio:
    """The ratio a pass budgets with: the deployment's `key`, its learned `value` (None: the profile's)
    and where that came from."""

    key: str
    value: float | None = None
    source: str | None = None


@dataclass(frozen=True)
class Sent:
    """What calibration must know about a governed request until its provider answers."""

    key: str
    #: tiktoken tokens of exactly what was sent (the report's ``estimated_tokens``).
    estimated: int
    #: The ratio it was budgeted with.
    ratio: float
    #: The output the request asked for (``max_tokens`` or its per-format name), None if it did not.
    max_output: int | None
    window: int | None
    over_budget: bool


def usage_of(response: object) -> object:
    """The usage object or dict of a LiteLLM response in any format (None when it has none)."""
    return response.get("usage") if isinstance(response, Mapping) else getattr(response, "usage", None)


def usage_of_log_event(kwargs: Mapping[str, Any], response: object) -> object:
    """A success log event's usage: the response's, else the standard logging payload's prompt tokens."""
    usage = usage_of(response)
    if _calibration.prompt_tokens_of(usage) is None:
        payload = kwargs.get("standard_logging_object")
        usage = {"prompt_tokens": payload.get("prompt_tokens")} if isinstance(payload, Mapping) else None
    return usage


class Learning:
    """What the hook learns from providers' answers. A failure in it is logged once and budgets fall
    back to the profile's ratio."""

    def __init__(self) -> None:
        self.store = CalibrationStore()
        self._failures = LogOnce(logger)

    async def ratio(self, target: Deployment, request: Mapping[str, Any], config: GovernanceConfig) -> Ratio:
        """The learned ratio of `target`, held for a ``cache_stable`` budget (`Calibration.ratio_for`)."""
        held = config.stable_for(known_window(config, target))
        key = _calibration.deployment_key(target.model_info, target.model, request.get("api_base"))
        learned = None
        with self._failures.guard(_SKIPPED):
            learned = await self.store.lookup(key)
        if learned is None or (value := learned.ratio_for(held=held)) is None:
            return Ratio(key)
        return Ratio(key, value, learned.source)

    def remember_sent(
        self, request: Mapping[str, Any], fmt: Format, key: str, report: GovernanceReport, *, replace: bool = True
    ) -> None:
        """Remember the estimate of what is sent until the provider answers (by LiteLLM's call id),
        unless the history is a string (left alone) or stored upstream (``previous_response_id``)."""
        call_id = call_id_of(request)
        if call_id is None or not isinstance(request.get(HISTORY[fmt]), list) or request.get("previous_response_id"):
            return
        sent = Sent(
            key=key,
            estimated=report.estimated_tokens,
            ratio=report.token_ratio,
            max_output=max_output_tokens(request, fmt),
            window=report.context_window,
            over_budget=report.over_budget,
        )
        self.store.remember(call_id, sent, replace=replace)

    def learn_success(self, data: Mapping[str, Any], usage: object) -> None:
        """A deployment answered: learn from the prompt tokens it reported."""
        with self._failures.guard(_SKIPPED):
            call_id = call_id_of(data)
            reported = _calibration.prompt_tokens_of(usage)
            sent = self.store.take(call_id) if call_id is not None and reported is not None else None
            ratio = _calibration.sample_ratio(reported, sent.estimated) if sent is not None else None
            if sent is not None and ratio is not None:
                self.store.learn(sent.key, Sample(ratio))

    def learn_failure(self, data: Mapping[str, Any], exception: BaseException) -> None:
        """A deployment rejected the request: a context-length error tightens its ratio at once."""
        call_id = call_id_of(data)
        if call_id is not None:
            with self._failures.guard(_SKIPPED):
                self._rejected(data, call_id, exception)

    def _rejected(self, data: Mapping[str, Any], call_id: str, exception: BaseException) -> None:
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


@dataclass
class _Learned:
    """One key in this process: the state, when the shared cache was last read, unwritten news."""

    state: Calibration | None = None
    read_at: float = -math.inf
    pending: list[Event] = field(default_factory=list)


class CalibrationStore:
    """Learned ratios per deployment, and the requests awaiting their provider's answer. Each process
    budgets with its own copy; with a shared cache (`shared_cache`) the copy is re-read in the
    background every `_CALIBRATION_REFRESH` seconds (a first use waits for that read), and what the
    process learns is merged into the shared value (read, apply its events, write) at most every
    `_CALIBRATION_WRITE_INTERVAL` seconds. One read or write per key at a time: the caller marks the
    key busy, the work unmarks it. No failure of the shared cache reaches a request."""

    def __init__(self, shared: Callable[[], Any] = shared_cache) -> None:
        self._shared = shared
        self._learned: dict[str, _Learned] = {}
        self._in_flight: OrderedDict[str, Sent] = OrderedDict()  # by LiteLLM's call id
        self._busy: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures = LogOnce(logger)

    def remember(self, call_id: str, sent: Sent, *, replace: bool = True) -> None:
        """Remember what was sent for `call_id` until its provider answers (unless known and not to `replace`)."""
        if not replace and call_id in self._in_flight:
            return
        self._in_flight[call_id] = sent
        self._in_flight.move_to_end(call_id)
        while len(self._in_flight) > _CALIBRATION_IN_FLIGHT:
            self._in_flight.popitem(last=False)

    def forget(self, call_id: str | None) -> None:
        """An earlier pass's estimate for this call is not what is sent now."""
        self._in_flight.pop(call_id or "", None)

    def take(self, call_id: str) -> Sent | None:
        return self._in_flight.pop(call_id, None)

    async def lookup(self, key: str) -> Calibration | None:
        """What is known about deployment `key` (None: nothing yet)."""
        entry = self._learned.get(key)
        cache = self._shared()
        if cache is None:
            return entry.state if entry is not None else None
        now = time.monotonic()
        if entry is None:
            entry = self._entry(key)
            entry.read_at = now
            if key not in self._busy:
                self._busy.add(key)
                await self._refresh(key, cache)  # first use in this process: worth a short wait
        elif now - entry.read_at >= _CALIBRATION_REFRESH and key not in self._busy:
            entry.read_at = now
            self._busy.add(key)
            self._spawn(self._refresh(key, cache), key)
        return entry.state

    def learn(self, key: str, event: Event) -> Calibration:
        """Apply `event` to `key` now; share it in the background."""
        entry = self._entry(key)
        entry.state = event.apply(entry.state if entry.state is not None else Calibration())
        if self._shared() is not None:
            entry.pending.append(event)
            del entry.pending[:-_CALIBRATION_PENDING]
            self._start_sync(key)
        return entry.state

    def reset(self) -> None:
        """Forget what this process learned (the shared cache is left alone: delete its keys)."""
        self._learned.clear()
        self._in_flight.clear()

    def _entry(self, key: str) -> _Learned:
        entry = self._learned.get(key)
        if entry is None:
            entry = self._learned[key] = _Learned()
            while len(self._learned) > _CALIBRATION_DEPLOYMENTS:
                del self._learned[next(iter(self._learned))]
        return entry

    def _start_sync(self, key: str) -> None:
        if key not in self._busy:
            self._busy.add(key)
            self._spawn(self._sync(key), key)

    async def _refresh(self, key: str, cache: Any) -> None:
        """Re-read `key` from the shared cache, this process's unwritten events on top (no value: nothing
        learned yet, or the key was deleted to start over)."""
        try:
            ok, value = await self._shared_call("read", shared_get(cache, CALIBRATION_KEY_PREFIX + key))
            entry = self._learned.get(key)
            if ok and entry is not None:
                shared = Calibration.from_value(value)
                keep = shared is not None or entry.pending
                entry.state = apply_in_order(shared, entry.pending) if keep else None
        finally:
            self._busy.discard(key)
        entry = self._learned.get(key)
        if entry is not None and entry.pending and self._shared() is not None:
            self._start_sync(key)  # news that came in during the read

    async def _sync(self, key: str) -> None:
        """Merge this process's events for `key` into the shared value until none are left (or the
        shared cache fails: they wait for the next event)."""
        try:
            while True:
                entry = self._learned.get(key)
                cache = self._shared()
                if entry is None or not entry.pending or cache is None:
                    return
                events = list(entry.pending)
                ok, value = await self._shared_call("read", shared_get(cache, CALIBRATION_KEY_PREFIX + key))
                merged = apply_in_order(Calibration.from_value(value), events) if ok else None
                if merged is None:
                    return
                write = shared_set(cache, CALIBRATION_KEY_PREFIX + key, merged.to_value(), _CALIBRATION_TTL)
                if not (await self._shared_call("write", write))[0]:
                    return
                del entry.pending[: len(events)]
                entry.state = apply_in_order(merged, entry.pending)
                entry.read_at = time.monotonic()
                await asyncio.sleep(_CALIBRATION_WRITE_INTERVAL)
        finally:
            self._busy.discard(key)

    async def _shared_call(self, what: str, work: Awaitable[object]) -> tuple[bool, object]:
        """``(True, value or None)`` when the shared cache answered, ``(False, None)`` when it did not."""
        try:
            return True, await work
        except Exception as exc:  # noqa: BLE001 - the shared cache never fails a request
            message = "calibration: shared cache %s failed (%s); going on with this process's copy"
            self._failures.log("shared cache", logging.WARNING, message, what, type(exc).__name__)
            return False, None

    def _spawn(self, work: Coroutine[Any, Any, None], key: str) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no running loop (a synchronous caller): nothing is shared then
            work.close()
            self._busy.discard(key)
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
