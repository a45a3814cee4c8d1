"""LiteLLM integration: the only module that talks to LiteLLM's hook API.

Where governance runs (LiteLLM 1.108; see LITELLM_HOOKS.md for what each hook sees):

* ``async_pre_call_hook``: the proxy only, before routing, for chat completions
  (``acompletion``), Anthropic Messages (``anthropic_messages``, ``/v1/messages``) and Responses
  (``aresponses``). ``data["model"]`` is the public model group; the request is fitted to the
  group's deployment with the largest window (the least that must go), in its own format, so
  other proxy hooks and rate limits see the governed request.
* ``async_pre_call_deployment_hook``: after a deployment is chosen, in the proxy, the SDK
  (``litellm.acompletion``, ``litellm.anthropic.messages.acreate``, ``litellm.aresponses``,
  streaming too) and ``Router``, again for every fallback. The request is fitted to that
  deployment: its model, provider and ``model_info``. When LiteLLM is about to translate the call
  into another format for this deployment (``/v1/messages`` to a chat provider or to OpenAI's
  Responses API, ``/v1/responses`` to a chat-only provider), this pass leaves it alone: the
  hook fires again on the translated inner call, in the format the provider will receive, and
  governs it there, once. When the proxy already governed the same history for the same target,
  this pass returns at once.
* Synchronous ``litellm.completion`` / ``Router.completion`` run no hook that can change the
  messages: call `completion` here, or `govern_request` on the kwargs yourself.

Reporting: the report goes into ``spend_logs_metadata.governance`` of the request's LiteLLM
metadata (``metadata`` for chat, ``litellm_metadata`` for ``/v1/messages`` and ``/v1/responses``,
whose ``metadata`` is the provider's own field) — the key LiteLLM's standard logging payload
keeps, so every logging integration sees it —, a short ``x-litellm-governance`` response header
from the proxy, and one INFO log line per changed request on the ``litellm_governance`` logger.
Counts and token figures only, never content.

Calibration (``calibrate``, on by default; the estimator is `_calibration`): both passes budget
with the deployment's learned ratio (provider tokens per tiktoken token; key: ``model_info.id``,
else model + ``api_base``) once it has one, and remember, by LiteLLM's ``litellm_call_id``, the
estimate of what they sent. The answer teaches: ``usage`` in
``async_post_call_success_deployment_hook`` (inline) or ``async_log_success_event`` (streaming; the
log event's ``messages`` are the client's, so the remembered estimate is used, never those); a
context-length rejection in ``async_post_call_failure_deployment_hook`` (inline, before a
``context_window_fallbacks`` fallback runs; ``async_log_failure_event`` where LiteLLM has no such
hook) tightens the ratio at once. Learned ratios are per process, and shared through the Redis of
LiteLLM's own DualCache where the proxy has one (`_calibration_store.shared_cache`), under
`_calibration_store.CALIBRATION_KEY_PREFIX`.

Failure: an internal error logs a warning and lets the original request through (fail-open),
unless the operator set ``fail_closed``, in which case the client gets a 400. A configuration
error (an unknown profile in a deployment's ``model_info``) is reported as one, naming the field,
every minute at most while it lasts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._models import import_litellm, quiet

litellm = import_litellm()  # with LiteLLM's bundled model map, unless the process chose otherwise

from litellm.exceptions import BadRequestError  # noqa: E402
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402

from . import _calibration  # noqa: E402
from ._calibration import ContextError, Sample  # noqa: E402
from ._calibration_store import CalibrationStore, Sent  # noqa: E402
from ._config import GovernanceConfig, short_repr, suggestion  # noqa: E402
from ._errors import ConfigError, InvalidRequestError  # noqa: E402
from ._models import resolve_model, split_provider, widest_deployment  # noqa: E402
from ._profiles import PROFILES  # noqa: E402
from ._report import GovernanceReport  # noqa: E402
from ._request import Format, GovernedRequest, govern_request, max_output_tokens  # noqa: E402

__all__ = [
    "HEADER",
    "GovernanceHook",
    "GovernedRequest",
    "completion",
    "govern_request",
    "proxy_handler_instance",
]

logger = logging.getLogger("litellm_governance")

#: Response header the proxy adds to governed requests.
HEADER: Final = "x-litellm-governance"
#: Where the report lives in the request metadata (kept by LiteLLM's standard logging payload).
REPORT_KEY: Final = "governance"
#: The key in litellm.callback_settings (the proxy config's `callback_settings:`) with our options.
SETTINGS_KEY: Final = "governance"
# LiteLLM call types (strings; str enums in the deployment hook) -> the request format they carry.
_FORMAT_OF_CALL: Final[Mapping[str, Format]] = {
    "completion": "chat",
    "acompletion": "chat",
    "anthropic_messages": "anthropic",
    "aanthropic_messages": "anthropic",
    "responses": "responses",
    "aresponses": "responses",
}
# Where each format keeps its history (the field a pass is keyed on).
_HISTORY: Final[Mapping[str, str]] = {"chat": "messages", "anthropic": "messages", "responses": "input"}
# Where each format keeps LiteLLM's own metadata (Anthropic's and OpenAI's `metadata` is the
# provider's field on /v1/messages and /v1/responses: nothing of ours may go there).
_METADATA: Final[Mapping[str, str]] = {
    "chat": "metadata",
    "anthropic": "litellm_metadata",
    "responses": "litellm_metadata",
}
# Per-request overrides a client may set when the operator allows them. Budgets can only shrink.
_OVERRIDABLE: Final = frozenset(
    {
        "enabled",
        "keep_recent",
        "min_chars",
        "compactable_tools",
        "compact_batch",
        "snip_watermark",
        "cache_stable",
        "profile",
    }
)
# Requests with more text than this are governed in a worker thread (tokenizing ~1 MB takes ~0.1 s).
_OFF_LOOP_CHARS: Final = 500_000
# Private state in the request metadata (LiteLLM's logging payload does not keep it): what the
# last pass governed, so an identical second pass is skipped, and the pre-call pass's report.
_STATE_KEY: Final = "_governance_state"
# A configuration error is logged again at most this often (seconds) while it lasts.
_CONFIG_ERROR_INTERVAL: Final = 60.0


@dataclass(frozen=True)
class _Target:
    """The model a request is governed for."""

    model: str
    provider: str | None = None
    model_info: Mapping[str, Any] | None = None

    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        """What governance depends on: the provider and the bare model (the proxy's model list says
        ``anthropic/claude-…``; the deployment hook may get ``claude-…`` with the provider apart),
        and the governance fields of ``model_info``."""
        info = self.model_info or {}
        fields = ("max_input_tokens", "supports_assistant_prefill", "governance_profile")
        provider, bare = split_provider(self.model, self.provider)
        return provider, bare, tuple((k, repr(info.get(k))) for k in fields)

    def describe(self) -> str:
        info = self.model_info or {}
        ident = info.get("id")
        return f"deployment {self.model!r}" + (f" (model_info.id {short_repr(ident)})" if ident else "")


@dataclass(frozen=True)
class _PassState:
    history_id: int
    target_key: object
    config: GovernanceConfig
    pre_call_report: GovernanceReport | None
    #: The learned ratio the pass used (None: the profile's).
    token_ratio: float | None = None

    def matches(
        self, history: object, target: _Target, config: GovernanceConfig, token_ratio: float | None = None
    ) -> bool:
        # id() is safe here: the list is alive in the very request this state belongs to.
        return (
            id(history) == self.history_id
            and target.key() == self.target_key
            and config == self.config
            and token_ratio == self.token_ratio
        )


def completion(*, config: GovernanceConfig | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with the request governed first (sync calls run no hook that can)."""
    governed = govern_request(kwargs, format="chat", config=config)
    _log_report(governed.report, "sync")
    return litellm.completion(**governed.request)


