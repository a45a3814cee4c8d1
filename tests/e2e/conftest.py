"""Fixtures for end-to-end tests against a real LiteLLM proxy process.

* ``upstream`` (session): a :class:`~litellm_governance.testing.RecordingUpstream`;
  its recordings are cleared before every test (autouse ``_fresh_recordings``).
* ``proxy_factory`` (session): ``proxy_factory(callbacks=..., litellm_settings=...,
  callback_settings=..., router_settings=..., model_list=..., extra_config=...)``
  starts (or reuses, for an identical configuration) a proxy whose models point
  at ``upstream``; every proxy is stopped at the end of the session.
* ``proxy`` (session): the standard proxy, loading the governance hook
  (``litellm_governance.proxy_handler_instance``) plus the payload sink.

Plug in another callback without editing code::

    LITELLM_GOVERNANCE_E2E_CALLBACKS=probe_hooks.probe_instance \\
    LITELLM_GOVERNANCE_E2E_PYTHONPATH=/tmp/probe pytest -m e2e
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

_SRC = Path(__file__).resolve().parents[2]
if str(_SRC) not in sys.path:  # the package may not be installed in the venv
    sys.path.insert(0, str(_SRC))

from litellm_governance.testing import RecordingUpstream  # noqa: E402

from ._proxy import _LIVE, PAYLOAD_SINK_CALLBACK, ProxyProcess, start_proxy  # noqa: E402
from ._redis import own_redis_server, redis_server  # noqa: E402, F401 - fixtures for every e2e test

GOVERNANCE_CALLBACK = "litellm_governance.proxy_handler_instance"
E2E_DIR = Path(__file__).resolve().parent

# Model names as the upstream sees them (LiteLLM strips the provider prefix).
FAILING_UPSTREAM_MODEL = "up-failing"  # answers 400 "maximum context length"


def model_entry(name: str, model: str, api_base: str, **model_info: Any) -> dict[str, Any]:
    """One ``model_list`` entry: ``model`` is LiteLLM's ``provider/name``, e.g. ``"openai/up-small"``."""
    entry: dict[str, Any] = {
        "model_name": name,
        "litellm_params": {"model": model, "api_base": api_base, "api_key": "sk-fake"},
    }
    if model_info:
        entry["model_info"] = model_info
    return entry


def default_model_list(upstream: RecordingUpstream) -> list[dict[str, Any]]:
    """The standard models: small/big OpenAI windows, a strict-profile provider, a failing one."""
    base = upstream.base_url
    return [
        model_entry("small", "openai/up-small", base, max_input_tokens=4096),
        model_entry("big", "openai/up-big", base, max_input_tokens=128000),
        model_entry("strict", "hosted_vllm/up-strict", base, max_input_tokens=4096),
        model_entry("failing", f"openai/{FAILING_UPSTREAM_MODEL}", base, max_input_tokens=4096),
    ]


DEFAULT_ROUTER_SETTINGS: dict[str, Any] = {"fallbacks": [{"failing": ["big"]}], "num_retries": 0}


def _default_callbacks() -> list[str]:
    """``$LITELLM_GOVERNANCE_E2E_CALLBACKS`` (comma-separated), else the governance hook."""
    configured = os.environ.get("LITELLM_GOVERNANCE_E2E_CALLBACKS")
    if configured is not None:
        return [c.strip() for c in configured.split(",") if c.strip()]
    return [GOVERNANCE_CALLBACK]


def _extra_pythonpath() -> list[str]:
    value = os.environ.get("LITELLM_GOVERNANCE_E2E_PYTHONPATH", "")
    return [p for p in value.split(os.pathsep) if p]


ProxyFactory = Callable[..., ProxyProcess]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test in this directory ``e2e`` (so ``-m "not e2e"`` skips them), and ``litellm``
    (re-run for every LiteLLM version of the matrix) unless it measures the plugin at ``scale`` or
    runs the real agent ``clients`` (their runs are the pinned LiteLLM's)."""
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.e2e)
            if item.get_closest_marker("scale") is None and item.get_closest_marker("clients") is None:
                item.add_marker(pytest.mark.litellm)


@pytest.fixture(scope="session")
def upstream() -> Iterator[RecordingUpstream]:
    """The recording upstream all proxy models point at."""
    with RecordingUpstream(fail_models={FAILING_UPSTREAM_MODEL: 400}) as server:
        yield server


@pytest.fixture(scope="session")
def proxy_factory(upstream: RecordingUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyFactory]:
    """Start proxies on demand; identical configurations share one process."""
    started: dict[str, ProxyProcess] = {}

    def make(
        callbacks: Sequence[str] | None = None,
        *,
        payload_sink: bool = True,
        model_list: Sequence[Mapping[str, Any]] | None = None,
        litellm_settings: Mapping[str, Any] | None = None,
        callback_settings: Mapping[str, Any] | None = None,
        router_settings: Mapping[str, Any] | None = None,
        general_settings: Mapping[str, Any] | None = None,
        extra_config: Mapping[str, Any] | None = None,
        pythonpath: Sequence[str] = (),
        extra_env: Mapping[str, str] | None = None,
        fresh: bool = False,
    ) -> ProxyProcess:
        """Return a live proxy for this configuration (``callbacks=None`` means the defaults);
        `fresh`: a process of its own rather than one forked from the preloaded server."""
        chosen = list(_default_callbacks() if callbacks is None else callbacks)
        if payload_sink and PAYLOAD_SINK_CALLBACK not in chosen:
            chosen.append(PAYLOAD_SINK_CALLBACK)
        settings: dict[str, Any] = {"num_retries": 0, **(litellm_settings or {})}
        if chosen:
            settings["callbacks"] = chosen
        config: dict[str, Any] = {
            "model_list": [dict(m) for m in (model_list or default_model_list(upstream))],
            "litellm_settings": settings,
            "router_settings": dict(router_settings if router_settings is not None else DEFAULT_ROUTER_SETTINGS),
        }
        if callback_settings:
            config["callback_settings"] = dict(callback_settings)
        if general_settings:
            config["general_settings"] = dict(general_settings)
        config.update(extra_config or {})
        paths = [*pythonpath, *_extra_pythonpath()]
        key = json.dumps([config, paths, dict(extra_env or {}), fresh], sort_keys=True, default=str)
        proxy = started.get(key)
        if proxy is not None and proxy.alive():
            return proxy
        workdir = tmp_path_factory.mktemp("proxy")
        proxy = start_proxy(config, workdir=workdir, pythonpath=paths, extra_env=extra_env, fresh=fresh)
        started[key] = proxy
        return proxy

    try:
        yield make
    finally:
        for proxy in started.values():
            proxy.stop()


@pytest.fixture(scope="session")
def proxy(proxy_factory: ProxyFactory) -> ProxyProcess:
    """The standard proxy: default models and callbacks, plus the payload sink."""
    return proxy_factory()


@pytest.fixture(autouse=True)
def _fresh_recordings(upstream: RecordingUpstream) -> None:
    """Each test starts with an empty upstream recording and empty payload-sink files.

    Logging is asynchronous: a late record of the previous test can still land in the
    sink file, so select records by something unique to your request.
    """
    upstream.clear()
    for running in list(_LIVE):
        running.clear_payloads()
