"""Start-up in a proxy: the ready hook instance (``proxy_handler_instance``), the start-up log line,
and checks of what the operator wrote (a misspelt ``callback_settings`` section, the governance
fields of every deployment in ``model_list``)."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, Final

from .._config import GovernanceConfig, short_repr, suggestion
from .._errors import ConfigError
from .._models import import_litellm
from .._profiles import PROFILES
from .failures import logger
from .fields import SETTINGS_KEY
from .hook import GovernanceHook
from .metrics import metrics
from .routing import proxy_router

#: How the proxy's log lines look when the operator configured no logging for us.
LOG_FORMAT: Final = "%(asctime)s - litellm_governance - %(levelname)s - %(message)s"
# Seconds to wait for the proxy to build its router (it loads callbacks first), and between looks.
_ROUTER_WAIT: Final = 120.0
_ROUTER_POLL: Final = 0.2
# The model_info fields litellm-governance reads.
_MODEL_INFO_FIELDS: Final = ("governance_profile",)


def proxy_instance() -> GovernanceHook:
    """The hook for the proxy's config loader: logging set up (unless the operator did), settings
    checked (a wrong one stops start-up), one start-up line saying what is active, the model list
    checked again once the router exists."""
    if not logger.handlers and logger.level == logging.NOTSET:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    _check_proxy_settings()
    try:
        hook = GovernanceHook()
        models = _configured_model_list()
        problems = validate_deployments(models)
        if problems:
            raise ConfigError("; ".join(problems))
        for warning in output_warnings(models, hook.config):
            logger.warning("%s", warning)
    except ConfigError as exc:
        logger.error("litellm-governance cannot start: %s", exc)
        raise
    from .. import __version__

    logger.info(
        "litellm-governance %s active (chat, /v1/messages, /v1/responses): %s; %s",
        __version__,
        hook.config.describe(),
        metrics().describe(),
    )
    _validate_proxy_models_soon()
    return hook


def _check_proxy_settings() -> None:
    """Warn about a ``callback_settings`` section that looks like a misspelling of ours."""
    settings = getattr(import_litellm(), "callback_settings", None)
    for name in settings if isinstance(settings, Mapping) else ():
        if isinstance(name, str) and name != SETTINGS_KEY and suggestion(name, [SETTINGS_KEY]):
            logger.warning(
                "callback_settings.%s is not read by litellm-governance: did you mean callback_settings.%s?",
                short_repr(name)[1:-1],
                SETTINGS_KEY,
            )


def _configured_model_list() -> list[Mapping[str, Any]]:
    """The ``model_list`` of the config the proxy is loading (LiteLLM keeps the whole config before
    it loads callbacks, and builds its router after them); empty outside a proxy."""
    server = sys.modules.get("litellm.proxy.proxy_server")
    config = getattr(getattr(server, "proxy_config", None), "config", None)
    models = config.get("model_list") if isinstance(config, Mapping) else None
    return [m for m in models if isinstance(m, Mapping)] if isinstance(models, list) else []


def validate_deployments(deployments: list[Mapping[str, Any]]) -> list[str]:
    """Problems in the governance fields of a proxy's ``model_list`` (an unknown profile, a misspelt
    field), one line each, naming the deployment and the field, with a "did you mean"."""
    problems: list[str] = []
    for where, info in _model_infos(deployments):
        for key in info:
            if isinstance(key, str) and key.startswith("governance") and key not in _MODEL_INFO_FIELDS:
                hint = suggestion(key, list(_MODEL_INFO_FIELDS))
                problems.append(
                    f"{where}: model_info.{short_repr(key)[1:-1]} is not a field litellm-governance reads{hint}"
                )
        profile = info.get("governance_profile")
        if profile is not None and profile not in PROFILES:
            hint = suggestion(str(profile), list(PROFILES))
            problems.append(f"{where}: model_info.governance_profile is not one of {', '.join(sorted(PROFILES))}{hint}")
    return problems


def _model_infos(deployments: list[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each deployment with a ``model_info``: where it is (``model_list[i] (model_name 'x')``) and it."""
    found = []
    for index, deployment in enumerate(deployments):
        info = deployment.get("model_info") if isinstance(deployment, Mapping) else None
        if isinstance(info, Mapping):
            found.append((f"model_list[{index}] (model_name {short_repr(deployment.get('model_name'))})", info))
    return found


def output_warnings(deployments: list[Mapping[str, Any]], config: GovernanceConfig) -> list[str]:
    """A max output — the deployment's own, or the plugin's default — at or above a deployment's
    window (the reservation is capped at ``max_output_share`` of the window, but the setting is not
    what the operator meant)."""
    found = []
    cap = f"the reservation is capped at max_output_share ({config.max_output_share}) of the window"
    for where, info in _model_infos(deployments):
        window = info.get("max_input_tokens")
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
            continue
        stated = info.get("max_output_tokens")
        if isinstance(stated, int) and not isinstance(stated, bool) and stated >= window:
            found.append(f"{where}: model_info.max_output_tokens ({stated}) is not below its window ({window}): {cap}")
        if config.max_output_tokens >= window:
            found.append(
                f"{where}: the governance option max_output_tokens ({config.max_output_tokens}) is not below its "
                f"window ({window}): {cap}"
            )
    return found


def _validate_proxy_models_soon() -> None:
    """Once the proxy has built its router (callbacks load before the model list), check every
    deployment's governance fields: what is found then came later (models added at run time)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    deadline = time.monotonic() + _ROUTER_WAIT

    def check() -> None:
        router = proxy_router()
        if router is None:
            if time.monotonic() < deadline:
                loop.call_later(_ROUTER_POLL, check)
            return
        for problem in validate_deployments(list(getattr(router, "model_list", None) or [])):
            logger.error("configuration error: %s (requests to it are sent ungoverned)", problem)

    loop.call_soon(check)