class GovernanceHook(CustomLogger):
    """The LiteLLM callback. ``litellm.callbacks = [GovernanceHook()]`` in Python; in a proxy
    config, ``litellm_settings: callbacks: litellm_governance.proxy_handler_instance`` and the
    options under ``callback_settings: governance:``."""

    def __init__(self, config: GovernanceConfig | Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__()
        if config is not None and options:
            raise ConfigError("pass either a GovernanceConfig (or mapping) or keyword options, not both")
        if options:
            config = GovernanceConfig.from_mapping(options)
        elif isinstance(config, Mapping):
            config = GovernanceConfig.from_mapping(config)
        elif config is not None and not isinstance(config, GovernanceConfig):
            raise ConfigError(f"config must be a GovernanceConfig or a mapping, got {type(config).__name__}")
        self._explicit: GovernanceConfig | None = config
        self._from_settings: GovernanceConfig | None = None
        self._from_settings_source: object = None
        self._failures_logged: set[str] = set()
        self._config_errors_logged: dict[str, float] = {}
        self._lock = threading.Lock()
        self._calibration = CalibrationStore()
        self.config  # noqa: B018 - validate the proxy's settings now, so a bad option stops start-up

    @property
    def config(self) -> GovernanceConfig:
        """The explicit config, else ``litellm.callback_settings["governance"]``, else defaults."""
        if self._explicit is not None:
            return self._explicit
        settings = getattr(litellm, "callback_settings", None)
        options = settings.get(SETTINGS_KEY) if isinstance(settings, Mapping) else None
        if self._from_settings is None or self._from_settings_source is not options:
            try:
                self._from_settings = GovernanceConfig.from_mapping(options)
            except ConfigError as exc:
                raise ConfigError(f"callback_settings.{SETTINGS_KEY}: {exc}") from None
            self._from_settings_source = options
        return self._from_settings

    # ---- LiteLLM hooks -------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Proxy, before routing: fit the request to its model group."""
        fmt = _format_of(call_type)
        if fmt is None:
            return None
        return await self._govern(data, "pre_call", fmt, lambda: self._group_target(data.get("model")))

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """After routing (proxy, SDK, Router; every fallback): fit to the chosen deployment."""
        fmt = _format_of(call_type)
        if fmt is None or (fmt != "chat" and _translated_later(fmt, kwargs)):
            return None
        return await self._govern(kwargs, "deployment", fmt, lambda: _deployment_target(kwargs))

    async def async_post_call_response_headers_hook(
        self,
        data: dict[str, Any],
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, object] | None = None,
    ) -> dict[str, str] | None:
        """Proxy: a short header saying what governance did."""
        report = _report_slot(data)
        summary = report.get("summary") if report else None
        return {HEADER: summary} if isinstance(summary, str) else None

    # ---- calibration: learning from the provider's answers ---------------------------------------
    # The deployment-level hooks fire inline, with the request as sent (LiteLLM 1.100 and later for
    # failures); the log events fire once per client request, after the answer, and are what
    # streaming responses and older LiteLLM versions leave. Whichever sees a request's answer first
    # learns from it: the estimate of what was sent is taken from the in-flight table once.

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        """A deployment answered (not streaming): learn its ratio from ``usage``."""
        self._learn_success(request_data, _usage_of(response))
        return None

    async def async_post_call_failure_deployment_hook(
        self, request_data: Mapping[str, Any], exception: Exception, call_type: Any, fallback_depth: int | None = None
    ) -> None:
        """A deployment rejected the request: a context-length error tightens its ratio at once."""
        self._learn_failure(request_data, exception)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """A request succeeded (streaming ones too): learn from ``usage`` if no deployment hook did."""
        usage = _usage_of(response_obj)
        if _calibration.prompt_tokens_of(usage) is None:
            payload = kwargs.get("standard_logging_object")
            usage = {"prompt_tokens": payload.get("prompt_tokens")} if isinstance(payload, Mapping) else None
        self._learn_success(kwargs, usage)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """A request failed: as the failure deployment hook, where LiteLLM has none."""
        exception = kwargs.get("exception")
        if isinstance(exception, BaseException):
            self._learn_failure(kwargs, exception)

    def reset_calibration(self) -> None:
        """Forget what this process learned (the shared cache keeps its keys: see
        `_calibration_store.CALIBRATION_KEY_PREFIX`)."""
        self._calibration.reset()

    def _learn_success(self, data: Mapping[str, Any], usage: object) -> None:
        try:
            call_id = _call_id(data)
            reported = _calibration.prompt_tokens_of(usage)
            if call_id is None or reported is None:
                return  # (a streaming answer's usage comes with the log event)
            sent = self._calibration.take(call_id)
            if sent is None:
                return
            ratio = _calibration.sample_ratio(reported, sent.estimated)
            if ratio is not None:
                self._calibration.learn(sent.key, Sample(ratio))
        except Exception as exc:  # noqa: BLE001 - learning never breaks a request
            self._calibration_failed(exc)

    def _learn_failure(self, data: Mapping[str, Any], exception: BaseException) -> None:
        try:
            call_id = _call_id(data)
            if call_id is None:
                return
            error = _calibration.parse_context_error(str(exception))
            window_error = getattr(litellm, "ContextWindowExceededError", None)
            if error is None and isinstance(window_error, type) and isinstance(exception, window_error):
                error = ContextError()
            sent = self._calibration.take(call_id)
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
            state = self._calibration.learn(sent.key, event)
            # Figures only: the provider's text may quote the request.
            logger.info(
                "calibration: context-length rejection by deployment %s (estimated %d tokens at ratio %.3f, provider "
                "count %s): ratio now %s",
                short_repr(sent.key),
                sent.estimated,
                sent.ratio,
                error.prompt(sent.max_output) if error.prompt(sent.max_output) is not None else "not given",
                f"{state.ratio:.3f}" if state.ratio is not None else "static",
            )
        except Exception as exc:  # noqa: BLE001 - learning never breaks a request
            self._calibration_failed(exc)

    async def _learned_ratio(self, key: str) -> tuple[float | None, str | None]:
        """The learned ratio for deployment `key` and where it came from, or (None, None): the profile's."""
        try:
            learned = await self._calibration.lookup(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - calibration never breaks a request
            self._calibration_failed(exc)
            return None, None
        if learned is None or learned.ratio is None:
            return None, None
        return learned.ratio, learned.source

    def _calibration_failed(self, exc: BaseException) -> None:
        signature = f"calibration:{type(exc).__name__}:{_where(exc)}"
        with self._lock:
            first = signature not in self._failures_logged
            self._failures_logged.add(signature)
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "calibration skipped (%s at %s): budgets use the profile's ratio",
            type(exc).__name__,
            _where(exc),
        )

    # ---- the work ------------------------------------------------------------------------

    async def _govern(
        self, request: dict[str, Any], stage: str, fmt: Format, target_of: Callable[[], _Target]
    ) -> dict[str, Any] | None:
        try:
            config = self.config
        except ConfigError as exc:
            self._config_error(request, fmt, stage, exc, fail_closed=False)
            return None
        if not config.enabled:
            return None
        metadata = request.get(_METADATA[fmt])
        state = metadata.get(_STATE_KEY) if isinstance(metadata, dict) else None
        # Only the proxy runs two passes; only there is the pass state kept (in the proxy's own
        # request dict). The report itself is plain JSON, written into the request's metadata,
        # which LiteLLM's logging payload reads (LiteLLM writes its own keys there too).
        in_proxy = stage == "pre_call" or isinstance(state, _PassState)
        history = request.get(_HISTORY[fmt])
        target: _Target | None = None
        # Calibration: the deployment's learned ratio, and what to remember until its provider answers.
        calibration_key: str | None = None
        token_ratio: float | None = None
        ratio_source: str | None = None
        try:
            config, client_window, notes = self._request_config(config, request, fmt)
            if not config.enabled:
                return None
            target = target_of()
            if client_window is not None:
                config = self._bounded_window(config, client_window, target)
            if config.calibrate:
                calibration_key = _calibration_key(target, request)
                token_ratio, ratio_source = await self._learned_ratio(calibration_key)
            call_id = _call_id(request)
            if isinstance(state, _PassState) and state.matches(history, target, config, token_ratio):
                # The proxy's pre-call pass already fitted this history to this target: what it
                # estimated is what is sent (remembered here too, for a pre-call pass without a call id).
                if calibration_key is not None and state.pre_call_report is not None:
                    self._remember_sent(request, fmt, call_id, calibration_key, state.pre_call_report, replace=False)
                return None
            if call_id is not None:
                self._calibration.forget(call_id)  # an earlier pass's estimate is not what is sent now
            run = functools.partial(
                govern_request,
                request,
                format=fmt,
                config=config,
                model=target.model,
                provider=target.provider,
                model_info=target.model_info,
                token_ratio=token_ratio,
                ratio_source=ratio_source,
            )
            # Big requests are governed off the event loop, so other requests are not held up.
            governed = await asyncio.to_thread(run) if _approximate_chars(history) > _OFF_LOOP_CHARS else run()
        except ConfigError as exc:
            where = target.describe() if target is not None else "the request"
            error = ConfigError(f"{where}: {exc.redacted}")
            self._config_error(request, fmt, stage, error, fail_closed=config.fail_closed)
            return None
        except InvalidRequestError as exc:
            self._failed(request, fmt, stage, exc, fail_closed=config.fail_closed, client_error=True)
            return None
        except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # noqa: BLE001 - fail-open is the contract (and Rust panics are BaseExceptions)
            self._failed(request, fmt, stage, exc, fail_closed=config.fail_closed)
            return None

        report = _with_notes(governed.report, notes) if notes else governed.report
        _log_report(report, stage)
        # The pre-call pass's report stays the start of the story: a deployment pass (again on each
        # fallback) runs on the pre-call output, and the report covers both.
        first = state.pre_call_report if isinstance(state, _PassState) and stage == "deployment" else None
        combined = first.then(report) if first is not None else report
        _record(request, fmt, {**combined.to_dict(), "summary": combined.summary(), "stage": stage})
        updated = governed.request if report.changed else request
        if in_proxy and isinstance(updated.get(_METADATA[fmt]), dict):
            updated[_METADATA[fmt]][_STATE_KEY] = _PassState(
                history_id=id(updated.get(_HISTORY[fmt])),
                target_key=target.key(),
                config=config,
                pre_call_report=report if stage == "pre_call" else first,
                token_ratio=token_ratio,
            )
        if calibration_key is not None:
            self._remember_sent(updated, fmt, call_id, calibration_key, report)
        return updated if updated is not request else None

    def _remember_sent(
        self,
        request: Mapping[str, Any],
        fmt: Format,
        call_id: str | None,
        key: str,
        report: GovernanceReport,
        *,
        replace: bool = True,
    ) -> None:
        """Remember the estimate of what is sent until the provider answers (by LiteLLM's call id).
        The estimate covers what is sent unless the history is a string (left alone) or is stored
        upstream (``previous_response_id``): then there is nothing to learn from the answer."""
        if call_id is None or not isinstance(request.get(_HISTORY[fmt]), list):
            return
        if fmt == "responses" and request.get("previous_response_id"):
            return
        if not replace and self._calibration.has(call_id):
            return
        sent = Sent(
            key=key,
            estimated=report.estimated_tokens,
            ratio=report.token_ratio,
            max_output=max_output_tokens(request, fmt),
            window=report.context_window,
            over_budget=report.over_budget,
        )
        self._calibration.remember(call_id, sent)

    def _request_config(
        self, config: GovernanceConfig, request: Mapping[str, Any], fmt: Format
    ) -> tuple[GovernanceConfig, int | None, list[str]]:
        """Apply the client's ``metadata.governance`` where the operator allows it, within bounds.

        Returns the config, a window the client asked for (bounded later by the model's own),
        and notes for the report.
        """
        metadata = request.get(_METADATA[fmt])
        overrides = metadata.get(SETTINGS_KEY) if isinstance(metadata, Mapping) else None
        if not overrides:
            return config, None, []
        if not config.allow_request_overrides:
            return config, None, ["per-request overrides ignored: not allowed by the operator"]
        if not isinstance(overrides, Mapping):
            return config, None, ["per-request overrides ignored: metadata.governance must be an object"]
        changes = dict(overrides)
        if "disable" in changes:
            disable = changes.pop("disable")
            if not isinstance(disable, bool):
                return config, None, ["per-request overrides ignored: disable must be true or false"]
            changes["enabled"] = not disable
        window = changes.pop("context_window_tokens", None)
        unknown = sorted(map(str, set(changes) - _OVERRIDABLE))
        if unknown:
            names = ", ".join(short_repr(name) for name in unknown[:5])
            return config, None, [f"per-request overrides ignored: not overridable: {names}"]
        try:
            updated = config.replace(**changes)
            if window is not None:
                updated.replace(context_window_tokens=window)  # validates the value
        except ConfigError as exc:
            return config, None, [f"per-request overrides ignored: {exc}"]
        return updated, window, []

    @staticmethod
    def _bounded_window(config: GovernanceConfig, window: int, target: _Target) -> GovernanceConfig:
        """Clients may lower the window (spend less), never raise it past what the model has."""
        known = resolve_model(
            target.model, config=config, provider=target.provider, model_info=target.model_info
        ).max_input_tokens
        return config.replace(context_window_tokens=min(window, known) if known is not None else window)

    def _group_target(self, group: object) -> _Target:
        """The proxy's deployment of `group` with the largest window (or `group` itself)."""
        if not isinstance(group, str) or not group:
            raise InvalidRequestError("the request has no 'model'")
        widest = widest_deployment(_proxy_deployments(group), self.config)
        return _Target(widest.model, widest.provider, widest.model_info) if widest is not None else _Target(group)

    def _config_error(
        self, request: dict[str, Any], fmt: Format, stage: str, exc: ConfigError, *, fail_closed: bool
    ) -> None:
        """A configuration error: reported as one (naming the field), again every minute while it
        lasts; the request goes through ungoverned unless the operator set ``fail_closed``."""
        if fail_closed:
            raise _rejection(request, f"a configuration error: {exc}") from exc
        message = str(exc)
        now = time.monotonic()
        with self._lock:
            last = self._config_errors_logged.get(message)
            due = last is None or now - last >= _CONFIG_ERROR_INTERVAL
            if due:
                self._config_errors_logged[message] = now
        if due:
            # A configuration error names config fields and values, never request content.
            logger.warning("governance skipped (configuration error, stage %s): %s; request sent unchanged", stage, exc)
        _record(
            request,
            fmt,
            {
                "skipped": True,
                "error": "ConfigError",
                "config_error": message,
                "stage": stage,
                "changed": False,
                "summary": "skipped (configuration error)",
            },
        )

    def _failed(
        self,
        request: dict[str, Any],
        fmt: Format,
        stage: str,
        exc: BaseException,
        *,
        fail_closed: bool,
        client_error: bool = False,
    ) -> None:
        """Fail closed (raise a 400), or log once and let the request through with a note."""
        where = _where(exc)
        if fail_closed:
            detail = f"{type(exc).__name__}: {exc}" if client_error else f"{type(exc).__name__} at {where}"
            raise _rejection(request, detail) from exc
        kind = "not a governable request" if client_error else "internal error"
        signature = f"{type(exc).__name__}:{where}"
        with self._lock:
            first = signature not in self._failures_logged
            self._failures_logged.add(signature)
        # Type and code location only: an exception's text may quote message content.
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "governance skipped (%s, %s at %s, stage %s): request sent unchanged",
            kind,
            type(exc).__name__,
            where,
            stage,
        )
        _record(
            request,
            fmt,
            {
                "skipped": True,
                "error": type(exc).__name__,
                "where": where,
                "stage": stage,
                "changed": False,
                "summary": f"skipped ({type(exc).__name__})",
            },
        )


