"""Provider emulation for :class:`~litellm_governance.testing.RecordingUpstream`.

Real providers reject chat histories that LiteLLM forwards unchanged: a tool call without its
result, a system message in the middle, a tool-call id of the wrong shape, a prompt longer than the
window. This module checks a request body *as the provider receives it* (after LiteLLM translated
it) against the rules each provider is documented or observed to enforce, and builds the error the
provider answers: its HTTP status, its error body shape and its error text, so that LiteLLM maps
the emulated error exactly as it maps the real one.

The rules come from the providers' own error messages as reported in public issue threads and
documentation (each :class:`Rule` cites its source), never from litellm-governance's repair code:
a test that uses the emulator can therefore fail when the plugin is wrong. ``PROVIDERS.md`` at the
repository root is the human-readable version of :data:`RULES`.

Wire formats (``wire`` below) are named after the endpoint that receives them:

* ``"chat"``: OpenAI-compatible ``/chat/completions`` ``messages`` (openai, glm, mistral, deepseek,
  moonshot, vllm);
* ``"messages"``: Anthropic ``/v1/messages``;
* ``"gemini"``: Google ``models/{model}:generateContent`` ``contents``;
* ``"converse"``: Bedrock ``/model/{model}/converse`` ``messages``;
* ``"responses"``: OpenAI ``/v1/responses`` ``input`` items.

The prompt's size is counted with tiktoken ``cl100k_base`` (loaded offline through
:func:`litellm_governance._tokens.get_encoding`) over every text the prompt carries, times a
``token_rate`` that stands for a provider tokenizer counting more or less than tiktoken.

Only the standard library and tiktoken (through that loader) are used.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "PROVIDERS",
    "RULES",
    "RULES_BY_ID",
    "WIRES",
    "Emulator",
    "Rejection",
    "Rule",
    "Violation",
    "check_context",
    "count_prompt_tokens",
    "count_text_tokens",
    "error_response",
    "requested_output_tokens",
    "rules_for",
    "sign_thinking",
    "validate",
]

#: Providers the emulator knows, by the name used in ``RecordingUpstream(emulate=...)``.
PROVIDERS: Final = ("openai", "anthropic", "gemini", "bedrock", "mistral", "deepseek", "moonshot", "glm", "vllm")
#: Wire formats, by the endpoint family that receives them.
WIRES: Final = ("chat", "messages", "gemini", "converse", "responses", "completions")

# The wire formats each provider's rules apply to; a request on another wire is not validated.
_NATIVE_WIRES: Final[Mapping[str, frozenset[str]]] = {
    "openai": frozenset({"chat", "responses", "completions"}),
    "anthropic": frozenset({"messages"}),
    "gemini": frozenset({"gemini"}),
    "bedrock": frozenset({"converse"}),
    "mistral": frozenset({"chat"}),
    "deepseek": frozenset({"chat"}),
    "moonshot": frozenset({"chat"}),
    "glm": frozenset({"chat"}),
    "vllm": frozenset({"chat", "completions"}),
}
# Without a provider, a context-length error is answered in the format of the wire.
_WIRE_DEFAULT_PROVIDER: Final[Mapping[str, str]] = {
    "chat": "openai",
    "responses": "openai",
    "completions": "openai",
    "messages": "anthropic",
    "gemini": "gemini",
    "converse": "bedrock",
}


@dataclass(frozen=True)
class Rule:
    """One thing a provider rejects, with the error it answers and where that was reported.

    ``error`` is the provider's message, with ``{placeholders}`` for request-specific parts
    (message indexes, ids, token counts). ``error_type`` / ``code`` override the provider's
    default ``type`` / ``code`` fields of the error body. ``note`` says what could not be
    verified (empty: the text is quoted from ``source``).
    """

    id: str
    provider: str
    wire: str
    checks: str
    error: str
    source: str
    status: int = 400
    error_type: str | None = None
    code: str | int | None = None
    note: str = ""


_ANTHROPIC_THINKING_FIRST: Final = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. "
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding "
    "the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
    "previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
_GEMINI_THOUGHT_SIGNATURE: Final = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
    "call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
_OPENAI_TOOL_UNANSWERED: Final = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. "
    "The following tool_call_ids did not have response messages: {ids}"
)
_GLM_1214: Final = "The messages parameter is illegal. Please check the documentation."

#: The evidence table: every rule the emulator enforces, in the order it checks them per provider.
RULES: Final[tuple[Rule, ...]] = (
    # ---- OpenAI chat completions ------------------------------------------------------------------
    Rule(
        id="openai.tool_call_unanswered",
        provider="openai",
        wire="chat",
        checks="every id in an assistant message's tool_calls is answered by a role:tool message directly after it",
        error=_OPENAI_TOOL_UNANSWERED,
        source="https://github.com/BerriAI/litellm/issues/3474 (and every OpenAI agent framework's tracker)",
    ),
    Rule(
        id="openai.tool_result_orphan",
        provider="openai",
        wire="chat",
        checks="a role:tool message follows an assistant message with tool_calls (or another tool message) "
        "and answers one of its ids",
        error="Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.",
        source="https://community.openai.com/t/error-for-messages-assistant-tool-calls-id-object/626732",
    ),
    Rule(
        id="openai.context_length",
        provider="openai",
        wire="chat",
        checks="prompt tokens (+ max_tokens / max_completion_tokens) fit the window",
        error="This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} "
        "tokens. Please reduce the length of the messages.",
        source="https://github.com/smol-ai/developer/issues/7 ; with max_tokens: 'However, you "
        "requested {total} tokens "
        "({tokens} in the messages, {max_tokens} in the completion)' (langchain-ai/langchain#11001)",
        code="context_length_exceeded",
    ),
    # ---- OpenAI Responses API ---------------------------------------------------------------------
    Rule(
        id="openai.responses.call_without_output",
        provider="openai",
        wire="responses",
        checks="every function_call / custom_tool_call input item has a *_output item with its call_id later in input",
        error="No tool output found for {kind} {call_id}.",
        source="https://github.com/BerriAI/litellm/issues/31439 ; openai/openai-agents-python#873",
    ),
    Rule(
        id="openai.responses.output_without_call",
        provider="openai",
        wire="responses",
        checks="every function_call_output / custom_tool_call_output follows the call with its call_id",
        error="No tool call found for {kind} output with call_id {call_id}.",
        source="https://github.com/BerriAI/litellm/issues/31439 ; openai/codex session-repair reports",
    ),
    Rule(
        id="openai.responses.context_length",
        provider="openai",
        wire="responses",
        checks="input tokens (+ max_output_tokens) fit the window",
        error="Your input exceeds the context window of this model. Please adjust your input and try again.",
        source="https://platform.openai.com/docs/guides/error-codes",
        code="context_length_exceeded",
        note="not verified: text recalled from OpenAI Responses errors, no issue thread found offline",
    ),
    # ---- Anthropic /v1/messages -------------------------------------------------------------------
    Rule(
        id="anthropic.first_user",
        provider="anthropic",
        wire="messages",
        checks="the first message has role user",
        error='messages: first message must use the "user" role',
        source="https://github.com/BerriAI/litellm/issues/3474 ; reported verbatim in many agent repos",
    ),
    Rule(
        id="anthropic.alternation",
        provider="anthropic",
        wire="messages",
        checks="user and assistant messages alternate",
        error='messages: roles must alternate between "user" and "assistant", but found multiple '
        '"{role}" roles in a row',
        source="https://github.com/etkecc/baibot/issues/13 ; https://github.com/lobehub/lobehub/issues/1496",
        note="Anthropic's current docs say consecutive same-role turns are combined; reports are 2024. Kept strict.",
    ),
    Rule(
        id="anthropic.empty_content",
        provider="anthropic",
        wire="messages",
        checks="no message has empty content, except an optional final assistant message",
        error="messages.{index}: all messages must have non-empty content except for the optional "
        "final assistant message",
        source="https://github.com/anomalyco/opencode/issues/31259 (quoted in agent repos)",
    ),
    Rule(
        id="anthropic.empty_text",
        provider="anthropic",
        wire="messages",
        checks="no text block (in messages or system) is empty",
        error="{where}: text content blocks must be non-empty",
        source="https://github.com/anthropics/claude-code/issues/59812 ; "
        "https://github.com/stackblitz/bolt.new/issues/4701",
    ),
    Rule(
        id="anthropic.whitespace_text",
        provider="anthropic",
        wire="messages",
        checks="no text block is whitespace only",
        error="{where}: text content blocks must contain non-whitespace text",
        source="https://github.com/anomalyco/opencode/issues/31259 ; https://github.com/anomalyco/opencode/pull/3194",
    ),
    Rule(
        id="anthropic.duplicate_tool_use_id",
        provider="anthropic",
        wire="messages",
        checks="no tool_use id appears twice in the conversation",
        error="messages.{index}.content.{block}: `tool_use` ids must be unique",
        source="https://github.com/anthropics/claude-code/issues/20901 ; "
        "https://github.com/BerriAI/litellm/issues/23510",
    ),
    Rule(
        id="anthropic.tool_use_unanswered",
        provider="anthropic",
        wire="messages",
        checks="every tool_use of an assistant message is answered by a tool_result at the start of the next message",
        error="messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        source="https://github.com/anthropics/claude-code/issues/5989 ; "
        "https://github.com/Kilo-Org/kilocode/issues/5163",
    ),
    Rule(
        id="anthropic.tool_result_not_first",
        provider="anthropic",
        wire="messages",
        checks="in the user message answering tool_use blocks, tool_result blocks come before any other block",
        error="messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        source="https://docs.anthropic.com/en/docs/build-with-claude/tool-use (tool_result blocks must come first)",
        note="not verified: the docs say text before tool_result is a 400; the emulator answers the "
        "'immediately after' text, whose wording for this case was not found in a report",
    ),
    Rule(
        id="anthropic.tool_result_orphan",
        provider="anthropic",
        wire="messages",
        checks="every tool_result answers a tool_use of the previous (assistant) message",
        error="messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        source="https://github.com/continuedev/continue/issues/4751 ; "
        "https://github.com/router-for-me/CLIProxyAPI/issues/497",
    ),
    Rule(
        id="anthropic.thinking_signature",
        provider="anthropic",
        wire="messages",
        checks="thinking blocks of the latest assistant message carry their original, unaltered signature",
        error="messages.{index}.content.{block}: Invalid `signature` in `thinking` block",
        source="https://github.com/anthropics/claude-code/issues/10627 ; "
        "https://github.com/anthropics/anthropic-sdk-python/issues/1598",
        note="the emulator's signature is sign_thinking(text); any edit of text or signature breaks it",
    ),
    Rule(
        id="anthropic.thinking_first",
        provider="anthropic",
        wire="messages",
        checks="with thinking enabled, the final assistant message of an open tool loop starts with a thinking block",
        error=_ANTHROPIC_THINKING_FIRST,
        source="https://github.com/lbjlaq/Antigravity-Manager/issues/139 (Anthropic error relayed through Vertex)",
    ),
    Rule(
        id="anthropic.no_prefill",
        provider="anthropic",
        wire="messages",
        checks="Claude Opus/Sonnet 4.6 and later: the conversation ends with a user message (no assistant prefill)",
        error="This model does not support assistant message prefill. The conversation must end with a user message.",
        source="https://github.com/smallmain/vscode-unify-chat-provider/issues/249 ; "
        "https://github.com/ericc-ch/copilot-api/pull/261",
    ),
    Rule(
        id="anthropic.context_length",
        provider="anthropic",
        wire="messages",
        checks="input tokens fit the window; input + max_tokens fit the window",
        error="prompt is too long: {tokens} tokens > {window} maximum",
        source="https://github.com/aaif-goose/goose/pull/7504 ; https://github.com/NanmiCoder/cc-haha/issues/860",
        note="input + max_tokens over the window answers 'input length and `max_tokens` exceed context limit: "
        "{tokens} + {max_tokens} > {window}, decrease input length or `max_tokens` and try again' (recalled, "
        "not verified)",
    ),
    # ---- Google Gemini generateContent ------------------------------------------------------------
    Rule(
        id="gemini.empty_parts",
        provider="gemini",
        wire="gemini",
        checks="every content has at least one part",
        error="* GenerateContentRequest.contents[{index}].parts: contents.parts must not be empty.\n",
        source="https://github.com/vercel/ai/issues/3775 ; https://github.com/egoist/chatwise-releases/issues/250",
    ),
    Rule(
        id="gemini.empty_part",
        provider="gemini",
        wire="gemini",
        checks="every part carries data (an empty text part has none)",
        error="* GenerateContentRequest.contents[{index}].parts[{part}].data: required oneof field "
        "'data' must have one "
        "initialized field\n",
        source="https://github.com/router-for-me/CLIProxyAPI/issues/1292 ; "
        "https://github.com/boldsoftware/sketch/issues/68",
    ),
    Rule(
        id="gemini.call_after_user",
        provider="gemini",
        wire="gemini",
        checks="a function-call turn comes right after a user turn or a function-response turn",
        error="Please ensure that function call turn comes immediately after a user turn or after a "
        "function response turn.",
        source="https://github.com/google-gemini/gemini-cli/issues/11814 ; "
        "https://github.com/lobehub/lobehub/issues/10049",
    ),
    Rule(
        id="gemini.response_after_call",
        provider="gemini",
        wire="gemini",
        checks="a function-response turn comes right after a function-call turn",
        error="Please ensure that function response turn comes immediately after a function call turn.",
        source="https://github.com/langchain-ai/langchain/issues/27799 ; GoogleCloudPlatform/generative-ai#368",
    ),
    Rule(
        id="gemini.response_count",
        provider="gemini",
        wire="gemini",
        checks="the turn after a function-call turn has as many function responses as the call turn has calls",
        error="Please ensure that the number of function response parts is equal to the number of function call parts "
        "of the function call turn.",
        source="https://github.com/google-gemini/gemini-cli/issues/4504 ; "
        "https://github.com/google-gemini/gemini-cli/issues/2321",
        note="a call turn followed by a turn with no responses at all is assumed to get this error too",
    ),
    Rule(
        id="gemini.thought_signature",
        provider="gemini",
        wire="gemini",
        checks="Gemini 3: the first functionCall part of each model turn in the current turn carries thoughtSignature",
        error=_GEMINI_THOUGHT_SIGNATURE,
        source="https://github.com/lbjlaq/Antigravity-Manager/issues/139 ; "
        "https://ai.google.dev/gemini-api/docs/thought-signatures",
        note="'position' numbering not verified (the emulator reports the content index + 1)",
    ),
    Rule(
        id="gemini.context_length",
        provider="gemini",
        wire="gemini",
        checks="input tokens (+ maxOutputTokens) fit the window",
        error="The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
        source="https://github.com/google-gemini/gemini-cli/issues/6678 ; "
        "https://github.com/google-gemini/gemini-cli/issues/4118",
    ),
    # ---- AWS Bedrock Converse ---------------------------------------------------------------------
    Rule(
        id="bedrock.tool_config",
        provider="bedrock",
        wire="converse",
        checks="toolConfig is present when messages contain toolUse or toolResult blocks",
        error="The toolConfig field must be defined when using toolUse and toolResult content blocks.",
        source="https://github.com/langgenius/dify/issues/7328 ; https://github.com/BerriAI/litellm/pull/31400",
    ),
    Rule(
        id="bedrock.first_user",
        provider="bedrock",
        wire="converse",
        checks="the first message has role user",
        error="A conversation must start with a user message. Try again with a conversation that "
        "starts with a user message.",
        source="Bedrock Converse error table (GenAI gateway docs, 'A conversation must start with a user message'); "
        "SHARED PROVIDERS.md",
    ),
    Rule(
        id="bedrock.alternation",
        provider="bedrock",
        wire="converse",
        checks="user and assistant messages alternate",
        error="A conversation must alternate between user and assistant roles. Make sure the conversation alternates "
        "between user and assistant roles and try again.",
        source="https://github.com/microsoft/semantic-kernel/issues/10281",
    ),
    Rule(
        id="bedrock.empty_content",
        provider="bedrock",
        wire="converse",
        checks="no message has an empty content list",
        error="The content field in the Message object at messages.{index} is empty. Add a ContentBlock object to the "
        "content field and try again.",
        source="https://github.com/earendil-works/pi/pull/3443",
    ),
    Rule(
        id="bedrock.blank_text",
        provider="bedrock",
        wire="converse",
        checks="no text block is empty or blank",
        error="The text field in the ContentBlock object at messages.{index}.content.{block} is blank. Add text to the "
        "text field, and try again.",
        source="https://github.com/OpenHands/OpenHands/issues/5339 ; "
        "https://github.com/continuedev/continue/issues/9767",
    ),
    Rule(
        id="bedrock.tool_use_unanswered",
        provider="bedrock",
        wire="converse",
        checks="every toolUse of an assistant message is answered by a toolResult in the next message",
        error="Expected toolResult blocks at messages.{index}.content for the following Ids: {ids}",
        source="https://github.com/agno-agi/agno/issues/6698 ; https://github.com/HolmesGPT/holmesgpt/issues/127",
    ),
    Rule(
        id="bedrock.tool_result_orphan",
        provider="bedrock",
        wire="converse",
        checks="every toolResult answers a toolUse of the previous message",
        error="The number of toolResult blocks at messages.{index}.content exceeds the number of toolUse blocks of "
        "previous turn.",
        source="https://github.com/Just-Curieous/Curie/issues/16 ; https://github.com/pydantic/pydantic-ai/issues/2327",
    ),
    Rule(
        id="bedrock.mixed_tool_result_turn",
        provider="bedrock",
        wire="converse",
        checks="a user message with toolResult blocks holds no text/image/document blocks",
        error="messages.{index}.content: Conversation blocks and tool result blocks cannot be "
        "provided in the same turn.",
        source="https://github.com/BerriAI/litellm/issues/6053 ; "
        "https://github.com/strands-agents/harness-sdk/issues/1223",
        note="reported for Claude 3 Opus (2024), Llama 4 and Nova; whether current Claude models still reject "
        "it was not verified",
    ),
    Rule(
        id="bedrock.last_user",
        provider="bedrock",
        wire="converse",
        checks="non-Anthropic models: the conversation ends with a user message",
        error="The model that you are using requires the last turn in the conversation to be a user "
        "message. Add a user "
        "message to the conversation and try again.",
        source="Bedrock Converse error table (GenAI gateway docs); SHARED PROVIDERS.md (Claude <= "
        "4.5 ok, others error)",
    ),
    Rule(
        id="bedrock.context_length",
        provider="bedrock",
        wire="converse",
        checks="input tokens (+ inferenceConfig.maxTokens) fit the window",
        error="The model returned the following errors: Input is too long for requested model.",
        source="https://github.com/continuedev/continue/issues/6005 ; "
        "https://github.com/aws-samples/bedrock-chat/issues/95",
    ),
    # ---- Mistral La Plateforme --------------------------------------------------------------------
    Rule(
        id="mistral.tool_call_id",
        provider="mistral",
        wire="chat",
        checks="tool-call ids (on calls and results) are exactly 9 characters of [a-zA-Z0-9]",
        error="Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9.",
        source="https://github.com/nearai/ironclaw/issues/1241 ; https://github.com/anomalyco/opencode/issues/1680",
        error_type="invalid_function_call",
        code="3280",
    ),
    Rule(
        id="mistral.role_order",
        provider="mistral",
        wire="chat",
        checks="role transitions: after tool only tool/assistant; after assistant no system; "
        "after user/system no tool (mistral-common validator)",
        error="Unexpected role '{role}' after role '{previous}'",
        source="https://github.com/BerriAI/litellm/issues/17761 ; https://github.com/zed-industries/zed/issues/37021",
        error_type="invalid_request_message_order",
        code="3230",
        note="the transition table is recalled from mistral-common's validator, not read from its source",
    ),
    Rule(
        id="mistral.tool_count",
        provider="mistral",
        wire="chat",
        checks="every tool call is answered by exactly one tool message",
        error="Not the same number of function calls and responses",
        source="https://github.com/mistralai/client-python/issues/234 ; "
        "https://github.com/567-labs/instructor/issues/724",
        code="3230",
    ),
    Rule(
        id="mistral.last_role",
        provider="mistral",
        wire="chat",
        checks="the last message is user or tool (or assistant with prefix: true)",
        error="Expected last role User or Tool (or Assistant with prefix True) for serving but got {role}",
        source="https://github.com/0xPlaygrounds/rig/pull/1130",
        error_type="invalid_request_message_order",
        code="3230",
        note="type/code of this error not verified",
    ),
    Rule(
        id="mistral.context_length",
        provider="mistral",
        wire="chat",
        checks="prompt tokens (+ max_tokens) fit the window",
        error="Prompt contains {tokens} tokens, too large for model with {limit} maximum context length",
        source="Mistral overflow text collected by agent frameworks (pi-mono overflow patterns); "
        "https://docs.mistral.ai/resources/known-limitations",
        note="type/code of this error not verified",
    ),
    # ---- DeepSeek ---------------------------------------------------------------------------------
    Rule(
        id="deepseek.tool_call_unanswered",
        provider="deepseek",
        wire="chat",
        checks="every tool call is answered by a tool message directly after the assistant message",
        error="An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. (insufficient tool messages following tool_calls message)",
        source="DeepSeek 400 quoted in agent repos ('insufficient tool messages following tool_calls message')",
    ),
    Rule(
        id="deepseek.tool_result_orphan",
        provider="deepseek",
        wire="chat",
        checks="a tool message answers a call of the preceding assistant message",
        error="Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
        source="OpenAI-compatible rule",
        note="not verified: DeepSeek's exact text for an orphan tool message was not found; OpenAI wording assumed",
    ),
    Rule(
        id="deepseek.reasoner_first_user",
        provider="deepseek",
        wire="chat",
        checks="deepseek-reasoner: the first non-system message is a user message",
        error="The first message (except the system message) of deepseek-reasoner must be a user message, but an "
        "assistant message detected.",
        source="SHARED PROVIDERS.md; client workarounds quoting 'The first message (except the system message) of "
        "deepseek-reasoner must be a user message'",
        note="the tail ', but an assistant message detected.' is not verified",
    ),
    Rule(
        id="deepseek.reasoner_successive",
        provider="deepseek",
        wire="chat",
        checks="deepseek-reasoner: no two user or two assistant messages in a row",
        error="deepseek-reasoner does not support successive user or assistant messages (messages[{first}] and "
        "messages[{second}] in your input). You should interleave the user/assistant messages in the message "
        "sequence.",
        source="deepseek-ai/DeepSeek-R1#21 ; BerriAI/litellm#7972 (quoted verbatim in agent repos)",
    ),
    Rule(
        id="deepseek.reasoner_last_user",
        provider="deepseek",
        wire="chat",
        checks="deepseek-reasoner: the last message is user (or tool, or assistant with prefix: true)",
        error="The last message of deepseek-reasoner must be a user message, or an assistant message "
        "with prefix mode on "
        "(refer to https://api-docs.deepseek.com/guides/chat_prefix_completion).",
        source="quoted verbatim in agent repos (openai.BadRequestError from api.deepseek.com)",
        note="a trailing tool message is assumed allowed (reasoner supports tool calls since V3.1)",
    ),
    Rule(
        id="deepseek.reasoning_content",
        provider="deepseek",
        wire="chat",
        checks="thinking mode (deepseek-reasoner, deepseek-v4-*, thinking.type=enabled): every assistant message with "
        "tool_calls carries reasoning_content",
        error="The `reasoning_content` in the thinking mode must be passed back to the API.",
        source="https://github.com/BerriAI/litellm/issues/37636 (follow-up of #28045) ; crewAIInc/crewAI#5878",
    ),
    Rule(
        id="deepseek.context_length",
        provider="deepseek",
        wire="chat",
        checks="prompt tokens + max_tokens fit the window",
        error="This model's maximum context length is {window} tokens. However, you requested "
        "{total} tokens ({tokens} in "
        "the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
        source="https://github.com/BerriAI/litellm/issues/10431 ; https://github.com/evalstate/fast-agent/issues/621",
    ),
    # ---- Moonshot (Kimi) --------------------------------------------------------------------------
    Rule(
        id="moonshot.tool_call_unanswered",
        provider="moonshot",
        wire="chat",
        checks="every tool call is answered by a tool message directly after the assistant message",
        error="Invalid request: " + _OPENAI_TOOL_UNANSWERED,
        source="Kimi 'The following tool_call_ids did not have response messages' (quoted in a "
        "Responses-repair module)",
        note="the 'Invalid request: ' prefix and the first sentence are assumed from Moonshot's other errors",
    ),
    Rule(
        id="moonshot.tool_result_orphan",
        provider="moonshot",
        wire="chat",
        checks="a tool message answers a call of the preceding assistant message",
        error="Invalid request: tool_call_id {id} is not found",
        source="not verified",
        note="not verified: text assumed",
    ),
    Rule(
        id="moonshot.empty_assistant",
        provider="moonshot",
        wire="chat",
        checks="no assistant message without content and without tool calls",
        error="Invalid request: the message at position {index} with role 'assistant' must not be empty",
        source="quoted in several agent repos (e.g. 'the message at position 54 with role "
        "'assistant' must not be empty')",
    ),
    Rule(
        id="moonshot.reasoning_content",
        provider="moonshot",
        wire="chat",
        checks="thinking models (kimi-k2-thinking*, kimi-k2.5/2.6 unless thinking disabled): every assistant message "
        "with tool_calls carries reasoning_content",
        error="thinking is enabled but reasoning_content is missing in assistant tool call message at index {index}",
        source="https://github.com/continuedev/continue/issues/11600 ; "
        "https://github.com/continuedev/continue/issues/11711",
    ),
    Rule(
        id="moonshot.context_length",
        provider="moonshot",
        wire="chat",
        checks="prompt tokens + max_tokens fit the window",
        error="Invalid request: Your request exceeded model token limit: {window} (requested: {total})",
        source="Kimi overflow text collected by agent frameworks ('Your request exceeded model token limit: 262144 "
        "(requested: 300000)')",
        note="the 'Invalid request: ' prefix is assumed",
    ),
    # ---- Z.ai / Zhipu GLM -------------------------------------------------------------------------
    Rule(
        id="glm.no_user",
        provider="glm",
        wire="chat",
        checks="the conversation contains at least one user message",
        error=_GLM_1214,
        source="https://github.com/anomalyco/opencode/issues/2557",
        code="1214",
    ),
    Rule(
        id="glm.system_not_first",
        provider="glm",
        wire="chat",
        checks="system messages only at the start",
        error=_GLM_1214,
        source="https://github.com/zai-org/GLM-5/issues/74",
        code="1214",
        note="issue thread not readable offline; rule taken from the brief",
    ),
    Rule(
        id="glm.tool_call_unanswered",
        provider="glm",
        wire="chat",
        checks="every tool call is answered by a tool message directly after the assistant message",
        error=_GLM_1214,
        source="https://github.com/continuedev/continue/issues/13259 (1214 in agent sessions)",
        code="1214",
        note="not verified which history defect caused each reported 1214",
    ),
    Rule(
        id="glm.tool_result_orphan",
        provider="glm",
        wire="chat",
        checks="a tool message answers a call of the preceding assistant message",
        error=_GLM_1214,
        source="https://github.com/continuedev/continue/issues/13259",
        code="1214",
        note="not verified which history defect caused each reported 1214",
    ),
    Rule(
        id="glm.consecutive_assistant",
        provider="glm",
        wire="chat",
        checks="no two assistant messages in a row",
        error=_GLM_1214,
        source="SHARED PROVIDERS.md (assistant->assistant: error 1214)",
        code="1214",
    ),
    Rule(
        id="glm.trailing_assistant",
        provider="glm",
        wire="chat",
        checks="the conversation does not end with an assistant message",
        error=_GLM_1214,
        source="not verified: taken from the brief (SHARED PROVIDERS.md marks it '?')",
        code="1214",
        note="not verified",
    ),
    Rule(
        id="glm.context_length",
        provider="glm",
        wire="chat",
        checks="prompt tokens + max_tokens fit the window",
        error="Prompt exceeds max length",
        source="https://github.com/zeroclaw-labs/zeroclaw/issues/4124 ; "
        "https://github.com/NousResearch/hermes-agent/pull/1877",
        code="1261",
    ),
    # ---- vLLM with an alternation-enforcing chat template ------------------------------------------
    Rule(
        id="vllm.system_not_first",
        provider="vllm",
        wire="chat",
        checks="chat template: a system message only at index 0 (Qwen-family templates)",
        error="System message must be at the beginning.",
        source="https://github.com/anomalyco/opencode/issues/16560 (Qwen3.5/3.6 templates)",
    ),
    Rule(
        id="vllm.alternation",
        provider="vllm",
        wire="chat",
        checks="chat template of Mistral-family models (Mistral-7B-Instruct-v0.3 style): ignoring tool messages "
        "and assistant tool-call messages, user/assistant alternate starting with user",
        error="After the optional system message, conversation roles must alternate user/assistant/user/assistant/...",
        source="https://github.com/vllm-project/vllm/issues/6862 ; https://github.com/microsoft/autogen/issues/1037",
    ),
    Rule(
        id="vllm.context_length",
        provider="vllm",
        wire="chat",
        checks="prompt tokens + max_tokens fit max_model_len",
        error="This model's maximum context length is {window} tokens. However, you requested "
        "{total} tokens ({tokens} in "
        "the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
        source="https://github.com/vllm-project/vllm/issues/20409",
    ),
)

RULES_BY_ID: Final[Mapping[str, Rule]] = {rule.id: rule for rule in RULES}
assert len(RULES_BY_ID) == len(RULES), "rule ids must be unique"


@dataclass(frozen=True)
class Violation:
    """A broken rule: the rule and the provider's error message filled in for this request."""

    rule: Rule
    message: str
    param: str | None = None


