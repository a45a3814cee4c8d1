"""LiteLLM integration: the only package that talks to LiteLLM's hook API, one module per concern.

Where governance runs (see docs/formats.md for what each hook sees, per request format and deployment kind):

* ``async_pre_call_hook``: the proxy only, before routing, for chat completions
  (``acompletion``), Anthropic Messages (``anthropic_messages``, ``/v1/messages``) and Responses
  (``aresponses``). ``data["model"]`` is the public model group; the request is fitted to the
  group's deployment with the largest window (the least that must go), in its own format, so
  other proxy hooks and rate limits see the governed request.
* ``async_pre_call_deployment_hook``: after a deployment is chosen, in the proxy, the SDK
  (``litellm.acompletion``, ``litellm.anthropic.messages.acreate``, ``litellm.aresponses``,
  streaming too) and ``Router``, again for every fallback. The request is fitted to that
  deployment: its model, provider and ``model_info``. When LiteLLM is about to translate the call
  into another format for this deployment (``/v1/messages`` to a chat provider or to OpenAI's
  Responses API, ``/v1/responses`` to a chat-only provider), this pass leaves it alone: the
  hook fires again on the translated inner call, in the format the provider will receive, and
  governs it there, once. When the proxy already governed the same history for the same target,
  this pass returns at once.
* Synchronous ``litellm.completion`` / ``Router.completion`` run no hook that can change the
  messages: call `completion` here, or `govern_request` on the kwargs yourself.

Modules: `hook` (`GovernanceHook`: the hook methods, each handing its work on), `passes` (one pass,
and the state that makes the proxy's second pass a cheap no-op), `overrides` (per-request
``metadata.governance``, pure), `routing` (which deployment a request is fitted to; whether LiteLLM
will translate it), `learning` and `calibration_store` (calibration: learned token ratios per
deployment, shared through the proxy's Redis), `reporting` (report placement, header, log line),
`failures` (fail open or closed), `metrics` (Prometheus series, next to LiteLLM's on the proxy's
``/metrics``), `startup` (``proxy_handler_instance``, start-up checks), `sync` (the synchronous
`completion`), `fields` (where things live in LiteLLM's requests), `logonce`, `summaries` (a summary
model's summaries of cut turns, off the request path), `context_editing` (Anthropic's context editing
and compaction where the deployment lacks them, and the ``applied_edits`` of the answer),
`session_compaction` and `compaction_answers` (Codex's remote compaction, ``compaction_trigger``,
answered with one compaction item where the deployment cannot, and the item read back later).

Reporting: the report goes into ``spend_logs_metadata.governance`` of the request's LiteLLM
metadata (``metadata`` for chat, ``litellm_metadata`` for ``/v1/messages`` and ``/v1/responses``,
whose ``metadata`` is the provider's own field) — the key LiteLLM's standard logging payload
keeps, so every logging integration sees it —, a short ``x-litellm-governance`` response header
from the proxy, one INFO log line per changed request on the ``litellm_governance`` logger, and
Prometheus metrics (`metrics`: requests by outcome, tokens removed per stage, latency, the token
ratio in use, context-length rejections; labels are model groups and deployments only).
Counts and token figures only, never content.

Calibration (``calibrate``, on by default; the estimator is `_calibration`): both passes budget
with the deployment's learned ratio (provider tokens per tiktoken token; key: ``model_info.id``,
else model + ``api_base``) once it has one, and remember, by LiteLLM's ``litellm_call_id``, the
estimate of what they sent. The answer teaches: ``usage`` in
``async_post_call_success_deployment_hook`` (inline) or ``async_log_success_event`` (streaming; the
log event's ``messages`` are the client's, so the remembered estimate is used, never those); a
context-length rejection in ``async_post_call_failure_deployment_hook`` (inline, before a
``context_window_fallbacks`` fallback runs; ``async_log_failure_event`` where LiteLLM has no such
hook) tightens the ratio at once. Learned ratios are per process, and shared through the Redis of
LiteLLM's own DualCache where the proxy has one (`calibration_store.shared_cache`), under
`calibration_store.CALIBRATION_KEY_PREFIX`.

Failure: an internal error logs a warning and lets the original request through (fail-open),
unless the operator set ``fail_closed``, in which case the client gets a 400. A configuration
error (an unknown profile in a deployment's ``model_info``) stops the proxy's start-up when its config
has it, and is reported as one, naming the field, every minute at most while it lasts when it comes
later (a deployment added at run time).

Importing this package imports LiteLLM and changes nothing else in the process: no environment
variable, no logging handler (the proxy's `proxy_handler_instance` adds one, when first used).
"""

from __future__ import annotations

from typing import Any

from .._request import GovernedRequest, govern_request
from .hook import GovernanceHook
from .reporting import HEADER
from .sync import completion

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
# The instance, once built.
_built: dict[str, GovernanceHook] = {}


def __getattr__(name: str) -> Any:
    # `proxy_handler_instance` is built on first access (the proxy's config loader), not at import,
    # so Python users importing GovernanceHook get no handler added to their logging.
    if name == "proxy_handler_instance":
        if name not in _built:
            from .startup import proxy_instance

            _built[name] = proxy_instance()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
