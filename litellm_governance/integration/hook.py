"""`GovernanceHook`, the LiteLLM callback: each LiteLLM hook method hands its work to the module that
owns it (`passes` governs, `learning` calibrates, `metrics` counts). And `completion`, the synchronous
drop-in (synchronous ``litellm.completion`` runs no hook that can change the messages)."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from litellm.integrations.custom_logger import CustomLogger

from .._config import GovernanceConfig
from .._errors import ConfigError
from .._models import Deployment, import_litellm
from .._request import Format, govern_request
from . import compaction_answers, context_editing, session_compaction
from .failures import Failures
from .fields import SETTINGS_KEY, format_of, header
from .learning import Learning, usage_of, usage_of_log_event
from .metrics import metrics
from .passes import Helpers, Stage, log_report, run_pass
from .routing import deployment_target, group_deployments, group_target, translated_later
from .summaries import Summaries


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
        self._learning = Learning()
        self._summaries = Summaries()
        self._helpers = Helpers(self._learning, Failures(), self._summaries)
        self.config  # noqa: B018 - validate the proxy's settings now, so a bad option stops start-up

    @property
    def config(self) -> GovernanceConfig:
        """The explicit config, else ``litellm.callback_settings["governance"]``, else defaults."""
        if self._explicit is not None:
            return self._explicit
        settings = getattr(import_litellm(), "callback_settings", None)
        options = settings.get(SETTINGS_KEY) if isinstance(settings, Mapping) else None
        if self._from_settings is None or self._from_settings_source is not options:
            try:
                self._from_settings = GovernanceConfig.from_mapping(options)
            except ConfigError as exc:
                raise ConfigError(f"callback_settings.{SETTINGS_KEY}: {exc}") from None
            self._from_settings_source = options
        return self._from_settings

    # ---- governing: the two passes -------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """Proxy, before routing: fit the request to its model group (unless LiteLLM translates it for a
        deployment of the group: the translated call is governed)."""
        fmt = format_of(call_type)
        if self._disabled():
            return None
        if fmt is None:  # Codex's WebSocket session on a group whose compaction requests the gateway answers: refused
            session_compaction.refuse_websocket(data, call_type)
            return None
        group = data.get("model")
        prepared = session_compaction.before_routing(data, fmt, lambda: self.config)
        deployments = group_deployments(group, fmt)
        return await self._edit_then_govern(
            data,
            prepared,
            "pre_call",
            fmt,
            deployments=lambda: deployments,
            target_of=lambda _: group_target(group, self.config),
            govern=not any(later for _, later in deployments),
        )

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """After routing (proxy, SDK, Router; every fallback): fit to the chosen deployment."""
        fmt = format_of(call_type)
        if fmt is None or self._disabled():
            return None
        prepared = session_compaction.at_deployment(kwargs, fmt)
        if prepared is not None and "mock_response" in prepared:
            return prepared  # answered with the session's note: nothing goes to the model
        translated = translated_later(fmt, prepared or kwargs)
        return await self._edit_then_govern(
            kwargs,
            prepared,
            "deployment",
            fmt,
            deployments=lambda: [(deployment_target(prepared or kwargs), translated)],
            target_of=deployment_target,
            govern=not translated,
        )

    def _disabled(self) -> bool:
        """Whether the operator turned the hook off (a config that does not load is not "off": the pass
        reports it on the request)."""
        try:
            return not self.config.enabled
        except ConfigError:
            return False

    async def _edit_then_govern(
        self,
        request: dict[str, Any],
        prepared: dict[str, Any] | None,
        stage: Stage,
        fmt: Format,
        *,
        deployments: Callable[[], Sequence[tuple[Deployment, bool]]],
        target_of: Callable[[dict[str, Any]], Deployment],
        govern: bool,
    ) -> dict[str, Any] | None:
        """Context editing for what none of `deployments` does itself, then (if to `govern`) the pass for
        the target `target_of` names. The request as it goes on, or None: as it came."""
        changed = (
            context_editing.prepare(prepared or request, fmt, deployments, self.config.token_cache_size) or prepared
        )
        current = changed or request
        try:
            config = self.config if govern else None
        except ConfigError as exc:
            self._helpers.failures.config_error(current, fmt, stage, exc, fail_closed=False)
            config = None
        if config is not None and config.enabled:
            target = functools.partial(target_of, current)
            changed = await run_pass(current, stage, fmt, config, target_of=target, helpers=self._helpers) or changed
        session_compaction.reported(changed or request, fmt)
        return changed

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """Proxy, streaming: the applied context edits; the answer to a compaction request."""
        async for chunk in compaction_answers.streamed(request_data, context_editing.streamed(request_data, response)):
            yield chunk

    async def async_post_call_success_hook(self, data: dict[str, Any], user_api_key_dict: Any, response: Any) -> Any:
        """Proxy, JSON: the answer to a compaction request."""
        return compaction_answers.answered(data, response)

    async def async_post_call_response_headers_hook(
        self,
        data: dict[str, Any],
        user_api_key_dict: Any,
        response: Any,
        request_headers: dict[str, str] | None = None,
        litellm_call_info: dict[str, object] | None = None,
    ) -> dict[str, str] | None:
        """Proxy: a short header saying what governance did."""
        return header(data)

    # ---- calibration: the deployment hooks fire inline, with the request as sent (failures: LiteLLM
    # 1.100 and later); the log events once per client request, after the answer (streaming too).
    # Whichever sees an answer first learns from it: the estimate of what was sent is taken once.

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        """A deployment answered (not streaming): learn from ``usage``; report the applied context edits."""
        self._learning.learn_success(request_data, usage_of(response))
        return context_editing.answered(request_data, response)

    async def async_post_call_failure_deployment_hook(
        self, request_data: Mapping[str, Any], exception: Exception, call_type: Any, fallback_depth: int | None = None
    ) -> None:
        """A deployment rejected the request: a context-length error tightens its ratio at once."""
        self._learning.learn_failure(request_data, exception)

    async def async_log_success_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """A request succeeded (streaming ones too): learn from ``usage`` if no deployment hook did."""
        self._learning.learn_success(kwargs, usage_of_log_event(kwargs, response_obj))
        metrics().logged(kwargs, lambda: self.config)

    async def async_log_failure_event(
        self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        """A request failed: as the failure deployment hook, where LiteLLM has none."""
        exception = kwargs.get("exception")
        if isinstance(exception, BaseException):
            self._learning.learn_failure(kwargs, exception)
        metrics().logged(kwargs, lambda: self.config)

    def reset_calibration(self) -> None:
        """Forget the token ratios this process learned (the shared cache keeps its keys)."""
        self._learning.store.reset()


def completion(*, config: GovernanceConfig | None = None, **kwargs: Any) -> Any:
    """``litellm.completion`` with the request governed first. Without `config`, the options of the
    first `GovernanceHook` in ``litellm.callbacks`` apply (as they do to the async calls), else the
    defaults."""
    litellm = import_litellm()
    hooks = [c for c in getattr(litellm, "callbacks", None) or () if isinstance(c, GovernanceHook)]
    chosen = config if config is not None else hooks[0].config if hooks else None
    if chosen is not None and not chosen.enabled:
        return litellm.completion(**kwargs)
    governed = govern_request(kwargs, format="chat", config=chosen)
    log_report(governed.report, "sync")
    return litellm.completion(**governed.request)