def _calibration_key(target: _Target, request: Mapping[str, Any]) -> str:
    return _calibration.deployment_key(target.model_info, target.model, request.get("api_base"))


def _usage_of(response: object) -> object:
    """The usage object or dict of a LiteLLM response in any format (None when it has none)."""
    if isinstance(response, Mapping):
        return response.get("usage")
    return getattr(response, "usage", None)


def _call_id(data: Mapping[str, Any]) -> str | None:
    call_id = data.get("litellm_call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def _rejection(request: Mapping[str, Any], detail: str) -> BadRequestError:
    model = request.get("model")
    return BadRequestError(
        message=f"litellm-governance rejected the request ({detail}); the operator set fail_closed",
        model=model if isinstance(model, str) else "",
        llm_provider="litellm_governance",
    )


def _format_of(call_type: Any) -> Format | None:
    return _FORMAT_OF_CALL.get(str(getattr(call_type, "value", call_type)))


def _model_info_of(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for holder in (kwargs.get("metadata"), kwargs.get("litellm_metadata")):
        if isinstance(holder, Mapping) and isinstance(holder.get("model_info"), Mapping):
            return holder["model_info"]  # type: ignore[no-any-return]
    info = kwargs.get("model_info")
    return info if isinstance(info, Mapping) else None


def _deployment_target(kwargs: Mapping[str, Any]) -> _Target:
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("the request has no 'model'")
    provider = kwargs.get("custom_llm_provider")
    return _Target(model, provider if isinstance(provider, str) and provider else None, _model_info_of(kwargs))


def _translated_later(fmt: Format, kwargs: Mapping[str, Any]) -> bool:
    """Whether LiteLLM will translate this ``/v1/messages`` or ``/v1/responses`` call into
    another format for its deployment (its inner call is then governed instead). Asks LiteLLM's
    own provider table, as its dispatch does; when that cannot be told, governs here too."""
    model = kwargs.get("model")
    provider = kwargs.get("custom_llm_provider")
    info = _model_info_of(kwargs) or {}
    endpoints = info.get("supported_endpoints")
    route = "/v1/messages" if fmt == "anthropic" else "/v1/responses"
    if isinstance(endpoints, (list, tuple)) and route in endpoints:
        return False  # the operator declared the deployment serves this route untranslated
    if not isinstance(model, str):
        return False
    return _translated(fmt, model, provider if isinstance(provider, str) else None)


@functools.lru_cache(maxsize=1024)
def _translated(fmt: Format, model: str, provider: str | None) -> bool:
    try:
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        if not provider:
            with quiet(litellm):
                provider = litellm.get_llm_provider(model=model)[1]
        llm_provider = LlmProviders(provider)
        native: object
        if fmt == "anthropic":
            native = ProviderConfigManager.get_provider_anthropic_messages_config(model=model, provider=llm_provider)
        else:
            native = ProviderConfigManager.get_provider_responses_api_config(model=model, provider=llm_provider)
    except Exception:  # noqa: BLE001 - any LiteLLM version or provider we cannot ask: govern here
        return False
    return native is None


def _proxy_deployments(group: str) -> list[Mapping[str, Any]]:
    try:
        from litellm.proxy.proxy_server import llm_router
    except ImportError:  # pragma: no cover - only the proxy calls this hook
        return []
    if llm_router is None:
        return []
    return list(llm_router.get_model_list(model_name=group) or [])


def _spend_logs(request: dict[str, Any], fmt: Format, *, create: bool) -> dict[str, Any] | None:
    """``spend_logs_metadata`` in the request's LiteLLM metadata: the part of it LiteLLM's
    standard logging payload keeps."""
    key = _METADATA[fmt]
    metadata = request.get(key)
    if metadata is None and create:
        metadata = request[key] = {}
    if not isinstance(metadata, dict):
        return None
    spend = metadata.get("spend_logs_metadata")
    if isinstance(spend, dict):
        return spend
    if not create or spend is not None:
        return None
    spend = metadata["spend_logs_metadata"] = {}
    return spend


def _report_slot(request: dict[str, Any]) -> dict[str, Any] | None:
    formats: tuple[Format, ...] = ("chat", "anthropic")
    for fmt in formats:
        spend = _spend_logs(request, fmt, create=False)
        report = spend.get(REPORT_KEY) if spend is not None else None
        if isinstance(report, dict):
            return report
    return None


def _record(request: dict[str, Any], fmt: Format, entry: dict[str, Any]) -> None:
    """Put `entry` at ``spend_logs_metadata.governance`` of the request's LiteLLM metadata, where
    LiteLLM's standard logging payload (every logging integration) and the header hook find it."""
    spend = _spend_logs(request, fmt, create=True)
    if spend is not None:
        spend[REPORT_KEY] = entry


def _approximate_chars(history: object) -> int:
    if isinstance(history, str):
        return len(history)
    if not isinstance(history, list):
        return 0
    total = 0
    for message in history:
        if isinstance(message, dict):
            content = message.get("content", message.get("output"))
            if isinstance(content, str):
                total += len(content)
            elif isinstance(content, list):
                total += sum(len(b.get("text") or b.get("content") or "") for b in content if isinstance(b, dict))
    return total


def _with_notes(report: GovernanceReport, notes: list[str]) -> GovernanceReport:
    from dataclasses import replace

    return replace(report, notes=(*report.notes, *notes))


def _log_report(report: GovernanceReport, stage: str) -> None:
    if report.changed:
        logger.info(
            "governed %s [%s, %s, %s]: %s", report.model, report.format, report.profile, stage, report.summary()
        )


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"


def _check_proxy_settings() -> None:
    """Warn about a ``callback_settings`` section that looks like a misspelling of ours."""
    settings = getattr(litellm, "callback_settings", None)
    if not isinstance(settings, Mapping):
        return
    for name in settings:
        if isinstance(name, str) and name != SETTINGS_KEY and suggestion(name, [SETTINGS_KEY]):
            logger.warning(
                "callback_settings.%s is not read by litellm-governance: did you mean callback_settings.%s?",
                short_repr(name)[1:-1],
                SETTINGS_KEY,
            )


def validate_deployments(deployments: list[Mapping[str, Any]]) -> list[str]:
    """Problems in the governance fields of a proxy's ``model_list`` (one line each, naming the
    deployment and the field)."""
    problems: list[str] = []
    for index, deployment in enumerate(deployments):
        if not isinstance(deployment, Mapping):
            continue
        info = deployment.get("model_info")
        if not isinstance(info, Mapping):
            continue
        name = deployment.get("model_name")
        where = f"model_list[{index}] (model_name {short_repr(name)})"
        for key in info:
            if isinstance(key, str) and key.startswith("governance") and key != "governance_profile":
                hint = suggestion(key, ["governance_profile"])
                problems.append(
                    f"{where}: model_info.{short_repr(key)[1:-1]} is not a field litellm-governance reads{hint}"
                )
        profile = info.get("governance_profile")
        if profile is not None and profile not in PROFILES:
            hint = suggestion(str(profile), list(PROFILES))
            problems.append(f"{where}: model_info.governance_profile is not one of {', '.join(sorted(PROFILES))}{hint}")
    return problems


def _validate_proxy_models_soon() -> None:
    """Once the proxy has built its router (callbacks load before the model list), check every
    deployment's governance fields and say what is wrong at start-up."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    deadline = time.monotonic() + 120

    def check() -> None:
        try:
            from litellm.proxy import proxy_server
        except ImportError:  # pragma: no cover
            return
        router = getattr(proxy_server, "llm_router", None)
        if router is None:
            if time.monotonic() < deadline:
                loop.call_later(0.2, check)
            return
        for problem in validate_deployments(list(getattr(router, "model_list", None) or [])):
            logger.error("configuration error: %s (requests to it are sent ungoverned)", problem)

    loop.call_soon(check)


def _proxy_instance() -> GovernanceHook:
    # In a proxy, show one line per changed request unless the operator configured logging.
    if not logger.handlers and logger.level == logging.NOTSET:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s - litellm_governance - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    _check_proxy_settings()
    try:
        hook = GovernanceHook()
    except ConfigError as exc:
        logger.error("litellm-governance cannot start: %s", exc)
        raise
    from . import __version__

    logger.info(
        "litellm-governance %s active (chat, /v1/messages, /v1/responses): %s",
        __version__,
        hook.config.describe(),
    )
    _validate_proxy_models_soon()
    return hook


#: The ready instance for ``litellm_settings: callbacks: litellm_governance.proxy_handler_instance``.
proxy_handler_instance: GovernanceHook


def __getattr__(name: str) -> Any:
    # `proxy_handler_instance` is built on first access (the proxy's config loader), not at import,
    # so Python users importing GovernanceHook get no handler added to their logging.
    if name == "proxy_handler_instance":
        instance = globals().get("_proxy_handler_instance")
        if instance is None:
            instance = globals()["_proxy_handler_instance"] = _proxy_instance()
        return instance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
