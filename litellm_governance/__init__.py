"""litellm-governance: fit every chat request to its model's context window and repair it so
the provider accepts it, as a LiteLLM callback.

    from litellm_governance import govern, GovernanceConfig

    result = govern(messages, model="zai/glm-4.6")
    result.messages            # governed copy
    result.report.to_dict()    # what was done: counts and token figures

In a LiteLLM proxy config::

    litellm_settings:
      callbacks: litellm_governance.proxy_handler_instance

`GovernanceHook` and `proxy_handler_instance` import LiteLLM (seconds); they load on first use,
so `govern()` alone stays fast to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._config import DEFAULT_COMPACTABLE_TOOLS, GovernanceConfig
from ._errors import ConfigError, GovernanceError, InvalidRequestError, TokenizerUnavailableError
from ._pipeline import GovernanceResult, govern
from ._profiles import PROFILES, Profile
from ._report import GovernanceReport

if TYPE_CHECKING:
    from .integration import GovernanceHook, govern_sync_request

__all__ = [
    "DEFAULT_COMPACTABLE_TOOLS",
    "PROFILES",
    "ConfigError",
    "GovernanceConfig",
    "GovernanceError",
    "GovernanceHook",
    "GovernanceReport",
    "GovernanceResult",
    "InvalidRequestError",
    "Profile",
    "TokenizerUnavailableError",
    "govern",
    "govern_sync_request",
    "proxy_handler_instance",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in ("GovernanceHook", "proxy_handler_instance", "govern_sync_request"):
        from . import integration

        return getattr(integration, name)
    raise AttributeError(f"module 'litellm_governance' has no attribute {name!r}")
