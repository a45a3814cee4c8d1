"""The emulated providers' rules, as data: one `Rule` per thing a provider rejects, with the error it
answers and where that was reported (the evidence the docs' provider pages are generated from). The
validators that apply them are the other modules of this package; nothing here checks a request."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["NATIVE_WIRES", "PROVIDERS", "RULES", "RULES_BY_ID", "WIRES", "WIRE_DEFAULT_PROVIDER", "Rule", "rules_for"]

#: Providers the emulator knows, by the name used in ``RecordingUpstream(emulate=...)``.

PROVIDERS: Final = ("openai", "anthropic", "gemini", "bedrock", "mistral", "deepseek", "moonshot", "glm", "vllm")
#: Wire formats, by the endpoint family that receives them.
WIRES: Final = ("chat", "messages", "gemini", "converse", "responses", "completions")

#: The wire formats each provider's rules apply to; a request on another wire is not validated.
NATIVE_WIRES: Final[Mapping[str, frozenset[str]]] = {
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
#: Without a provider, a context-length error is answered in the format of the wire.
WIRE_DEFAULT_PROVIDER: Final[Mapping[str, str]] = {
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
        id="openai.unknown_parameter",
        provider="openai",
        wire="chat",
        checks="no Anthropic-only field (context_management) in a chat completions request",
        error="Unrecognized request argument supplied: {name}",
        source="https://github.com/davidmigloz/langchain_dart/issues/712 ; https://github.com/coroot/coroot/issues/698 "
        "(the same error for other unknown arguments)",
        note="the emulator checks only context_management, the field a gateway may leak from /v1/messages",
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
        id="openai.responses.context_management_shape",
        provider="openai",
        wire="responses",
        checks="context_management, when present, is OpenAI's list of compaction entries, not Anthropic's "
        "{edits: [...]} object",
        error="Invalid type for 'context_management': expected an array, but got an object instead.",
        source="https://developers.openai.com/api/docs/guides/compaction (context_management: "
        "[{type: compaction, compact_threshold}])",
        note="not verified: the wording follows OpenAI's other 'Invalid type for' errors",
    ),
    Rule(
        id="openai.responses.reasoning_without_following",
        provider="openai",
        wire="responses",
        checks="a reasoning item is followed by the item it reasoned towards (a call or an assistant message)",
        error="Item '{id}' of type 'reasoning' was provided without its required following item.",
        source="https://github.com/continuedev/continue/issues/8933 ; openai/openai-node#1567",
    ),
    Rule(
        id="openai.responses.encrypted_content",
        provider="openai",
        wire="responses",
        checks="a reasoning item's encrypted_content comes back exactly as the provider issued it",
        error="The encrypted content for item {id} could not be verified. Reason: Encrypted content could not "
        "be decrypted or parsed.",
        source="https://github.com/smallmain/vscode-unify-chat-provider/issues/178 ; openai/codex#8145",
        code="invalid_encrypted_content",
        note="the emulator can verify only what it sealed itself (seal_reasoning); other content is accepted",
    ),
    Rule(
        id="openai.responses.compaction_content",
        provider="openai",
        wire="responses",
        checks="a compaction item's encrypted_content is one the provider issued (it decrypts it to read the "
        "context the item stands for), unaltered",
        error="The encrypted content for item {id} could not be verified. Reason: Encrypted content could not "
        "be decrypted or parsed.",
        source="https://developers.openai.com/api/docs/guides/compaction (compaction items are opaque, "
        "encrypted and only the API that issued them reads them) ; openai/codex#8145",
        code="invalid_encrypted_content",
        note="not verified for compaction items: the wording is that of the reasoning items' rule",
    ),
    Rule(
        id="openai.responses.context_length",
        provider="openai",
        wire="responses",
        checks="input tokens (+ max_output_tokens) fit the window",
        error="Your input exceeds the context window of this model. Please adjust your input and try again.",
        source="https://platform.openai.com/docs/guides/error-codes",
        code="context_length_exceeded",
        note="not verified for OpenAI's Responses API: no public thread of it found; the same text is quoted from "
        "a Claude Code session, https://github.com/anthropics/claude-code/issues/77992",
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
        id="anthropic.context_management_beta",
        provider="anthropic",
        wire="messages",
        checks="context_management comes with the context-management-2025-06-27 beta (anthropic-beta header) "
        "and to a model that has context editing (Claude 4 and later)",
        error="context_management: Extra inputs are not permitted",
        source="https://github.com/anthropics/claude-code/issues/14135 ; braintrustdata/lingua#349 (Bedrock: the "
        "field without its beta) ; https://docs.claude.com/en/docs/build-with-claude/context-editing (beta, models)",
        note="checked with the request's headers, by the emulator (not by validate())",
    ),
    Rule(
        id="anthropic.clear_thinking_needs_thinking",
        provider="anthropic",
        wire="messages",
        checks="a clear_thinking_20251015 edit comes with thinking enabled (or adaptive)",
        error="`clear_thinking_20251015` strategy requires `thinking` to be enabled",
        source="https://github.com/anthropics/claude-code/issues/11971",
    ),
    Rule(
        id="anthropic.clear_thinking_first",
        provider="anthropic",
        wire="messages",
        checks="when edits are combined, clear_thinking_20251015 is listed first",
        error="context_management.edits: `clear_thinking_20251015` must be listed first when combining strategies",
        source="https://docs.claude.com/en/docs/build-with-claude/context-editing ('When combining strategies, the "
        "clear_thinking_20251015 strategy must be listed first')",
        note="not verified: the rule is documented, the error's wording was not found in a report",
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
        source="https://github.com/langgenius/dify/issues/12340 ; https://github.com/elastic/kibana/pull/246393",
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
        source="https://github.com/i-am-bee/beeai-framework/issues/753 (meta.llama3-8b-instruct, through LiteLLM)",
        note="Claude models are left out, as they accept a trailing assistant message (prefill) up to 4.5 "
        "(anthropic.no_prefill): not verified on Bedrock",
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
        id="mistral.extra_field",
        provider="mistral",
        wire="chat",
        checks="no field Mistral's schema does not have (context_management) in the request",
        error='{{"detail":[{{"type":"extra_forbidden","loc":["body","{name}"],'
        '"msg":"Extra inputs are not permitted"}}]}}',
        source="https://github.com/mistralai/platform-docs-public/issues/7 ; "
        "https://github.com/nomtek/mistralai_client_dart/issues/44",
        status=422,
        note="the emulator checks only context_management",
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
        source="https://github.com/zed-industries/zed/issues/51944 ; https://github.com/bytedance/deer-flow/issues/2706",
    ),
    Rule(
        id="deepseek.tool_result_orphan",
        provider="deepseek",
        wire="chat",
        checks="a tool message answers a call of the preceding assistant message",
        error="Messages with role 'tool' must be a response to a preceding message with 'tool_calls'",
        source="https://github.com/FoundationAgents/OpenManus/issues/227",
    ),
    Rule(
        id="deepseek.reasoner_first_user",
        provider="deepseek",
        wire="chat",
        checks="deepseek-reasoner: the first non-system message is a user message",
        error="The first message (except the system message) of deepseek-reasoner must be a user message, but an "
        "assistant message detected.",
        source="https://github.com/ChatGPTNextWeb/NextChat/issues/6343 ; "
        "https://github.com/CherryHQ/cherry-studio/issues/818 ; https://github.com/lobehub/lobehub/pull/5601",
    ),
    Rule(
        id="deepseek.reasoner_successive",
        provider="deepseek",
        wire="chat",
        checks="deepseek-reasoner: no two user or two assistant messages in a row",
        error="deepseek-reasoner does not support successive user or assistant messages (messages[{first}] and "
        "messages[{second}] in your input). You should interleave the user/assistant messages in the message "
        "sequence.",
        source="https://github.com/deepseek-ai/DeepSeek-R1/issues/21 ; https://github.com/Aider-AI/aider/issues/2960",
    ),
    Rule(
        id="deepseek.reasoner_last_user",
        provider="deepseek",
        wire="chat",
        checks="deepseek-reasoner: the last message is user (or tool, or assistant with prefix: true)",
        error="The last message of deepseek-reasoner must be a user message, or an assistant message "
        "with prefix mode on "
        "(refer to https://api-docs.deepseek.com/guides/chat_prefix_completion).",
        source="https://github.com/huggingface/smolagents/issues/430",
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
        source="https://github.com/zai-org/GLM-5/issues/74 (GLM's Anthropic-compatible endpoint answers 422 to a "
        "system-role entry in messages, glm-4.6 and glm-5.1)",
        code="1214",
        note="not verified: no public report shows the chat endpoint answering 1214 to a system message after the "
        "start",
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
        source="https://github.com/Lingtai-AI/lingtai-kernel/issues/70 (GLM-5.1: two assistant messages in a row, "
        "1214)",
        code="1214",
    ),
    Rule(
        id="glm.trailing_assistant",
        provider="glm",
        wire="chat",
        checks="the conversation does not end with an assistant message",
        error=_GLM_1214,
        source="no public report found; Nanobot drops trailing assistant messages for every provider "
        "(HKUDS/nanobot, nanobot/providers/base.py, _enforce_role_alternation)",
        code="1214",
        note="not verified: emulated as strict",
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


def rules_for(provider: str, wires: Iterable[str] | None = None) -> list[Rule]:
    """The rules of ``provider``, optionally only for some wires."""
    chosen = set(wires) if wires is not None else None
    return [rule for rule in RULES if rule.provider == provider and (chosen is None or rule.wire in chosen)]
