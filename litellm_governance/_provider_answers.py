"""What a provider's answer says about the prompt it counted: the usage of a success (in any of the
three formats) and the figures of a context-length rejection. Pure text and data reading, for
calibration (`_calibration`); only figures are extracted, never anything else of the text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["ContextError", "parse_context_error", "prompt_tokens_of"]


def prompt_tokens_of(usage: object) -> int | None:
    """The prompt size a response's usage reports, in any of the three formats.

    ``prompt_tokens`` (chat; LiteLLM's normalised usage, which already counts Anthropic's cache reads
    and writes), else ``input_tokens`` plus Anthropic's ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens`` (Anthropic's own usage leaves cached tokens out of
    ``input_tokens``; the Responses API's ``input_tokens`` already includes them and has no such
    fields). Accepts a mapping or an object with those attributes (pydantic usage types).
    """
    if usage is None:
        return None

    def field(name: str) -> object:
        if isinstance(usage, Mapping):
            return usage.get(name)
        return getattr(usage, name, None)

    prompt = _as_int(field("prompt_tokens"))
    if prompt is not None and prompt > 0:
        return prompt
    count = _as_int(field("input_tokens"))
    if count is None:
        return None
    for name in ("cache_read_input_tokens", "cache_creation_input_tokens"):
        count += _as_int(field(name)) or 0
    return count if count > 0 else None


@dataclass(frozen=True)
class ContextError:
    """What a provider's context-length error says. Every figure is optional: some providers only say
    that the prompt is too long."""

    #: The provider's count of the prompt (the messages, tools and system prompt).
    prompt_tokens: int | None = None
    #: The prompt plus the requested output, when the text only gives their sum.
    requested_tokens: int | None = None
    #: The window (or the limit) the text names.
    limit: int | None = None

    def prompt(self, max_output_sent: int | None) -> int | None:
        """The provider's prompt count, from the sum when needed (minus the output the request asked for)."""
        if self.prompt_tokens is not None:
            return self.prompt_tokens
        if self.requested_tokens is not None:
            prompt = self.requested_tokens - (max_output_sent or 0)
            return prompt if prompt > 0 else None
        return None


_N = r"([0-9][0-9,_]*)"
# Texts that give the provider's prompt count, most specific first. Each has a `prompt` group and
# may have a `limit` group. Sources: `testing.emulation.RULES` (each rule cites its provider's report).
_PROMPT_PATTERNS: Final = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # OpenAI, DeepSeek, vLLM with max_tokens: "... is 8192 tokens. However, you requested 9000
        # tokens (8000 in the messages, 1000 in the completion)."
        rf"maximum context length is {_N} tokens.*?\({_N} in the messages",
        # OpenAI: "... is 8192 tokens. However, your messages resulted in 9000 tokens."
        rf"maximum context length is {_N} tokens.*?resulted in {_N} tokens",
        # vLLM (newer): "... is 32768 tokens. However, your request has 40000 input tokens."
        rf"maximum context length is {_N} tokens.*?request has {_N} input tokens",
        # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
        rf"prompt is too long: {_N} tokens > {_N}",
        # Anthropic: "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000"
        rf"input length and `?max_tokens`? exceed context limit: {_N} \+ {_N} > {_N}",
        # Gemini: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
        rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_N}\)",
        # Mistral: "Prompt contains 40000 tokens, too large for model with 32768 maximum context length"
        rf"prompt contains {_N} tokens,? too large for model with {_N}",
    )
)
# Which group of each pattern above is the prompt count and which the limit.
_GROUPS: Final = ((2, 1), (2, 1), (2, 1), (1, 2), (1, 3), (1, 2), (1, 2))
# Texts that give only the prompt plus the requested output. Moonshot: "Your request exceeded model
# token limit: 262144 (requested: 300000)".
_REQUESTED_PATTERN: Final = re.compile(rf"exceeded model token limit: {_N} \(requested: {_N}\)", re.IGNORECASE)
# Texts that say the prompt is too long without a count. Kept specific: a false match raises a ratio.
_CONTEXT_PHRASES: Final = re.compile(
    "|".join(
        (
            r"context_length_exceeded",
            r"maximum context length",
            r"context window",  # OpenAI Responses: "Your input exceeds the context window of this model."
            r"prompt is too long",
            r"prompt exceeds max length",  # GLM (code 1261)
            r"input is too long",  # Bedrock: "Input is too long for requested model."
            r"exceeded model token limit",
            r"too large for model with",
            r"exceeds the maximum number of tokens",
            r"input length and `?max_tokens`? exceed context limit",
            r"reduce the length of the (?:messages|prompt|input)",
        )
    ),
    re.IGNORECASE,
)


def parse_context_error(text: str) -> ContextError | None:
    """What a context-length error text says, or None when the text is not one.

    `text` is the provider's error message, or LiteLLM's exception text that ends with it (LiteLLM
    prefixes ``litellm.ContextWindowExceededError: ...`` and the provider's JSON body; numbers with
    thousands separators are read too). Only figures are extracted, never any other part.
    """
    if not isinstance(text, str) or not text:
        return None
    for pattern, (prompt_group, limit_group) in zip(_PROMPT_PATTERNS, _GROUPS, strict=True):
        match = pattern.search(text)
        if match:
            return ContextError(prompt_tokens=_int(match[prompt_group]), limit=_int(match[limit_group]))
    match = _REQUESTED_PATTERN.search(text)
    if match:
        return ContextError(requested_tokens=_int(match[2]), limit=_int(match[1]))
    if _CONTEXT_PHRASES.search(text):
        return ContextError()
    return None


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    digits = text.replace(",", "").replace("_", "")
    return int(digits) if digits.isdigit() else None
