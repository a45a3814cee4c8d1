"""One description per request format (`FORMATS`): where each keeps its history, system prompt,
output limit and LiteLLM metadata, which LiteLLM call types carry it, and how its body is read into
the outline the steps work on (rendering back is the outline's own ``render``). Nothing else knows
these field names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from ._anthropic import AnthropicOutline
from ._compaction import Where
from ._errors import InvalidRequestError
from ._messages import Message, Outline, validate_list
from ._output import thinking_budget
from ._responses import ResponsesOutline, said
from ._thinking import Shape

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "ChatOutline",
    "Format",
    "FormatSpec",
    "Outline",
    "Parsed",
    "detect_format",
    "spec",
    "spec_for_call_type",
]

Format: TypeAlias = Literal["chat", "anthropic", "responses"]


class ChatOutline(Outline):
    """Chat completions: the messages are their own outline."""

    format = "chat"
    owns_view = False

    def __init__(self, messages: object) -> None:
        view = validate_list(messages, "messages", "a list of message dicts")
        super().__init__(len(view))
        self.view = view

    def render(self, governed: list[Message]) -> dict[str, Any]:
        return {"messages": governed}


@dataclass(frozen=True)
class Parsed:
    """A request body read for governing: its outline, tool schemas and output limit."""

    outline: Outline
    tools: Sequence[Any] | None
    max_output_tokens: int | None
    #: ``thinking.budget_tokens`` where Anthropic's extended thinking is on (`_output.thinking_budget`).
    thinking_budget: int | None = None


def _plain(messages: object) -> object:
    """Messages as plain dicts: SDK users sometimes pass LiteLLM/OpenAI message objects back."""
    if not isinstance(messages, list) or all(isinstance(m, dict) for m in messages):
        return messages
    return [
        m.model_dump(exclude_none=True) if hasattr(m, "model_dump") and not isinstance(m, dict) else m for m in messages
    ]


@dataclass(frozen=True)
class FormatSpec:
    """Everything format-specific about one kind of request body."""

    name: Format
    #: The proxy route clients send it to.
    route: str
    #: The field holding the conversation.
    history: str
    #: The field holding the system prompt outside the history (None: it is in the history).
    system: str | None
    #: The output-token fields, in order of authority.
    max_output: tuple[str, ...]
    #: Where LiteLLM's own metadata goes (on /v1/messages and /v1/responses ``metadata`` is the provider's).
    metadata: str
    #: LiteLLM call types (``CallTypes`` values) that carry this format.
    call_types: frozenset[str]
    #: Body -> outline.
    reader: Callable[[Mapping[str, Any]], Outline]
    #: Its assistant messages carry chat's ``reasoning_content`` (thinking-mode providers want it back).
    reasoning_field: bool = False
    #: Results find their call by id alone, whatever the provider: an id may not repeat in the request.
    unique_call_ids: bool = False
    #: How its outline holds text an assistant turn gains from the rules (the bridge): as it is,
    #: or as the reader reads the item it renders to (so that it counts the same both ways).
    said: Callable[[str], Any] = str
    #: Where a compaction is (`_compaction`): a content ``block``, an input ``item``, or nowhere.
    compaction: Where | None = None
    #: LiteLLM's ``ProviderConfigManager`` method giving a provider's native config for the route: where
    #: it gives none, LiteLLM translates the call (None: LiteLLM calls every provider in this format).
    litellm_config: str | None = None
    #: The body may ask for Anthropic's server-side context editing (``context_management.edits``).
    context_edits: bool = False
    #: How its assistant turns carry thinking (`_thinking.Shape`); None: no thinking the provider checks.
    thinking: Shape | None = None
    #: Its clients ask the server to compact their session, and send the compaction back (Codex,
    #: `_session_compaction`); a request of another format reaches a deployment hook translated.
    session_compaction: bool = False

    def max_output_tokens(self, request: Mapping[str, Any]) -> int | None:
        """The output tokens a request asks for (what the provider reserves next to the prompt)."""
        for key in self.max_output:
            value = request.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return None

    def read(self, request: Mapping[str, Any]) -> Parsed:
        """The request's outline, tools and output limit."""
        return Parsed(
            self.reader(request), request.get("tools"), self.max_output_tokens(request), thinking_budget(request)
        )


FORMATS: Final[Mapping[Format, FormatSpec]] = {
    "chat": FormatSpec(
        name="chat",
        route="/v1/chat/completions",
        history="messages",
        system=None,
        max_output=("max_completion_tokens", "max_tokens"),
        metadata="metadata",
        call_types=frozenset({"completion", "acompletion"}),
        reader=lambda body: ChatOutline(_plain(body.get("messages"))),
        reasoning_field=True,
        thinking="fields",
    ),
    "anthropic": FormatSpec(
        name="anthropic",
        route="/v1/messages",
        history="messages",
        system="system",
        max_output=("max_tokens",),
        metadata="litellm_metadata",
        call_types=frozenset({"anthropic_messages", "aanthropic_messages"}),
        reader=lambda body: AnthropicOutline(_plain(body.get("messages")), body.get("system")),
        compaction="block",
        litellm_config="get_provider_anthropic_messages_config",
        thinking="blocks",
        context_edits=True,
    ),
    "responses": FormatSpec(
        name="responses",
        route="/v1/responses",
        history="input",
        system="instructions",
        max_output=("max_output_tokens",),
        metadata="litellm_metadata",
        call_types=frozenset({"responses", "aresponses"}),
        reader=lambda body: ResponsesOutline(
            _plain(body.get("input")), body.get("instructions"), body.get("previous_response_id")
        ),
        compaction="item",
        session_compaction=True,
        litellm_config="get_provider_responses_api_config",
        unique_call_ids=True,
        said=lambda text: [said(text)],
    ),
}
#: The format names, in their usual order.
FORMAT_NAMES: Final[tuple[Format, ...]] = tuple(FORMATS)

_BY_CALL_TYPE: Final[Mapping[str, FormatSpec]] = {
    call_type: spec for spec in FORMATS.values() for call_type in spec.call_types
}

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


def spec_for_call_type(call_type: Any) -> FormatSpec | None:
    """The format a LiteLLM call type carries (a str, or a ``CallTypes`` str enum); None: not governed."""
    return _BY_CALL_TYPE.get(str(getattr(call_type, "value", call_type)))


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
            role = message.get("role")
            if (isinstance(role, str) and role in _CHAT_ROLES) or "tool_calls" in message:
                return "chat"
            content = message.get("content")
            if isinstance(content, list) and any(
                isinstance(block, Mapping) and isinstance(kind := block.get("type"), str) and kind in _ANTHROPIC_BLOCKS
                for block in content
            ):
                return "anthropic"
    return "chat"


def spec(format: str) -> FormatSpec:
    """The description of `format`, or a clear error."""
    try:
        return FORMATS[format]  # type: ignore[index]
    except KeyError:
        raise InvalidRequestError(f"format must be one of {', '.join(FORMATS)}, got {format!r}") from None
