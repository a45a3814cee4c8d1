"""`govern_request`: govern a whole request body (or ``litellm`` kwargs) of any of the three
formats, returning a governed copy of the body. No LiteLLM import: usable without LiteLLM."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from ._anthropic import AnthropicOutline
from ._config import GovernanceConfig
from ._errors import InvalidRequestError
from ._pipeline import ChatOutline, Outline, run
from ._report import GovernanceReport
from ._responses import ResponsesOutline
from ._thinking import THINKING_OFF_NOTE, lost_thinking_fields

__all__ = ["FORMATS", "Format", "GovernedRequest", "detect_format", "govern_request", "max_output_tokens"]

Format: TypeAlias = Literal["chat", "anthropic", "responses"]
FORMATS: Final[tuple[Format, ...]] = ("chat", "anthropic", "responses")

# Content block types only the Anthropic format has (chat uses image_url and tool messages).
_ANTHROPIC_BLOCKS: Final = frozenset(
    {
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
        "image",
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
    }
)
_CHAT_ROLES: Final = frozenset({"tool", "system", "developer", "function"})


@dataclass(frozen=True)
class GovernedRequest:
    """A governed copy of a request and what was done to it."""

    request: dict[str, Any]
    report: GovernanceReport

    @property
    def format(self) -> str:
        """The request format that was governed: ``chat``, ``anthropic`` or ``responses``."""
        return self.report.format


def detect_format(request: Mapping[str, Any]) -> Format:
    """The format of a request body: ``responses`` when it carries ``input`` (and no
    ``messages``), ``anthropic`` when it has a top-level ``system`` or Anthropic-only content
    blocks, ``chat`` otherwise (plain user/assistant text reads the same in both)."""
    if "messages" not in request and "input" in request:
        return "responses"
    if "system" in request:
        return "anthropic"
    messages = request.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            if message.get("role") in _CHAT_ROLES or "tool_calls" in message:
                return "chat"
            content = message.get("content")
            if isinstance(content, list) and any(
                isinstance(block, Mapping) and block.get("type") in _ANTHROPIC_BLOCKS for block in content
            ):
                return "anthropic"
    return "chat"


def govern_request(
    request: Mapping[str, Any],
    *,
    format: Format | None = None,
    config: GovernanceConfig | None = None,
    model: str | None = None,
    provider: str | None = None,
    model_info: Mapping[str, Any] | None = None,
    token_ratio: float | None = None,
    ratio_source: str | None = None,
) -> GovernedRequest:
    """Govern a request body — chat completions (``messages``), Anthropic Messages (``messages``
    + ``system``) or Responses (``input`` + ``instructions``) — or the kwargs of the matching
    ``litellm`` call. `format` defaults to `detect_format`.

    `model` names the model to fit (default ``request["model"]``): for a Router model group,
    pass the deployment's model or its `model_info`. Returns the request itself (not a copy)
    when nothing changed. Raises `InvalidRequestError` for a request whose history is not a
    list of dicts.
    """
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"request must be a mapping (a request body), got {type(request).__name__}")
    chosen = detect_format(request) if format is None else format
    target_model = model or request.get("model")
    if not isinstance(target_model, str) or not target_model:
        raise InvalidRequestError("the request has no 'model' and none was given")
    outline, max_output = read_request(request, chosen)
    outcome = run(
        outline,
        model=target_model,
        tools=request.get("tools"),
        max_output_tokens=max_output,
        config=config,
        provider=provider,
        model_info=dict(model_info) if model_info else None,
        token_ratio=token_ratio,
        ratio_source=ratio_source,
    )
    report = outcome.report
    history = outcome.fields.get("input" if chosen == "responses" else "messages")
    thinking = (
        lost_thinking_fields(request, history, chosen)
        if outcome.context.profile.thinking_leads_tool_turn and isinstance(history, list)
        else ()
    )
    if thinking:
        steps = {**report.steps, "thinking_off": 1}
        report = replace(report, steps=steps, notes=(*report.notes, THINKING_OFF_NOTE), changed=True)
    if not report.changed:
        return GovernedRequest(request=request if isinstance(request, dict) else dict(request), report=report)
    governed = {key: value for key, value in request.items() if key not in thinking}
    governed.update(outcome.fields)
    return GovernedRequest(request=governed, report=report)


def read_request(request: Mapping[str, Any], format: Format) -> tuple[Outline, int | None]:
    """The request's history as an outline, and the output tokens it asks for."""
    outline: Outline
    if format == "chat":
        outline = ChatOutline(plain_messages(request.get("messages")))
        max_output = max_output_tokens(request, "chat")
    elif format == "anthropic":
        outline = AnthropicOutline(plain_messages(request.get("messages")), request.get("system"))
        max_output = max_output_tokens(request, "anthropic")
    elif format == "responses":
        outline = ResponsesOutline(
            plain_messages(request.get("input")), request.get("instructions"), request.get("previous_response_id")
        )
        max_output = max_output_tokens(request, "responses")
    else:
        raise InvalidRequestError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    return outline, max_output


def plain_messages(messages: object) -> object:
    """Messages as plain dicts: SDK users sometimes pass LiteLLM/OpenAI message objects back."""
    if not isinstance(messages, list) or all(isinstance(m, dict) for m in messages):
        return messages
    return [
        m.model_dump(exclude_none=True) if hasattr(m, "model_dump") and not isinstance(m, dict) else m for m in messages
    ]


# The fields each format asks for output tokens in, in order of authority.
_MAX_OUTPUT_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "chat": ("max_completion_tokens", "max_tokens"),
    "anthropic": ("max_tokens",),
    "responses": ("max_output_tokens",),
}


def max_output_tokens(request: Mapping[str, Any], format: Format) -> int | None:
    """The output tokens a request asks for (what the provider reserves next to the prompt)."""
    for key in _MAX_OUTPUT_FIELDS[format]:
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
