"""How a LiteLLM deployment reaches a `RecordingUpstream`: the proxy ``model_list`` entry for the
provider it emulates, with the ``api_base`` LiteLLM needs for that provider and the emulated window
in ``model_info``, so that the plugin budgets for the window the stand-in enforces.

Without ``model_info.max_input_tokens`` the plugin takes the window from LiteLLM's model map (200k
for GLM): a stand-in emulating a 32k window then rejects what the plugin let through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .upstream import RecordingUpstream

__all__ = ["CONNECTIONS", "Connection", "deployment_for", "deployment_yaml"]


@dataclass(frozen=True)
class Connection:
    """How LiteLLM reaches one emulated provider: an example `model` (LiteLLM's ``provider/model``),
    whether its ``api_base`` is the upstream's root URL (`root`) rather than ``…/v1``, and the other
    ``litellm_params`` it needs (fake credentials)."""

    model: str
    root: bool = False
    params: Mapping[str, str] = field(default_factory=dict)


#: One per emulated provider (``None``: no emulation, an OpenAI-compatible model). LiteLLM appends
#: ``/v1/messages`` to an ``anthropic/`` deployment's ``api_base``, and Gemini's and Bedrock's paths
#: to theirs: those take the root URL; the OpenAI-compatible providers take ``…/v1``.
CONNECTIONS: Final[Mapping[str | None, Connection]] = {
    None: Connection("openai/recording-model"),
    "openai": Connection("openai/gpt-4o"),
    "anthropic": Connection("anthropic/claude-sonnet-4-5", root=True),
    "gemini": Connection("gemini/gemini-2.5-flash", root=True),
    "bedrock": Connection(
        "bedrock/converse/anthropic.claude-3-5-sonnet-20240620-v1:0",
        root=True,
        params={
            "aws_access_key_id": "AKIAEMULATED",
            "aws_secret_access_key": "emulated",
            "aws_region_name": "us-east-1",
        },
    ),
    "mistral": Connection("mistral/mistral-large-latest"),
    "deepseek": Connection("deepseek/deepseek-chat"),
    "moonshot": Connection("moonshot/kimi-k2-0905-preview"),
    "glm": Connection("zai/glm-4.6"),
    "vllm": Connection("hosted_vllm/emulated"),
}


def deployment_for(upstream: RecordingUpstream, model_name: str | None = None) -> dict[str, Any]:
    """A proxy ``model_list`` entry pointing at the running `upstream`, for the provider it emulates:
    its ``api_base`` (root or ``…/v1``, as LiteLLM needs for that provider), a placeholder key, and
    ``model_info.max_input_tokens`` set to the emulated window (when there is one)."""
    emulator = upstream.emulation
    provider = emulator.provider if emulator is not None else None
    connection = CONNECTIONS[provider]
    params: dict[str, Any] = {
        "model": connection.model,
        "api_base": upstream.root_url if connection.root else upstream.base_url,
        "api_key": "sk-local",
        **connection.params,
    }
    entry: dict[str, Any] = {"model_name": model_name or provider or "recording", "litellm_params": params}
    if emulator is not None and emulator.window is not None:
        entry["model_info"] = {"max_input_tokens": emulator.window}
    return entry


def deployment_yaml(entry: Mapping[str, Any]) -> str:
    """`entry` as the YAML lines of one ``model_list`` item (flat string and number values only)."""
    lines = [f"- model_name: {entry['model_name']}"]
    for section in ("litellm_params", "model_info"):
        values = entry.get(section)
        if isinstance(values, Mapping):
            lines.append(f"  {section}:")
            lines.extend(f"    {key}: {_scalar(value)}" for key, value in values.items())
    return "\n".join(lines)


def _scalar(value: object) -> str:
    """A YAML scalar: numbers bare, strings quoted where YAML would read them otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    plain = text and text[0].isalnum() and not any(c in text for c in "#'\"{}[],&*!|>%@`") and ": " not in text
    return text if plain else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
