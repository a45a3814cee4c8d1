"""LiteLLM routing probes: the deployment a request is fitted to (from the deployment hook's kwargs,
or a proxy model group's widest deployment), and whether LiteLLM will translate a call's format."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._config import GovernanceConfig
from .._errors import InvalidRequestError
from .._formats import FORMATS
from .._models import Deployment, import_litellm, quiet, resolve_model, widest_deployment
from .._request import Format

__all__ = [
    "deployment_target",
    "group_target",
    "known_window",
    "model_info_of",
    "proxy_deployments",
    "translated_later",
]


def model_info_of(kwargs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The deployment's ``model_info`` LiteLLM passes with a call (in its metadata, or top-level)."""
    for holder in (kwargs.get("metadata"), kwargs.get("litellm_metadata")):
        if isinstance(holder, Mapping) and isinstance(holder.get("model_info"), Mapping):
            return holder["model_info"]  # type: ignore[no-any-return]
    info = kwargs.get("model_info")
    return info if isinstance(info, Mapping) else None


def deployment_target(kwargs: Mapping[str, Any]) -> Deployment:
    """The deployment the deployment hook's call goes to: its model, provider and ``model_info``."""
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("the request has no 'model'")
    provider = kwargs.get("custom_llm_provider")
    return Deployment(model, provider if isinstance(provider, str) and provider else None, model_info_of(kwargs))


def group_target(group: object, config: GovernanceConfig) -> Deployment:
    """The proxy's deployment of model group `group` with the largest window (or `group` itself)."""
    if not isinstance(group, str) or not group:
        raise InvalidRequestError("the request has no 'model'")
    widest = widest_deployment(proxy_deployments(group), config)
    return widest if widest is not None else Deployment(group)


def proxy_deployments(group: str) -> list[Mapping[str, Any]]:
    """The ``model_list`` entries of the proxy's router for `group` (none outside a proxy)."""
    try:
        from litellm.proxy.proxy_server import llm_router
    except ImportError:  # pragma: no cover - only the proxy calls this hook
        return []
    if llm_router is None:
        return []
    return list(llm_router.get_model_list(model_name=group) or [])


def known_window(config: GovernanceConfig, target: Deployment) -> int | None:
    """The window `target` has (its ``model_info``, LiteLLM's model map, the configured default)."""
    return resolve_model(
        target.model, config=config, provider=target.provider, model_info=target.model_info
    ).max_input_tokens


def translated_later(fmt: Format, kwargs: Mapping[str, Any]) -> bool:
    """Whether LiteLLM will translate this ``/v1/messages`` or ``/v1/responses`` call into
    another format for its deployment (its inner call is then governed instead). Asks LiteLLM's
    own provider table, as its dispatch does; when that cannot be told, governs here too."""
    model = kwargs.get("model")
    provider = kwargs.get("custom_llm_provider")
    if FORMATS[fmt].litellm_config is None:
        return False  # LiteLLM calls every provider in this format
    info = model_info_of(kwargs) or {}
    endpoints = info.get("supported_endpoints")
    route = FORMATS[fmt].route
    if isinstance(endpoints, (list, tuple)) and route in endpoints:
        return False  # the operator declared the deployment serves this route untranslated
    if not isinstance(model, str):
        return False
    return _translated(fmt, model, provider if isinstance(provider, str) else None)


@functools.lru_cache(maxsize=1024)
def _translated(fmt: Format, model: str, provider: str | None) -> bool:
    litellm = import_litellm()
    try:
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        if not provider:
            with quiet(litellm):
                provider = litellm.get_llm_provider(model=model)[1]
        native_config = getattr(ProviderConfigManager, FORMATS[fmt].litellm_config or "")
        native = native_config(model=model, provider=LlmProviders(provider))
    except Exception:  # noqa: BLE001 - any LiteLLM version or provider we cannot ask: govern here
        return False
    return native is None
