"""LiteLLM integration: the only module that talks to LiteLLM's hook API.

Where governance runs (LiteLLM 1.108):

* ``async_pre_call_hook``: the proxy only, before routing, for chat completions. ``data["model"]``
  is the public model group; the request is fitted to the group's deployment with the largest
  window (the least that must go), so other proxy hooks and rate limits see the governed request.
* ``async_pre_call_deployment_hook``: after a deployment is chosen, in the proxy, the SDK
  (``litellm.acompletion``, streaming too) and ``Router.acompletion``, again for every fallback.
  The request is fitted to that deployment: its model, provider and ``model_info``. When the
  proxy already governed the same messages for the same target, this pass returns at once.
* Synchronous ``litellm.completion`` / ``Router.completion`` run no hook that can change the
  messages: call `completion` here, or `govern_request` on the kwargs yourself.

Reporting: the report goes into ``metadata["spend_logs_metadata"]["governance"]`` (the key
LiteLLM's standard logging payload keeps, so every logging integration sees it), a short
``x-litellm-governance`` response header from the proxy, and one INFO log line per changed
request on the ``litellm_governance`` logger. Counts and token figures only, never content.

Failure: an internal error logs one warning and lets the original request through (fail-open),
unless the operator set ``fail_closed``, in which case the client gets a 400.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._models import import_litellm

litellm = import_litellm()  # with LiteLLM's bundled model map, unless the process chose otherwise

from litellm.exceptions import BadRequestError  # noqa: E402
from litellm.integrations.custom_logger import CustomLogger  # noqa: E402

from ._config import GovernanceConfig, short_repr  # noqa: E402
from ._errors import ConfigError, InvalidRequestError  # noqa: E402
from ._models import resolve_model  # noqa: E402
from ._pipeline import govern  # noqa: E402
from ._report import GovernanceReport  # noqa: E402

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
# Call types that carry chat `messages` (strings; LiteLLM passes str enums in the deployment hook).
_CHAT_CALLS: Final = frozenset({"completion", "acompletion"})
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


@dataclass(frozen=True)
class _Target:
    """The model a request is governed for."""

    model: str
    provider: str | None = None
    model_info: Mapping[str, Any] | None = None

    def key(self) -> tuple[str, str | None, tuple[tuple[str, str], ...]]:
        info = self.model_info or {}
        fields = ("max_input_tokens", "supports_assistant_prefill", "governance_profile")
        return self.model, self.provider, tuple((k, repr(info.get(k))) for k in fields)


@dataclass(frozen=True)
class _PassState:
    messages_id: int
    target_key: object
    config: GovernanceConfig
    pre_call_report: GovernanceReport | None

    def matches(self, messages: object, target: _Target, config: GovernanceConfig) -> bool:
        # id() is safe here: the list is alive in the very request this state belongs to.
        return id(messages) == self.messages_id and target.key() == self.target_key and config == self.config


@dataclass(frozen=True)
class GovernedRequest:
    """A governed copy of a request (kwargs or a proxy body) and what was done to it."""

    request: dict[str, Any]
    report: GovernanceReport


def govern_request(
    request: Mapping[str, Any],
    *,
    config: GovernanceConfig | None = None,
    model: str | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
) -> GovernedRequest:
    """Govern a chat request (``litellm.completion`` kwargs or an OpenAI request body).

    `model` names the model to fit (default ``request["model"]``): for a Router model group,
    pass the deployment's model or its `model_info`. Raises `InvalidRequestError` for a request
    that carries no usable ``messages``.
    """
    target_model = model or request.get("model")
    if not isinstance(target_model, str) or not target_model:
        raise InvalidRequestError("the request has no 'model' and none was given")
    result = govern(
        _plain_messages(request.get("messages")),  # type: ignore[arg-type]  # govern() checks it
        model=target_model,
        tools=request.get("tools"),
        max_output_tokens=_max_output(request),
        config=config,
        provider=provider,
        model_info=dict(model_info) if model_info else None,
    )
    governed = dict(request)
    governed["messages"] = result.messages
    return GovernedRequest(request=governed, report=result.report)


def completion(*, config: GovernanceConfig | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with the request governed first (sync calls run no hook that can)."""
    governed = govern_request(kwargs, config=config)
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
        self.config  # noqa: B018 - validate the proxy's settings now, so a bad option stops start-up

    @property
    def config(self) -> GovernanceConfig:
        """The explicit config, else ``litellm.callback_settings["governance"]``, else defaults."""
        if self._explicit is not None:
            return self._explicit
        settings = getattr(litellm, "callback_settings", None)
        options = settings.get(SETTINGS_KEY) if isinstance(settings, Mapping) else None
        if self._from_settings is None or self._from_settings_source is not options:
            self._from_settings = GovernanceConfig.from_mapping(options)
            self._from_settings_source = options
        return self._from_settings

    # ---- LiteLLM hooks -------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Proxy, before routing: fit chat requests to their model group."""
        if str(getattr(call_type, "value", call_type)) not in _CHAT_CALLS:
            return None
        return await self._govern(data, "pre_call", lambda: self._group_target(data.get("model")))

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """After routing (proxy, SDK, Router; every fallback): fit to the chosen deployment."""
        if str(getattr(call_type, "value", call_type)) not in _CHAT_CALLS:
            return None
        return await self._govern(kwargs, "deployment", lambda: _deployment_target(kwargs))

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

    # ---- the work ------------------------------------------------------------------------

    async def _govern(self, request: dict[str, Any], stage: str, target_of: Any) -> dict[str, Any] | None:
        try:
            config = self.config
        except ConfigError as exc:
            self._failed(request, stage, exc, fail_closed=False)
            return None
        if not config.enabled:
            return None
        metadata = request.get("metadata")
        state = metadata.get(_STATE_KEY) if isinstance(metadata, dict) else None
        # Only the proxy runs two passes; only there is the pass state kept (in the proxy's own
        # request dict). The report itself is plain JSON, written into the request's metadata,
        # which LiteLLM's logging payload reads (LiteLLM writes its own keys there too).
        in_proxy = stage == "pre_call" or isinstance(state, _PassState)
        try:
            config, client_window, notes = self._request_config(config, request)
            if not config.enabled:
                return None
            target: _Target = target_of()
            if client_window is not None:
                config = self._bounded_window(config, client_window, target)
            messages = request.get("messages")
            if isinstance(state, _PassState) and state.matches(messages, target, config):
                return None  # the proxy's pre-call pass already fitted these messages to this target
            run = functools.partial(
                govern_request,
                request,
                config=config,
                model=target.model,
                provider=target.provider,
                model_info=target.model_info,
            )
            # Big requests are governed off the event loop, so other requests are not held up.
            governed = await asyncio.to_thread(run) if _approximate_chars(messages) > _OFF_LOOP_CHARS else run()
        except InvalidRequestError as exc:
            self._failed(request, stage, exc, fail_closed=config.fail_closed, client_error=True)
            return None
        except (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # noqa: BLE001 - fail-open is the contract (and Rust panics are BaseExceptions)
            self._failed(request, stage, exc, fail_closed=config.fail_closed)
            return None

        report = _with_notes(governed.report, notes) if notes else governed.report
        _log_report(report, stage)
        # The pre-call pass's report stays the start of the story: a deployment pass (again on each
        # fallback) runs on the pre-call output, and the report covers both.
        first = state.pre_call_report if isinstance(state, _PassState) and stage == "deployment" else None
        combined = first.then(report) if first is not None else report
        _record(request, {**combined.to_dict(), "summary": combined.summary(), "stage": stage})
        updated = request
        if report.changed:
            updated = dict(request)
            updated["messages"] = governed.request["messages"]
        if in_proxy and isinstance(updated.get("metadata"), dict):
            updated["metadata"][_STATE_KEY] = _PassState(
                messages_id=id(updated.get("messages")),
                target_key=target.key(),
                config=config,
                pre_call_report=report if stage == "pre_call" else first,
            )
        return updated if updated is not request else None

    def _request_config(
        self, config: GovernanceConfig, request: Mapping[str, Any]
    ) -> tuple[GovernanceConfig, int | None, list[str]]:
        """Apply the client's ``metadata.governance`` where the operator allows it, within bounds.

        Returns the config, a window the client asked for (bounded later by the model's own),
        and notes for the report.
        """
        metadata = request.get("metadata")
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
        try:
            from litellm.proxy.proxy_server import llm_router
        except ImportError:  # pragma: no cover - only the proxy calls this hook
            llm_router = None
        deployments = llm_router.get_model_list(model_name=group) if llm_router is not None else None
        best: tuple[int, _Target] | None = None
        for deployment in deployments or []:
            params = deployment.get("litellm_params") or {}
            model = params.get("model")
            if not isinstance(model, str):
                continue
            info = deployment.get("model_info")
            target = _Target(model, params.get("custom_llm_provider"), info if isinstance(info, Mapping) else None)
            window = resolve_model(
                model, config=self.config, provider=target.provider, model_info=target.model_info
            ).max_input_tokens
            if best is None or (window or 0) > best[0]:
                best = (window or 0, target)
        return best[1] if best is not None else _Target(group)

    def _failed(
        self,
        request: dict[str, Any],
        stage: str,
        exc: BaseException,
        *,
        fail_closed: bool,
        client_error: bool = False,
    ) -> None:
        """Fail closed (raise a 400), or log once and let the request through with a note."""
        where = _where(exc)
        if fail_closed:
            model = request.get("model")
            raise BadRequestError(
                message=(
                    f"litellm-governance rejected the request ({type(exc).__name__}"
                    + (f": {exc}" if client_error else f" at {where}")
                    + "); the operator set fail_closed"
                ),
                model=model if isinstance(model, str) else "",
                llm_provider="litellm_governance",
            ) from exc
        kind = "not a governable chat request" if client_error else "internal error"
        signature = f"{type(exc).__name__}:{where}"
        level = logging.WARNING if signature not in self._failures_logged else logging.DEBUG
        self._failures_logged.add(signature)
        # Type and code location only: an exception's text may quote message content.
        logger.log(
            level,
            "governance skipped (%s, %s at %s, stage %s): request sent unchanged",
            kind,
            type(exc).__name__,
            where,
            stage,
        )
        _record(
            request,
            {
                "skipped": True,
                "error": type(exc).__name__,
                "where": where,
                "stage": stage,
                "changed": False,
                "summary": f"skipped ({type(exc).__name__})",
            },
        )


def _deployment_target(kwargs: Mapping[str, Any]) -> _Target:
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("the request has no 'model'")
    info: Mapping[str, Any] | None = None
    for holder in (kwargs.get("metadata"), kwargs.get("litellm_metadata")):
        if isinstance(holder, Mapping) and isinstance(holder.get("model_info"), Mapping):
            info = holder["model_info"]
            break
    if info is None and isinstance(kwargs.get("model_info"), Mapping):
        info = kwargs["model_info"]
    provider = kwargs.get("custom_llm_provider")
    return _Target(model, provider if isinstance(provider, str) and provider else None, info)


def _plain_messages(messages: object) -> object:
    """Messages as plain dicts: SDK users sometimes pass LiteLLM/OpenAI message objects back."""
    if not isinstance(messages, list) or all(isinstance(m, dict) for m in messages):
        return messages
    return [
        m.model_dump(exclude_none=True) if hasattr(m, "model_dump") and not isinstance(m, dict) else m for m in messages
    ]


def _max_output(request: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _spend_logs(request: dict[str, Any], *, create: bool) -> dict[str, Any] | None:
    """``metadata["spend_logs_metadata"]``: the metadata LiteLLM's standard logging payload keeps."""
    metadata = request.get("metadata")
    if metadata is None and create:
        metadata = request["metadata"] = {}
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
    spend = _spend_logs(request, create=False)
    report = spend.get(REPORT_KEY) if spend is not None else None
    return report if isinstance(report, dict) else None


def _record(request: dict[str, Any], entry: dict[str, Any]) -> None:
    """Put `entry` at metadata.spend_logs_metadata.governance, where LiteLLM's standard logging
    payload (every logging integration) and the proxy's header hook find it."""
    spend = _spend_logs(request, create=True)
    if spend is not None:
        spend[REPORT_KEY] = entry


def _approximate_chars(messages: object) -> int:
    if not isinstance(messages, list):
        return 0
    return sum(len(m["content"]) for m in messages if isinstance(m, dict) and isinstance(m.get("content"), str))


def _with_notes(report: GovernanceReport, notes: list[str]) -> GovernanceReport:
    from dataclasses import replace

    return replace(report, notes=(*report.notes, *notes))


def _log_report(report: GovernanceReport, stage: str) -> None:
    if report.changed:
        logger.info("governed %s [%s, %s]: %s", report.model, report.profile, stage, report.summary())


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "?"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno}"


def _proxy_instance() -> GovernanceHook:
    hook = GovernanceHook()
    # In a proxy, show one line per changed request unless the operator configured logging.
    if not logger.handlers and logger.level == logging.NOTSET:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s - litellm_governance - %(levelname)s - %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
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
