"""What the plugin reads of LiteLLM's proxy and routing: the deployment a request is fitted to (the
deployment hook's, or a model group's widest), whether LiteLLM will translate a call's format, the
proxy's router and its shared Redis cache. It reads LiteLLM's proxy objects, never changes them."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import Any, Final

from .._config import GovernanceConfig
from .._errors import InvalidRequestError
from .._formats import FORMATS
from .._models import Deployment, import_litellm, quiet, resolve_model, widest_deployment
from .._request import Format

#: Seconds one shared-cache read or write may take; past that the process goes on with what it has.
SHARED_TIMEOUT: Final = 0.25


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


def proxy_router() -> Any:
    """The proxy's Router (None outside a proxy, or before the proxy built it)."""
    server = sys.modules.get("litellm.proxy.proxy_server")
    return getattr(server, "llm_router", None)


def proxy_deployments(group: str) -> list[Mapping[str, Any]]:
    """The ``model_list`` entries of the proxy's router for `group` (none outside a proxy)."""
    router = proxy_router()
    return list(router.get_model_list(model_name=group) or []) if router is not None else []


def group_deployments(group: object, fmt: Format) -> list[tuple[Deployment, bool]]:
    """The proxy model group's deployments, each with whether LiteLLM translates `fmt` for it."""
    found = []
    for entry in proxy_deployments(group) if isinstance(group, str) else ():
        params = entry.get("litellm_params")
        if not isinstance(params, Mapping) or not isinstance(params.get("model"), str):
            continue
        provider = params.get("custom_llm_provider")
        info = entry.get("model_info")
        kwargs = {"model": params["model"], "custom_llm_provider": provider, "model_info": info}
        target = Deployment(params["model"], provider if isinstance(provider, str) else None, info)
        found.append((target, translated_later(fmt, kwargs)))
    return found


def known_window(config: GovernanceConfig, target: Deployment) -> int | None:
    """The window `target` has (its ``model_info``, LiteLLM's model map, the configured default)."""
    return resolve_model(
        target.model, config=config, provider=target.provider, model_info=target.model_info
    ).max_input_tokens


def translated_later(fmt: Format, kwargs: Mapping[str, Any]) -> bool:
    """Whether LiteLLM will translate this ``/v1/messages`` or ``/v1/responses`` call into another
    format for its deployment (its inner call is then governed instead): LiteLLM's own provider table
    says, as its dispatch does (15-30 µs); when that cannot be told, it is governed here too."""
    model, provider = kwargs.get("model"), kwargs.get("custom_llm_provider")
    spec = FORMATS[fmt]
    if spec.litellm_config is None or not isinstance(model, str):
        return False  # LiteLLM calls every provider in this format
    endpoints = (model_info_of(kwargs) or {}).get("supported_endpoints")
    if isinstance(endpoints, (list, tuple)) and spec.route in endpoints:
        return False  # the operator declared the deployment serves this route untranslated
    litellm = import_litellm()
    try:
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        if not isinstance(provider, str) or not provider:
            with quiet(litellm):
                provider = litellm.get_llm_provider(model=model)[1]
        native = getattr(ProviderConfigManager, spec.litellm_config)(model=model, provider=LlmProviders(provider))
    except Exception:  # noqa: BLE001 - any LiteLLM version or provider we cannot ask: govern here
        return False
    return native is None


def shared_cache() -> Any:
    """The Redis client of LiteLLM's own cross-instance cache in this proxy process, or None: the
    internal usage DualCache's (what LiteLLM's rate limiters share), else the Router's (a proxy whose
    only Redis is ``router_settings: redis_host``). Read on every use: the proxy attaches Redis after
    loading its callbacks."""
    server = sys.modules.get("litellm.proxy.proxy_server")
    usage = getattr(getattr(server, "proxy_logging_obj", None), "internal_usage_cache", None)
    redis = getattr(getattr(usage, "dual_cache", None), "redis_cache", None)
    if redis is None:
        redis = getattr(_router_cache(getattr(server, "llm_router", None)), "redis_cache", None)
    if redis is None or not hasattr(redis, "async_get_cache") or not hasattr(redis, "async_set_cache"):
        return None
    return redis


def _router_cache(router: object) -> object:
    """The Router's DualCache: ``router.cache`` (LiteLLM up to 1.109), ``router.health().store`` after."""
    try:
        health = getattr(router, "health", None)
        store = getattr(health(), "store", None) if callable(health) else None
        return store if store is not None else getattr(router, "cache", None)
    except Exception:  # noqa: BLE001 - another LiteLLM's Router: no shared cache then
        return None


async def shared_get(cache: Any, key: str) -> object:
    """The shared cache's value at `key` (None: none), or an exception. LiteLLM's RedisCache answers
    None both for a missing key and when Redis failed (it logs and swallows the error): only a live
    Redis (a ping) makes "missing" true."""
    value = await asyncio.wait_for(cache.async_get_cache(key), SHARED_TIMEOUT)
    ping = getattr(cache, "ping", None) if value is None else None
    if ping is not None and not await asyncio.wait_for(ping(), SHARED_TIMEOUT):
        raise ConnectionError("ping failed")
    return value


async def shared_set(cache: Any, key: str, value: object, ttl: int) -> None:
    await asyncio.wait_for(cache.async_set_cache(key, value, ttl=ttl), SHARED_TIMEOUT)
