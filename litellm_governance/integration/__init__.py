"""LiteLLM integration: the only package that talks to LiteLLM's hook API, one module per concern.

``async_pre_call_hook`` (the proxy, before routing) fits a request to its model group's widest
deployment; ``async_pre_call_deployment_hook`` (proxy, SDK, ``Router``, every fallback) to the chosen
deployment — or, when LiteLLM is about to translate the call into another format, leaves it to the
translated inner call, governed once — and returns at once when the proxy already governed the same
history for the same target. Synchronous ``litellm.completion`` runs no hook that can change the
messages: call `completion`. See docs/formats.md and docs/operations.md. Importing this package
imports LiteLLM and changes nothing else in the process.
"""

from __future__ import annotations

from typing import Any

from .._request import GovernedRequest, govern_request
from .fields import HEADER
from .hook import GovernanceHook, completion

__all__ = [
    "HEADER",
    "GovernanceHook",
    "GovernedRequest",
    "completion",
    "govern_request",
    "proxy_handler_instance",
]

#: The ready instance for ``litellm_settings: callbacks: litellm_governance.proxy_handler_instance``.
proxy_handler_instance: GovernanceHook
_built: dict[str, GovernanceHook] = {}


def __getattr__(name: str) -> Any:
    # Built on first access (the proxy's config loader), not at import: Python users importing
    # GovernanceHook get no handler added to their logging.
    if name == "proxy_handler_instance":
        if name not in _built:
            from .startup import proxy_instance

            _built[name] = proxy_instance()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
