"""Provider profiles: which message rules a provider enforces, as a table.

The evidence for each row is in the docs' provider pages (docs/providers/): what each provider
rejects (the error texts and where they were reported) and what LiteLLM's own adapters already
repair. A provider this table does not know gets ``strict``, the profile every provider accepts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

__all__ = ["PROFILES", "MidSystem", "Profile", "Reasoning", "TrailingAssistant", "profile_for"]


class TrailingAssistant(Enum):
    """What happens to assistant messages at the end of the request (prefill)."""

    KEEP = "keep"
    DROP = "drop"
    #: Kept only when LiteLLM's model info says the model supports assistant prefill.
    IF_PREFILL = "if_prefill"


class MidSystem(Enum):
    """What a system (or developer) message after the start of the conversation becomes."""

    #: Left where it is (OpenAI accepts system messages anywhere).
    KEEP = "keep"
    #: Turned into a user message in place, labelled as a system note, and merged with its
    #: neighbours (GLM, vLLM chat templates, Mistral, Bedrock and Claude reject or convert it).
    TO_USER = "to_user"
    #: Moved up to the system prompt (Gemini takes every system message as system_instruction).
    HOIST = "hoist"


class Reasoning(Enum):
    """Where a thinking-mode provider needs ``reasoning_content`` sent back (chat format)."""

    NONE = "none"
    #: On assistant messages with tool calls (Kimi).
    TOOL_CALLS = "tool_calls"
    #: On every assistant message (DeepSeek checks each one in a turn that called tools).
    ALL = "all"


@dataclass(frozen=True, kw_only=True)
class Profile:
    """The rules of one family of providers (the defaults are `STRICT`'s)."""

    name: str
    #: Merge consecutive user→user and assistant→assistant messages (losslessly).
    merge_consecutive: bool = True
    trailing_assistant: TrailingAssistant = TrailingAssistant.DROP
    #: The first non-system message must be a user message (insert a synthetic one if not).
    first_must_be_user: bool = True
    #: Tool-call ids must be unique in the whole request (repeats are renamed, call and result
    #: alike). Repeats inside one assistant message are renamed on every profile.
    unique_tool_call_ids: bool = False
    #: The provider's tokenizer counts this many times tiktoken's figure (at most). Unknown
    #: tokenizers (GLM, Qwen, Kimi, Mistral) and DeepSeek's and Claude's count 8-13 % above o200k.
    token_ratio: float = 1.15
    #: What a mid-conversation system message becomes.
    mid_system: MidSystem = MidSystem.TO_USER
    #: Blank text is rejected: blank text parts are dropped and empty user messages too.
    no_empty_text: bool = True
    #: Tool-call ids must be exactly 9 letters and digits (Mistral).
    nine_char_ids: bool = False
    #: An assistant message must come between tool results and the next user message (Mistral:
    #: "Unexpected role 'user' after role 'tool'"; Bedrock Converse merges them into one turn and
    #: rejects "Conversation blocks and tool result blocks ... in the same turn").
    assistant_after_tool: bool = False
    reasoning: Reasoning = Reasoning.NONE
    #: Tool-call ids carry data after this marker that must survive a rename (LiteLLM keeps
    #: Gemini thought signatures as ``<id>__thought__<signature>``).
    id_payload_marker: str | None = None
    #: With thinking on, the last assistant turn of an open tool loop must start with its thinking
    #: block (Claude); where it has none, thinking is turned off for the request (`_thinking`).
    thinking_leads_tool_turn: bool = False


PERMISSIVE = Profile(
    name="permissive",
    merge_consecutive=False,
    trailing_assistant=TrailingAssistant.KEEP,
    first_must_be_user=False,
    token_ratio=1.0,
    mid_system=MidSystem.KEEP,
    no_empty_text=False,
)
ANTHROPIC = Profile(
    name="anthropic",
    trailing_assistant=TrailingAssistant.IF_PREFILL,
    unique_tool_call_ids=True,
    thinking_leads_tool_turn=True,
)
GEMINI = Profile(name="gemini", token_ratio=1.1, mid_system=MidSystem.HOIST, id_payload_marker="__thought__")
STRICT = Profile(name="strict")
MISTRAL = Profile(name="mistral", unique_tool_call_ids=True, nine_char_ids=True, assistant_after_tool=True)
BEDROCK = Profile(name="bedrock", unique_tool_call_ids=True, assistant_after_tool=True)
# Claude through Bedrock Converse: Anthropic's rules plus Converse's turn shape.
BEDROCK_CLAUDE = replace(ANTHROPIC, name="bedrock_claude", assistant_after_tool=True)
DEEPSEEK = Profile(name="deepseek", reasoning=Reasoning.ALL)
MOONSHOT = Profile(name="moonshot", reasoning=Reasoning.TOOL_CALLS)

PROFILES: Mapping[str, Profile] = {
    p.name: p for p in (PERMISSIVE, ANTHROPIC, GEMINI, STRICT, MISTRAL, BEDROCK, BEDROCK_CLAUDE, DEEPSEEK, MOONSHOT)
}

# LiteLLM provider string -> profile name. Providers that host several model families
# (bedrock, vertex_ai*, openrouter) are resolved by model name in `profile_for`.
_BY_PROVIDER: Mapping[str, str] = {
    provider: profile
    for profile, providers in (
        ("permissive", "openai azure azure_ai text-completion-openai groq xai ollama ollama_chat cohere cohere_chat"),
        ("anthropic", "anthropic anthropic_text"),
        ("gemini", "gemini"),
        ("mistral", "mistral codestral"),
        ("deepseek", "deepseek"),
        ("moonshot", "moonshot"),
    )
    for provider in providers.split()
}

# openrouter/<vendor>/<model>: OpenRouter's vendor names that are not the LiteLLM provider they behave as.
_OPENROUTER_VENDORS: Mapping[str, str] = {
    "google": "gemini",
    "x-ai": "xai",
    "z-ai": "zai",
    "mistralai": "mistral",
    "moonshotai": "moonshot",
    "qwen": "dashscope",
}


_MISTRAL_FAMILY = re.compile(r"mistral|mixtral|devstral|ministral|codestral|magistral")


def profile_for(provider: str, model: str) -> Profile:
    """The profile for a LiteLLM provider string and model name (unknown → ``strict``)."""
    provider, model = provider.lower(), model.lower()
    if provider == "openrouter":
        vendor, _, rest = model.removeprefix("openrouter/").partition("/")
        return profile_for(_OPENROUTER_VENDORS.get(vendor, vendor), rest) if rest else STRICT
    claude = "claude" in model or "anthropic" in model
    if provider.startswith("bedrock"):
        # LiteLLM sends Claude on Bedrock through Converse by default; `invoke/` keeps Anthropic's shape.
        return (ANTHROPIC if "/invoke/" in f"/{model}" else BEDROCK_CLAUDE) if claude else BEDROCK
    if provider == "hosted_vllm" and _MISTRAL_FAMILY.search(model):
        # vLLM serves Mistral models with Mistral's own validator or chat template: Mistral's rules.
        return MISTRAL
    if provider.startswith("vertex_ai") and (claude or "gemini" in model):
        return ANTHROPIC if claude else GEMINI
    return PROFILES[_BY_PROVIDER.get(provider, "strict")]
