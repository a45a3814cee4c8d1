"""LiteLLM integration: the only package that talks to LiteLLM's hook API, one module per concern.

* ``async_pre_call_hook`` (the proxy, before routing): the request is fitted to its model group's
  deployment with the largest window, in its own format, so other proxy hooks see it governed.
* ``async_pre_call_deployment_hook`` (proxy, SDK, ``Router``; again on every fallback): fitted to the
  chosen deployment. A call LiteLLM is about to translate into another format is left alone: the
  hook fires again on the translated inner call, which is governed, once. When the proxy already
  governed the same history for the same target, this pass returns at once.
* Synchronous ``litellm.completion`` runs no hook that can change the messages: call `completion`.

Modules: `hook` (the callback, `completion`), `passes` (one pass and the proxy's pass state),
`overrides` (per-request ``metadata.governance``), `routing` (what is read of LiteLLM's proxy and
routing), `fields` (where the plugin's data sits in a request, the report and header), `failures`
(logging; fail open or closed), `learning` (calibration), `metrics`, `startup`
(``proxy_handler_instance``), `summaries` (a summary model's summaries of cut turns),
`context_editing` (Anthropic's context editing and compaction where the deployment lacks them),
`session_compaction` and `compaction_answers` (Codex's remote compaction answered at the gateway).
See docs/formats.md, docs/calibration.md and docs/operations.md. Importing this package imports
LiteLLM and changes nothing else in the process.
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
