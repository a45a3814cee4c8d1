"""What governance needs to know about a model: its provider, context window and prefill support.

The window comes from the config's ``context_window_tokens``, else the deployment's ``model_info``,
else LiteLLM's model map, else the config's ``default_context_window_tokens``. LiteLLM is imported
only when its model map is needed, and its environment is left to the host process.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from ._config import GovernanceConfig, short_repr

__all__ = ["Deployment", "ModelFacts", "resolve_model", "widest_deployment"]

# Provider prefixes recognised without importing LiteLLM (LiteLLM's own provider strings).
_KNOWN_PREFIXES: Final = frozenset(
    {
        "openai", "azure", "azure_ai", "groq", "xai", "ollama", "ollama_chat", "cohere", "cohere_chat",
        "anthropic", "gemini", "vertex_ai", "vertex_ai_beta", "bedrock", "openrouter", "zai",
        "bigmodel", "deepseek", "moonshot", "dashscope", "mistral", "hosted_vllm", "together_ai",
        "fireworks_ai", "deepinfra", "perplexity", "cerebras", "sambanova", "nvidia_nim",
        "huggingface", "replicate", "databricks", "watsonx", "sagemaker", "volcengine", "minimax",
        "lm_studio", "llamafile", "text-completion-openai", "github", "github_copilot", "litellm_proxy",
    }
)  # fmt: skip


@dataclass(frozen=True)
class ModelFacts:
    """A model as governance sees it."""

    provider: str
    max_input_tokens: int | None
    #: "config", "deployment", "litellm", "default" or "unknown"
    window_source: str
    #: From the deployment's model_info; None = ask `supports_prefill` (LiteLLM's model map).
    supports_prefill: bool | None
    #: Profile named by the deployment's model_info (``governance_profile``), if any.
    profile: str | None = None
    bare_model: str = ""
    #: The output limit the operator stated in the deployment's ``model_info`` (None: none stated).
    max_output_tokens: int | None = None

    def prefill_supported(self, model: str) -> bool:
        """Whether the model accepts a trailing assistant message (assistant prefill)."""
        if self.supports_prefill is not None:
            return self.supports_prefill
        return _litellm_facts(model, self.provider, self.bare_model)[1]


@lru_cache(maxsize=4096)
def split_provider(model: str, provider: str | None = None) -> tuple[str, str]:
    """(provider, model without the provider prefix); provider "" when it cannot be told."""
    prefix, _, rest = model.partition("/")
    if provider:
        return provider, rest if prefix == provider and rest else model
    if rest and prefix in _KNOWN_PREFIXES:
        return prefix, rest
    litellm = import_litellm()
    try:
        with quiet(litellm):
            bare, found, _, _ = litellm.get_llm_provider(model=model)
    except Exception:  # noqa: BLE001 - LiteLLM raises several types for unknown models
        return "", model
    return str(found or ""), str(bare or model)


_QUIET_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet(litellm: Any) -> Iterator[None]:
    """Keep LiteLLM's "Provider List: …" banner (printed for names it does not know, such as a
    proxy alias) off the caller's stdout while we ask."""
    with _QUIET_LOCK:
        previous = getattr(litellm, "suppress_debug_info", False)
        litellm.suppress_debug_info = True
        try:
            yield
        finally:
            litellm.suppress_debug_info = previous


def resolve_model(
    model: str,
    *,
    config: GovernanceConfig,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
) -> ModelFacts:
    """Provider, window and prefill support for `model` (a LiteLLM model string)."""
    provider, bare = split_provider(model, provider)
    info = model_info or {}
    prefill, profile = info.get("supports_assistant_prefill"), info.get("governance_profile")
    window: int | None
    if config.context_window_tokens is not None:
        window, source = config.context_window_tokens, "config"
    elif (window := _positive_int(info.get("max_input_tokens"))) is not None:
        source = "deployment"
    elif (window := _litellm_facts(model, provider, bare)[0]) is not None:
        source = "litellm"
    elif config.default_context_window_tokens is not None:
        window, source = config.default_context_window_tokens, "default"
    else:
        source = "unknown"
    return ModelFacts(
        provider=provider,
        max_input_tokens=window,
        window_source=source,
        supports_prefill=prefill if isinstance(prefill, bool) else None,
        profile=profile if isinstance(profile, str) else None,
        bare_model=bare,
        max_output_tokens=_positive_int(info.get("max_output_tokens")),
    )


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def import_litellm() -> Any:
    """LiteLLM, imported on first need (it takes seconds)."""
    import litellm

    return litellm


@lru_cache(maxsize=4096)
def _litellm_facts(model: str, provider: str, bare: str) -> tuple[int | None, bool]:
    """(max_input_tokens, supports_assistant_prefill) from LiteLLM's model map, trying the names
    LiteLLM may know the model under (``get_model_info`` rejects many prefixed names)."""
    litellm = import_litellm()
    names = [model, bare]
    if provider:
        names.append(f"{provider}/{bare}")
    if provider == "openrouter" and "/" in bare:
        names.append(bare.split("/", 1)[1])
    if "/" in bare:
        names.append(bare.rsplit("/", 1)[1])
    for name in dict.fromkeys(names):
        for hint in ((provider or None), None):
            try:
                with quiet(litellm):
                    info = litellm.get_model_info(name, custom_llm_provider=hint)
            except Exception:  # noqa: BLE001 - ModelNotMappedError and friends
                continue
            window = _positive_int(info.get("max_input_tokens"))
            if window is not None:
                return window, bool(info.get("supports_assistant_prefill"))
    return None, False


#: The ``model_info`` fields governance depends on (a deployment's `Deployment.key`).
GOVERNANCE_FIELDS: Final = ("max_input_tokens", "max_output_tokens", "supports_assistant_prefill", "governance_profile")


@dataclass(frozen=True)
class Deployment:
    """The model a request is governed for: a deployment (proxy model group, Router, SDK call) or a model name."""

    model: str
    provider: str | None = None
    model_info: Mapping[str, Any] | None = None

    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        """What governance depends on: provider and bare model (``anthropic/claude-…`` and ``claude-…``
        with the provider apart are one deployment) and the governance fields of ``model_info``."""
        info = self.model_info or {}
        provider, bare = split_provider(self.model, self.provider)
        return provider, bare, tuple((k, repr(info.get(k))) for k in GOVERNANCE_FIELDS)

    def describe(self) -> str:
        """``deployment 'model' (model_info.id '…')``, for messages about it."""
        ident = (self.model_info or {}).get("id")
        return f"deployment {self.model!r}" + (f" (model_info.id {short_repr(ident)})" if ident else "")


def widest_deployment(deployments: Iterable[Mapping[str, Any]], config: GovernanceConfig) -> Deployment | None:
    """Of a model group's deployments (``model_list`` entries of a proxy config or Router), the one
    with the largest window: fitting to it drops the least that some deployment could take."""
    best: tuple[int, Deployment] | None = None
    for entry in deployments:
        params = entry.get("litellm_params") if isinstance(entry, Mapping) else None
        if not isinstance(params, Mapping) or not isinstance(model := params.get("model"), str) or not model:
            continue
        provider, info = params.get("custom_llm_provider"), entry.get("model_info")
        provider = provider if isinstance(provider, str) and provider else None
        info = info if isinstance(info, Mapping) else None
        size = resolve_model(model, config=config, provider=provider, model_info=info).max_input_tokens or 0
        if best is None or size > best[0]:
            best = (size, Deployment(model, provider, info))
    return best[1] if best is not None else None
