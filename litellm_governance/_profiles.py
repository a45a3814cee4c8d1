"""Provider profiles: which message rules a provider enforces, as a table.

The evidence for each row is in PROVIDERS.md (shared spec): what each provider rejects and what
LiteLLM's own adapters already repair. A provider this table does not know gets ``strict``,
the profile every provider accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

__all__ = ["PROFILES", "Profile", "TrailingAssistant", "profile_for"]


class TrailingAssistant(Enum):
    """What happens to assistant messages at the end of the request (prefill)."""

    KEEP = "keep"
    DROP = "drop"
    #: Kept only when LiteLLM's model info says the model supports assistant prefill.
    IF_PREFILL = "if_prefill"


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The role rules of one family of providers."""

    name: str
    #: Merge consecutive user→user and assistant→assistant messages (losslessly).
    merge_consecutive: bool
    trailing_assistant: TrailingAssistant
    #: The first non-system message must be a user message (insert a synthetic one if not).
    first_must_be_user: bool
    #: Tool-call ids must be unique in the request (repeats are renamed, call and result alike).
    unique_tool_call_ids: bool
    #: The provider's tokenizer counts this many times tiktoken's figure (at most).
    token_ratio: float


PERMISSIVE = Profile(
    name="permissive",
    merge_consecutive=False,
    trailing_assistant=TrailingAssistant.KEEP,
    first_must_be_user=False,
    unique_tool_call_ids=False,
    token_ratio=1.0,
)
ANTHROPIC = Profile(
    name="anthropic",
    merge_consecutive=True,
    trailing_assistant=TrailingAssistant.IF_PREFILL,
    first_must_be_user=True,
    unique_tool_call_ids=True,
    # Claude's tokenizer counts 8-13 % more than o200k on the same text.
    token_ratio=1.15,
)
GEMINI = Profile(
    name="gemini",
    merge_consecutive=True,
    trailing_assistant=TrailingAssistant.DROP,
    first_must_be_user=True,
    # LiteLLM keeps Gemini thought signatures inside tool-call ids: never rewrite them.
    unique_tool_call_ids=False,
    token_ratio=1.1,
)
STRICT = Profile(
    name="strict",
    merge_consecutive=True,
    trailing_assistant=TrailingAssistant.DROP,
    first_must_be_user=True,
    unique_tool_call_ids=False,
    # Unknown tokenizers (GLM, Qwen, Kimi, Mistral, DeepSeek's counts 8-13 % above o200k).
    token_ratio=1.15,
)

PROFILES: Mapping[str, Profile] = {p.name: p for p in (PERMISSIVE, ANTHROPIC, GEMINI, STRICT)}

# LiteLLM provider string -> profile name. Providers that host several model families
# (bedrock, vertex_ai, openrouter) are resolved by model name in `profile_for`.
_BY_PROVIDER: Mapping[str, str] = {
    "openai": "permissive",
    "azure": "permissive",
    "azure_ai": "permissive",
    "text-completion-openai": "permissive",
    "groq": "permissive",
    "xai": "permissive",
    "ollama": "permissive",
    "ollama_chat": "permissive",
    "cohere": "permissive",
    "cohere_chat": "permissive",
    "anthropic": "anthropic",
    "anthropic_text": "anthropic",
    "gemini": "gemini",
    "vertex_ai_beta": "gemini",
}

# openrouter/<vendor>/<model>: OpenRouter's vendor names -> the LiteLLM provider they behave as.
_OPENROUTER_VENDORS: Mapping[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "gemini",
    "x-ai": "xai",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "z-ai": "zai",
    "mistralai": "mistral",
    "moonshotai": "moonshot",
    "qwen": "dashscope",
}


def profile_for(provider: str, model: str) -> Profile:
    """The profile for a LiteLLM provider string and model name (unknown → ``strict``)."""
    provider = provider.lower()
    model_lower = model.lower()
    if provider == "openrouter":
        vendor, _, rest = _strip_provider(model_lower, "openrouter").partition("/")
        if rest:
            return profile_for(_OPENROUTER_VENDORS.get(vendor, vendor), rest)
        return STRICT
    if provider.startswith("bedrock") or provider.startswith("vertex_ai"):
        if "claude" in model_lower or "anthropic" in model_lower:
            return ANTHROPIC
        if provider.startswith("vertex_ai") and "gemini" in model_lower:
            return GEMINI
        return STRICT
    return PROFILES[_BY_PROVIDER.get(provider, "strict")]


def _strip_provider(model: str, provider: str) -> str:
    prefix = provider + "/"
    return model[len(prefix) :] if model.startswith(prefix) else model