@dataclass(frozen=True)
class Rejection:
    """What the emulated provider answers for a violation: status, headers and JSON body."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    rule_id: str = ""
    message: str = ""


def _violation(rule_id: str, param: str | None = None, **values: object) -> Violation:
    rule = RULES_BY_ID[rule_id]
    return Violation(rule, rule.error.format(**values) if values else rule.error, param)


# ---- shared helpers -------------------------------------------------------------------------------------

_JSON = Mapping[str, Any]


def _as_dicts(value: object) -> list[_JSON]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _chat_text(content: object) -> str:
    """The text of an OpenAI chat ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in _as_dicts(content):
        text = part.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


def _chat_is_empty(content: object) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return content == ""
    if isinstance(content, list):
        return all(
            isinstance(part, Mapping) and part.get("type") == "text" and not part.get("text") for part in content
        )
    return False


def _tool_call_ids(message: _JSON) -> list[str]:
    return [str(call.get("id")) for call in _as_dicts(message.get("tool_calls"))]


def _thinking_type(body: _JSON) -> str | None:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping):
        kind = thinking.get("type")
        return kind if isinstance(kind, str) else None
    return None


def _model_name(body: _JSON, model: str | None) -> str:
    name = model if model is not None else body.get("model")
    return name.lower().rsplit("/", 1)[-1] if isinstance(name, str) else ""


