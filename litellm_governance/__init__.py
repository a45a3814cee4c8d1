"""litellm-governance: fit every agent request to its model's context window and repair it so
the provider accepts it, as a LiteLLM callback — chat completions, Anthropic ``/v1/messages`` and
OpenAI ``/v1/responses`` alike.

    from litellm_governance import govern, GovernanceConfig

    result = govern(messages, model="zai/glm-4.6")
    result.messages            # governed copy
    result.report.to_dict()    # what was done: counts and token figures

`govern_anthropic`, `govern_responses` and `govern_request` (any of the three bodies) do the same for
the other formats. In a LiteLLM proxy config::

    litellm_settings:
      callbacks: litellm_governance.proxy_handler_instance

`GovernanceHook` and `proxy_handler_instance` import LiteLLM (seconds), so they load on first use.
Importing the package changes nothing in the process. Test helpers: `litellm_governance.testing`.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

from ._config import AGENT_TOOLS, DEFAULT_COMPACTABLE_TOOLS, NANOBOT_TOOLS, TOOL_PRESETS, GovernanceConfig
from ._errors import ConfigError, GovernanceError, InvalidRequestError, TokenizerUnavailableError
from ._pipeline import AnthropicResult, GovernanceResult, ResponsesResult, govern, govern_anthropic, govern_responses
from ._profiles import PROFILES, Profile
from ._report import GovernanceReport
from ._request import GovernedRequest, detect_format, govern_request

if TYPE_CHECKING:
    from .integration import GovernanceHook, proxy_handler_instance

__all__ = [
    "AGENT_TOOLS",
    "DEFAULT_COMPACTABLE_TOOLS",
    "NANOBOT_TOOLS",
    "PROFILES",
    "TOOL_PRESETS",
    "AnthropicResult",
    "ConfigError",
    "GovernanceConfig",
    "GovernanceError",
    "GovernanceHook",
    "GovernanceReport",
    "GovernanceResult",
    "GovernedRequest",
    "InvalidRequestError",
    "Profile",
    "ResponsesResult",
    "TokenizerUnavailableError",
    "detect_format",
    "govern",
    "govern_anthropic",
    "govern_request",
    "govern_responses",
    "proxy_handler_instance",
]


def _installed_version() -> str:
    """The installed distribution's version, or ``0+unknown`` from a checkout never installed."""
    try:
        return _metadata.version("litellm-governance")
    except _metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()


def __getattr__(name: str) -> Any:
    if name in ("GovernanceHook", "proxy_handler_instance"):
        from . import integration

        return getattr(integration, name)
    raise AttributeError(f"module 'litellm_governance' has no attribute {name!r}")
