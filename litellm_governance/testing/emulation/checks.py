"""Which validator checks which provider on which wire, and `validate`: the first rule a body breaks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from .anthropic import validate_anthropic
from .bedrock import validate_bedrock
from .bodies import JSON
from .chat import (
    validate_deepseek,
    validate_glm,
    validate_mistral,
    validate_moonshot,
    validate_openai_chat,
    validate_vllm,
)
from .gemini import validate_gemini
from .responses import validate_responses
from .rules import PROVIDERS
from .verdicts import Violation

__all__ = ["validate"]


_Validator = Callable[[JSON, str | None], Violation | None]
_VALIDATORS: Final[Mapping[tuple[str, str], _Validator]] = {
    ("openai", "chat"): validate_openai_chat,
    ("openai", "responses"): validate_responses,
    ("anthropic", "messages"): validate_anthropic,
    ("gemini", "gemini"): validate_gemini,
    ("bedrock", "converse"): validate_bedrock,
    ("mistral", "chat"): validate_mistral,
    ("deepseek", "chat"): validate_deepseek,
    ("moonshot", "chat"): validate_moonshot,
    ("glm", "chat"): validate_glm,
    ("vllm", "chat"): validate_vllm,
}


def validate(provider: str, wire: str, body: Mapping[str, Any], model: str | None = None) -> Violation | None:
    """The first rule of ``provider`` that ``body`` (received on ``wire``) breaks, or ``None``.

    ``model`` is the model the provider serves (from the URL for Gemini and Bedrock, whose bodies
    carry none); by default the body's ``model`` field. Context length is checked separately, by
    :func:`check_context`.
    """
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    validator = _VALIDATORS.get((provider, wire))
    return validator(body, model) if validator is not None else None