def _chat_pairing(messages: Sequence[_JSON]) -> tuple[str, int, list[str]] | None:
    """The first tool-pairing defect of an OpenAI-style history.

    ``("unanswered", i, ids)``: the assistant message ``i`` has calls not answered by the tool
    messages directly after it. ``("orphan", i, [id])``: the tool message ``i`` answers no call of
    the assistant message before the run of tool messages it belongs to.
    """
    owner = -1
    expected: list[str] = []
    answered: set[str] = set()
    open_zone = False
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if not open_zone or call_id not in expected:
                return "orphan", index, [call_id]
            answered.add(call_id)
            continue
        if open_zone:
            missing = [call_id for call_id in expected if call_id not in answered]
            if missing:
                return "unanswered", owner, missing
        open_zone = False
        if role == "assistant" and message.get("tool_calls"):
            owner, expected, answered, open_zone = index, _tool_call_ids(message), set(), True
    if open_zone:
        missing = [call_id for call_id in expected if call_id not in answered]
        if missing:
            return "unanswered", owner, missing
    return None


def _messages(body: _JSON) -> list[_JSON]:
    return _as_dicts(body.get("messages"))


# ---- OpenAI-compatible chat providers ---------------------------------------------------------------


def _validate_openai_chat(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    defect = _chat_pairing(messages)
    if defect is not None:
        kind, index, ids = defect
        if kind == "unanswered":
            return _violation("openai.tool_call_unanswered", f"messages.[{index}].role", ids=", ".join(ids))
        return _violation("openai.tool_result_orphan", f"messages.[{index}].role")
    return None


def _validate_glm(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    roles = [message.get("role") for message in messages]
    if "user" not in roles:
        return _violation("glm.no_user")
    seen_other = False
    for role in roles:
        if role == "system" and seen_other:
            return _violation("glm.system_not_first")
        seen_other = seen_other or role != "system"
    defect = _chat_pairing(messages)
    if defect is not None:
        return _violation("glm.tool_call_unanswered" if defect[0] == "unanswered" else "glm.tool_result_orphan")
    for previous, current in itertools.pairwise(roles):
        if previous == current == "assistant":
            return _violation("glm.consecutive_assistant")
    if roles and roles[-1] == "assistant":
        return _violation("glm.trailing_assistant")
    return None


_MISTRAL_ID: Final = re.compile(r"[a-zA-Z0-9]{9}")
# mistral-common's MistralRequestValidator: which roles may follow which.
_MISTRAL_NEXT: Final[Mapping[str, frozenset[str]]] = {
    "system": frozenset({"user", "assistant", "system"}),
    "user": frozenset({"assistant", "system", "user"}),
    "assistant": frozenset({"assistant", "user", "tool"}),
    "tool": frozenset({"assistant", "tool"}),
}


def _validate_mistral(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    for message in messages:
        ids = _tool_call_ids(message) if message.get("role") == "assistant" else []
        if message.get("role") == "tool":
            ids = [str(message.get("tool_call_id"))]
        for call_id in ids:
            if not _MISTRAL_ID.fullmatch(call_id):
                return _violation("mistral.tool_call_id", id=call_id)
    previous: str | None = None
    for message in messages:
        role = str(message.get("role"))
        if previous is not None and role not in _MISTRAL_NEXT.get(previous, frozenset()):
            return _violation("mistral.role_order", role=role, previous=previous)
        previous = role
    if _chat_pairing(messages) is not None:
        return _violation("mistral.tool_count")
    if messages:
        last = messages[-1]
        role = str(last.get("role"))
        if role not in ("user", "tool") and not (role == "assistant" and last.get("prefix") is True):
            return _violation("mistral.last_role", role=role)
    return None


def _deepseek_thinking(body: _JSON, model: str | None) -> bool:
    name = _model_name(body, model)
    kind = _thinking_type(body)
    if kind == "enabled":
        return True
    if kind == "disabled":
        return False
    return name.startswith("deepseek-reasoner") or name.startswith("deepseek-v4")


def _missing_reasoning(messages: Sequence[_JSON]) -> int | None:
    for index, message in enumerate(messages):
        if (
            message.get("role") == "assistant"
            and message.get("tool_calls")
            and not isinstance(message.get("reasoning_content"), str)
        ):
            return index
    return None


def _validate_deepseek(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    defect = _chat_pairing(messages)
    if defect is not None:
        if defect[0] == "unanswered":
            return _violation("deepseek.tool_call_unanswered", f"messages.[{defect[1]}].role")
        return _violation("deepseek.tool_result_orphan", f"messages.[{defect[1]}].role")
    if _model_name(body, model).startswith("deepseek-reasoner"):
        chat = [(index, str(m.get("role"))) for index, m in enumerate(messages) if m.get("role") != "system"]
        if chat and chat[0][1] != "user":
            return _violation("deepseek.reasoner_first_user")
        for (first, role_a), (second, role_b) in itertools.pairwise(chat):
            if role_a == role_b and role_a in ("user", "assistant"):
                return _violation("deepseek.reasoner_successive", first=first, second=second)
        if chat:
            last = messages[chat[-1][0]]
            if chat[-1][1] == "assistant" and last.get("prefix") is not True:
                return _violation("deepseek.reasoner_last_user")
    if _deepseek_thinking(body, model) and _missing_reasoning(messages) is not None:
        return _violation("deepseek.reasoning_content")
    return None


_KIMI_THINKING_BY_DEFAULT: Final = ("kimi-k2.5", "kimi-k2.6", "kimi-k3")


def _moonshot_thinking(body: _JSON, model: str | None) -> bool:
    name = _model_name(body, model)
    kind = _thinking_type(body)
    if "thinking" in name or kind == "enabled":
        return True
    return kind != "disabled" and name.startswith(_KIMI_THINKING_BY_DEFAULT)


def _validate_moonshot(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    for index, message in enumerate(messages):
        if (
            message.get("role") == "assistant"
            and not message.get("tool_calls")
            and _chat_is_empty(message.get("content"))
        ):
            return _violation("moonshot.empty_assistant", index=index)
    defect = _chat_pairing(messages)
    if defect is not None:
        kind, index, ids = defect
        if kind == "unanswered":
            return _violation("moonshot.tool_call_unanswered", ids=", ".join(ids))
        return _violation("moonshot.tool_result_orphan", id=ids[0])
    if _moonshot_thinking(body, model):
        missing_at = _missing_reasoning(messages)
        if missing_at is not None:
            return _violation("moonshot.reasoning_content", index=missing_at)
    return None


_MISTRAL_FAMILY: Final = re.compile(r"mistral|mixtral|devstral|ministral|codestral|magistral")


def _validate_vllm(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    for index, message in enumerate(messages):
        if message.get("role") == "system" and index != 0:
            return _violation("vllm.system_not_first")
    if not _MISTRAL_FAMILY.search(_model_name(body, model).lower()):
        return None  # other templates (Qwen, Llama) do not check alternation
    # Mistral-7B-Instruct-v0.3's template: tool results and assistant tool calls are not counted.
    rest = messages[1:] if messages and messages[0].get("role") == "system" else messages
    turns = [
        str(message.get("role"))
        for message in rest
        if message.get("role") != "tool" and not (message.get("role") == "assistant" and message.get("tool_calls"))
    ]
    for position, role in enumerate(turns):
        if (role == "user") != (position % 2 == 0):
            return _violation("vllm.alternation")
    return None


# ---- Anthropic /v1/messages ---------------------------------------------------------------------------

_NO_PREFILL: Final = re.compile(
    r"claude-(?:opus|sonnet)-4-[6-9]|claude-(?:opus|sonnet|haiku|fable)-[5-9]|claude-fable|fable-5"
)


def sign_thinking(thinking: str) -> str:
    """The signature the emulated Anthropic gives a thinking block with this text.

    A request whose ``thinking`` block carries any other signature (or whose text was edited
    after signing) is rejected with "Invalid `signature` in `thinking` block".
    """
    digest = hashlib.sha256(b"litellm-governance-emulator\x00" + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def _anthropic_blocks(content: object) -> list[_JSON]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return _as_dicts(content)


def _anthropic_text_problem(blocks: Sequence[_JSON]) -> str | None:
    for block in blocks:
        if block.get("type") != "text":
            continue
        text = block.get("text")
        if not isinstance(text, str) or text == "":
            return "empty"
        if not text.strip():
            return "whitespace"
    return None


def _validate_anthropic(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    if messages and messages[0].get("role") != "user":
        return _violation("anthropic.first_user")
    for previous, current in itertools.pairwise(messages):
        if previous.get("role") == current.get("role"):
            return _violation("anthropic.alternation", role=str(current.get("role")))
    for index, message in enumerate(messages):
        content = message.get("content")
        final_assistant = index == len(messages) - 1 and message.get("role") == "assistant"
        if (content in ("", [])) and not final_assistant:
            return _violation("anthropic.empty_content", index=index)
    system = body.get("system")
    system_blocks = _anthropic_blocks(system) if isinstance(system, list) else []
    problem = _anthropic_text_problem(system_blocks)
    if problem is not None:
        return _violation(f"anthropic.{problem}_text", where="system")
    for message in messages:
        content = message.get("content")
        if content == "":
            continue
        problem = _anthropic_text_problem(_anthropic_blocks(content))
        if problem is not None:
            return _violation(f"anthropic.{problem}_text", where="messages")
    seen: set[str] = set()
    for index, message in enumerate(messages):
        for position, block in enumerate(_anthropic_blocks(message.get("content"))):
            if block.get("type") == "tool_use":
                tool_id = str(block.get("id"))
                if tool_id in seen:
                    return _violation("anthropic.duplicate_tool_use_id", index=index, block=position)
                seen.add(tool_id)
    for index, message in enumerate(messages):
        blocks = _anthropic_blocks(message.get("content"))
        previous_ids: list[str] = []
        if index > 0 and messages[index - 1].get("role") == "assistant":
            previous_ids = [
                str(b.get("id"))
                for b in _anthropic_blocks(messages[index - 1].get("content"))
                if b.get("type") == "tool_use"
            ]
        if message.get("role") == "user":
            for position, block in enumerate(blocks):
                if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in previous_ids:
                    return _violation(
                        "anthropic.tool_result_orphan", index=index, block=position, id=str(block.get("tool_use_id"))
                    )
        if message.get("role") != "assistant":
            continue
        ids = [str(block.get("id")) for block in blocks if block.get("type") == "tool_use"]
        if not ids:
            continue
        following = _anthropic_blocks(messages[index + 1].get("content")) if index + 1 < len(messages) else []
        leading: list[str] = []
        later: list[str] = []
        in_lead = True
        for block in following:
            if block.get("type") != "tool_result":
                in_lead = False
                continue
            (leading if in_lead else later).append(str(block.get("tool_use_id")))
        missing = [tool_id for tool_id in ids if tool_id not in leading]
        if missing:
            rule = (
                "anthropic.tool_result_not_first"
                if all(m in later for m in missing)
                else "anthropic.tool_use_unanswered"
            )
            return _violation(rule, index=index, ids=", ".join(missing))
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last_assistant is not None:
        blocks = _anthropic_blocks(messages[last_assistant].get("content"))
        for position, block in enumerate(blocks):
            if block.get("type") == "thinking":
                text = block.get("thinking")
                signature = block.get("signature")
                if not isinstance(text, str) or signature != sign_thinking(text):
                    return _violation("anthropic.thinking_signature", index=last_assistant, block=position)
        tool_loop_open = (
            last_assistant == len(messages) - 2
            and any(b.get("type") == "tool_use" for b in blocks)
            and any(b.get("type") == "tool_result" for b in _anthropic_blocks(messages[-1].get("content")))
        )
        if _thinking_type(body) in ("enabled", "adaptive") and tool_loop_open and blocks:
            first = str(blocks[0].get("type"))
            if first not in ("thinking", "redacted_thinking"):
                return _violation("anthropic.thinking_first", index=last_assistant, found=first)
    if messages and messages[-1].get("role") == "assistant" and _NO_PREFILL.search(_model_name(body, model)):
        return _violation("anthropic.no_prefill")
    return None


# ---- Gemini generateContent ---------------------------------------------------------------------------


def _part_kind(part: _JSON) -> str | None:
    """``text`` / ``call`` / ``response`` / ``data`` for a part that carries data, ``None`` when it carries none."""
    if part.get("functionCall") is not None or part.get("function_call") is not None:
        return "call"
    if part.get("functionResponse") is not None or part.get("function_response") is not None:
        return "response"
    text = part.get("text")
    if isinstance(text, str) and text != "":
        return "text"
    data_keys = (
        "inlineData",
        "inline_data",
        "fileData",
        "file_data",
        "executableCode",
        "executable_code",
        "codeExecutionResult",
        "code_execution_result",
    )
    if any(part.get(key) is not None for key in data_keys):
        return "data"
    return None


def _validate_gemini(body: _JSON, model: str | None) -> Violation | None:
    contents = _as_dicts(body.get("contents"))
    for index, content in enumerate(contents):
        parts = _as_dicts(content.get("parts"))
        if not parts:
            return _violation("gemini.empty_parts", index=index)
        for position, part in enumerate(parts):
            if _part_kind(part) is None:
                return _violation("gemini.empty_part", index=index, part=position)
    kinds = [[_part_kind(part) for part in _as_dicts(content.get("parts"))] for content in contents]
    for index in range(len(contents)):
        calls = kinds[index].count("call")
        responses = kinds[index].count("response")
        if calls:
            previous_ok = index > 0 and contents[index - 1].get("role") in ("user", "function")
            if not previous_ok:
                return _violation("gemini.call_after_user")
            if index + 1 < len(contents) and kinds[index + 1].count("response") != calls:
                return _violation("gemini.response_count")
        if responses:
            if index == 0 or "call" not in kinds[index - 1]:
                return _violation("gemini.response_after_call")
            if kinds[index - 1].count("call") != responses:
                return _violation("gemini.response_count")
    if _model_name(body, model).startswith("gemini-3"):
        current = 0
        for index, content in enumerate(contents):
            if content.get("role") == "user" and "text" in kinds[index] and "response" not in kinds[index]:
                current = index
        for index in range(current, len(contents)):
            parts = _as_dicts(contents[index].get("parts"))
            first_call = next((part for part in parts if _part_kind(part) == "call"), None)
            if first_call is None:
                continue
            if not (first_call.get("thoughtSignature") or first_call.get("thought_signature")):
                call = first_call.get("functionCall") or first_call.get("function_call") or {}
                name = call.get("name") if isinstance(call, Mapping) else None
                return _violation("gemini.thought_signature", name=name, position=index + 1)
    return None


# ---- Bedrock Converse ---------------------------------------------------------------------------------

_BEDROCK_CONVERSATION_BLOCKS: Final = frozenset({"text", "image", "document", "video"})


def _converse_ids(blocks: Sequence[_JSON], kind: str) -> list[str]:
    ids: list[str] = []
    for block in blocks:
        inner = block.get(kind)
        if isinstance(inner, Mapping):
            ids.append(str(inner.get("toolUseId")))
    return ids


def _validate_bedrock(body: _JSON, model: str | None) -> Violation | None:
    messages = _messages(body)
    contents = [_as_dicts(message.get("content")) for message in messages]
    uses_tools = any(
        block.get("toolUse") is not None or block.get("toolResult") is not None
        for blocks in contents
        for block in blocks
    )
    if uses_tools and not isinstance(body.get("toolConfig"), Mapping):
        return _violation("bedrock.tool_config")
    if messages and messages[0].get("role") != "user":
        return _violation("bedrock.first_user")
    for previous, current in itertools.pairwise(messages):
        if previous.get("role") == current.get("role"):
            return _violation("bedrock.alternation")
    for index, blocks in enumerate(contents):
        if not blocks:
            return _violation("bedrock.empty_content", index=index)
        for position, block in enumerate(blocks):
            if "text" in block and (not isinstance(block.get("text"), str) or not str(block.get("text")).strip()):
                return _violation("bedrock.blank_text", index=index, block=position)
    for index, blocks in enumerate(contents):
        role = messages[index].get("role")
        if role == "assistant":
            uses = _converse_ids(blocks, "toolUse")
            if uses:
                answered = _converse_ids(contents[index + 1], "toolResult") if index + 1 < len(contents) else []
                missing = [tool_id for tool_id in uses if tool_id not in answered]
                if missing:
                    return _violation("bedrock.tool_use_unanswered", index=index + 1, ids=", ".join(missing))
        elif role == "user":
            results = _converse_ids(blocks, "toolResult")
            if results:
                prior_uses = _converse_ids(contents[index - 1], "toolUse") if index > 0 else []
                if len(results) > len(prior_uses) or any(tool_id not in prior_uses for tool_id in results):
                    return _violation("bedrock.tool_result_orphan", index=index)
                if any(key in block for block in blocks for key in _BEDROCK_CONVERSATION_BLOCKS):
                    return _violation("bedrock.mixed_tool_result_turn", index=index)
    model_id = (model or "").lower()
    if messages and messages[-1].get("role") == "assistant" and "anthropic." not in model_id:
        return _violation("bedrock.last_user")
    return None


# ---- OpenAI Responses ---------------------------------------------------------------------------------

_RESPONSES_CALLS: Final[Mapping[str, tuple[str, str]]] = {
    # call type: (output type, wording in the error)
    "function_call": ("function_call_output", "function call"),
    "custom_tool_call": ("custom_tool_call_output", "custom tool call"),
}
_RESPONSES_OUTPUTS: Final[Mapping[str, str]] = {out: words for out, words in _RESPONSES_CALLS.values()}


def _validate_responses(body: _JSON, model: str | None) -> Violation | None:
    items = _as_dicts(body.get("input"))
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for item in items:
        kind = item.get("type")
        call_id = str(item.get("call_id"))
        if kind in _RESPONSES_CALLS:
            calls[call_id] = str(kind)
        elif kind in _RESPONSES_OUTPUTS:
            if call_id not in calls and not body.get("previous_response_id"):
                return _violation(
                    "openai.responses.output_without_call", "input", kind=_RESPONSES_OUTPUTS[str(kind)], call_id=call_id
                )
            answered.add(call_id)
    for call_id, kind in calls.items():
        if call_id not in answered:
            return _violation(
                "openai.responses.call_without_output", "input", kind=_RESPONSES_CALLS[kind][1], call_id=call_id
            )
    return None


_Validator = Callable[[_JSON, str | None], Violation | None]
_VALIDATORS: Final[Mapping[tuple[str, str], _Validator]] = {
    ("openai", "chat"): _validate_openai_chat,
    ("openai", "responses"): _validate_responses,
    ("anthropic", "messages"): _validate_anthropic,
    ("gemini", "gemini"): _validate_gemini,
    ("bedrock", "converse"): _validate_bedrock,
    ("mistral", "chat"): _validate_mistral,
    ("deepseek", "chat"): _validate_deepseek,
    ("moonshot", "chat"): _validate_moonshot,
    ("glm", "chat"): _validate_glm,
    ("vllm", "chat"): _validate_vllm,
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


# ---- token counting -----------------------------------------------------------------------------------

#: Tokens counted per message (role and framing) and once per request (reply priming).
MESSAGE_FRAMING: Final = 4
REQUEST_FRAMING: Final = 3
#: Tokens counted per image, audio or file part (their bytes are not text).
MEDIA_TOKENS: Final = 85

_PROMPT_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "chat": ("messages", "tools", "functions"),
    "messages": ("system", "messages", "tools"),
    "gemini": ("system_instruction", "systemInstruction", "contents", "tools"),
    "converse": ("system", "messages", "toolConfig"),
    "responses": ("instructions", "input", "tools"),
    "completions": ("prompt",),
}
_MESSAGE_LISTS: Final[Mapping[str, str]] = {
    "chat": "messages",
    "messages": "messages",
    "gemini": "contents",
    "converse": "messages",
    "responses": "input",
}
# Keys whose values are identifiers or markup, not prompt text.
_SKIP_KEYS: Final = frozenset(
    {
        "role",
        "type",
        "id",
        "tool_call_id",
        "tool_use_id",
        "toolUseId",
        "call_id",
        "signature",
        "thoughtSignature",
        "thought_signature",
        "cache_control",
        "cachePoint",
        "status",
        "encrypted_content",
        "prefix",
        "index",
        "mime_type",
        "mimeType",
        "format",
    }
)
# Keys whose values are media: counted as MEDIA_TOKENS, never tokenized.
_MEDIA_KEYS: Final = frozenset(
    {
        "image_url",
        "input_image",
        "image",
        "source",
        "inline_data",
        "inlineData",
        "file_data",
        "fileData",
        "document",
        "input_audio",
        "video",
        "file",
    }
)
# Keys whose structured values are sent as JSON text (arguments, schemas).
_JSON_KEYS: Final = frozenset(
    {
        "input",
        "args",
        "arguments",
        "response",
        "parameters",
        "input_schema",
        "inputSchema",
        "json",
        "tools",
        "functions",
        "toolConfig",
        "output",
    }
)


def _collect(value: object, texts: list[str], media: list[int]) -> None:
    if isinstance(value, str):
        texts.append(value)
    elif isinstance(value, list):
        for item in value:
            _collect(item, texts, media)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key in _SKIP_KEYS:
                continue
            if key in _MEDIA_KEYS:
                media[0] += 1
            elif key in _JSON_KEYS and not isinstance(item, str):
                texts.append(json.dumps(item, sort_keys=True, ensure_ascii=False))
            else:
                _collect(item, texts, media)


def _encoding() -> Any:
    from litellm_governance._tokens import get_encoding

    return get_encoding("cl100k_base")


def count_text_tokens(text: str) -> int:
    """Tokens of ``text`` under tiktoken ``cl100k_base`` (special tokens counted as text)."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))


def count_prompt_tokens(wire: str, body: Mapping[str, Any], token_rate: float = 1.0) -> int:
    """The emulated provider's prompt size: tiktoken over the prompt's texts, plus framing, times ``token_rate``.

    Texts are message contents, tool-call names and arguments, tool results, thinking text,
    system prompts and tool schemas (as JSON); each message adds :data:`MESSAGE_FRAMING`
    tokens, each media part :data:`MEDIA_TOKENS`, the request :data:`REQUEST_FRAMING`.
    """
    texts: list[str] = []
    media = [0]
    for name in _PROMPT_FIELDS.get(wire, ()):
        if name in body:
            if name in _JSON_KEYS and not isinstance(body[name], str):
                texts.append(json.dumps(body[name], sort_keys=True, ensure_ascii=False))
            else:
                _collect(body[name], texts, media)
    list_name = _MESSAGE_LISTS.get(wire)
    messages = body.get(list_name) if list_name else None
    count = len(messages) if isinstance(messages, list) else 1
    raw = sum(count_text_tokens(text) for text in texts) + MESSAGE_FRAMING * count + REQUEST_FRAMING
    raw += MEDIA_TOKENS * media[0]
    return max(1, math.ceil(raw * token_rate))


def requested_output_tokens(wire: str, body: Mapping[str, Any]) -> int | None:
    """The output budget the request asks for, if any (``max_tokens`` and its per-wire names)."""
    candidates: list[object]
    if wire == "gemini":
        config = body.get("generationConfig", body.get("generation_config"))
        candidates = (
            [config.get("maxOutputTokens"), config.get("max_output_tokens")] if isinstance(config, Mapping) else []
        )
    elif wire == "converse":
        config = body.get("inferenceConfig")
        candidates = [config.get("maxTokens")] if isinstance(config, Mapping) else []
    elif wire == "responses":
        candidates = [body.get("max_output_tokens")]
    else:
        candidates = [body.get("max_completion_tokens"), body.get("max_tokens")]
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def check_context(
    provider: str | None,
    wire: str,
    body: Mapping[str, Any],
    tokens: int,
    *,
    window: int,
    default_max_tokens: int = 0,
) -> Violation | None:
    """The provider's context-length error when ``tokens`` (+ the requested output) exceed ``window``."""
    name = provider or _WIRE_DEFAULT_PROVIDER.get(wire, "openai")
    requested = requested_output_tokens(wire, body)
    reserve = default_max_tokens if requested is None else requested
    limit = window - reserve
    if tokens <= limit:
        return None
    values: dict[str, object] = {
        "tokens": tokens,
        "window": window,
        "limit": max(limit, 0),
        "max_tokens": reserve,
        "total": tokens + reserve,
    }
    if name == "anthropic":
        rule = RULES_BY_ID["anthropic.context_length"]
        if tokens > window:
            return Violation(rule, rule.error.format(**values))
        message = (
            f"input length and `max_tokens` exceed context limit: {tokens} + {reserve} > {window}, decrease input "
            "length or `max_tokens` and try again"
        )
        return Violation(rule, message)
    if name == "openai" and wire == "responses":
        return _violation("openai.responses.context_length", "input")
    if name == "openai":
        rule = RULES_BY_ID["openai.context_length"]
        if reserve:
            message = (
                f"This model's maximum context length is {window} tokens. However, you requested {tokens + reserve} "
                f"tokens ({tokens} in the messages, {reserve} in the completion). Please reduce the length of the "
                "messages or completion."
            )
            return Violation(rule, message, "messages")
        return Violation(rule, rule.error.format(**values), "messages")
    rule = RULES_BY_ID[f"{name}.context_length"]
    return Violation(rule, rule.error.format(**values))


# ---- error bodies -------------------------------------------------------------------------------------

_BEDROCK_VALIDATION: Final = "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"


def error_response(provider: str | None, wire: str, violation: Violation) -> Rejection:
    """The provider's HTTP answer to ``violation``: status, JSON body shape and headers."""
    name = provider or _WIRE_DEFAULT_PROVIDER.get(wire, "openai")
    rule = violation.rule
    message = violation.message
    body: dict[str, Any]
    headers: dict[str, str] = {}
    if name == "anthropic":
        error = {"type": rule.error_type or "invalid_request_error", "message": message}
        body = {"type": "error", "error": error, "request_id": "req_emulated"}
    elif name == "gemini":
        body = {"error": {"code": rule.status, "message": message, "status": "INVALID_ARGUMENT"}}
    elif name == "bedrock":
        body = {"message": message}
        headers["x-amzn-errortype"] = _BEDROCK_VALIDATION
    elif name == "mistral":
        body = {
            "object": "error",
            "message": message,
            "type": rule.error_type or "invalid_request_error",
            "param": None,
            "code": rule.code,
        }
    elif name == "deepseek":
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        }
    elif name == "moonshot":
        body = {"error": {"message": message, "type": rule.error_type or "invalid_request_error"}}
    elif name == "glm":
        body = {"error": {"code": str(rule.code), "message": message}}
    elif name == "vllm":
        body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": rule.status}}
    else:
        body = {
            "error": {
                "message": message,
                "type": rule.error_type or "invalid_request_error",
                "param": violation.param,
                "code": rule.code,
            }
        }
    return Rejection(rule.status, body, headers, rule.id, message)


# ---- the emulator ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Emulator:
    """One emulated provider: its rules, a context window and a tokenizer ratio.

    ``provider`` ``None`` enforces no rules, only the window (answered in the format of the
    endpoint the request came to). ``window`` ``None`` disables the context-length check.
    ``default_max_tokens`` is the output reserve when the request states none.
    """

    provider: str | None = None
    window: int | None = None
    token_rate: float = 1.0
    default_max_tokens: int = 0

    def __post_init__(self) -> None:
        if self.provider is not None and self.provider not in PROVIDERS:
            raise ValueError(f"unknown provider {self.provider!r}; known: {', '.join(PROVIDERS)}")
        if self.token_rate <= 0:
            raise ValueError("token_rate must be positive")
        if self.window is not None and self.window <= 0:
            raise ValueError("window must be positive")

    def applies_to(self, wire: str) -> bool:
        """Whether the provider's rules cover requests on ``wire``."""
        return self.provider is None or wire in _NATIVE_WIRES[self.provider]

    def count(self, wire: str, body: Mapping[str, Any]) -> int:
        """The prompt's size as this provider counts it."""
        return count_prompt_tokens(wire, body, self.token_rate)

    def check(self, wire: str, body: Mapping[str, Any], model: str | None = None) -> tuple[Rejection | None, int]:
        """``(rejection or None, prompt tokens)`` for a request received on ``wire``."""
        tokens = self.count(wire, body)
        if not self.applies_to(wire):
            return None, tokens
        if self.provider is not None:
            violation = validate(self.provider, wire, body, model)
            if violation is not None:
                return error_response(self.provider, wire, violation), tokens
        if self.window is not None:
            violation = check_context(
                self.provider, wire, body, tokens, window=self.window, default_max_tokens=self.default_max_tokens
            )
            if violation is not None:
                return error_response(self.provider, wire, violation), tokens
        return None, tokens

    def rules(self) -> list[Rule]:
        """The rules this emulator enforces (all providers' when ``provider`` is ``None``: none)."""
        return [rule for rule in RULES if rule.provider == self.provider]


def rules_for(provider: str, wires: Iterable[str] | None = None) -> list[Rule]:
    """The rules of ``provider``, optionally only for some wires."""
    chosen = set(wires) if wires is not None else None
    return [rule for rule in RULES if rule.provider == provider and (chosen is None or rule.wire in chosen)]
