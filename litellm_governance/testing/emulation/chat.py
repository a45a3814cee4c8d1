"""Validators of the OpenAI-compatible chat providers (``/chat/completions`` ``messages``): OpenAI,
GLM, Mistral, DeepSeek, Moonshot (Kimi) and vLLM."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Final

from .bodies import JSON, chat_is_empty, chat_pairing, messages_of, model_name, thinking_type, tool_call_ids
from .verdicts import Violation, violation

__all__ = [
    "validate_deepseek",
    "validate_glm",
    "validate_mistral",
    "validate_moonshot",
    "validate_openai_chat",
    "validate_vllm",
]


#: A field only Anthropic's Messages API has, that a gateway may leak to another provider.
ANTHROPIC_ONLY: Final = "context_management"


def validate_openai_chat(body: JSON, model: str | None) -> Violation | None:
    if ANTHROPIC_ONLY in body:
        return violation("openai.unknown_parameter", name=ANTHROPIC_ONLY)
    messages = messages_of(body)
    defect = chat_pairing(messages)
    if defect is not None:
        kind, index, ids = defect
        if kind == "unanswered":
            return violation("openai.tool_call_unanswered", f"messages.[{index}].role", ids=", ".join(ids))
        return violation("openai.tool_result_orphan", f"messages.[{index}].role")
    return None


def validate_glm(body: JSON, model: str | None) -> Violation | None:
    messages = messages_of(body)
    roles = [message.get("role") for message in messages]
    if "user" not in roles:
        return violation("glm.no_user")
    seen_other = False
    for role in roles:
        if role == "system" and seen_other:
            return violation("glm.system_not_first")
        seen_other = seen_other or role != "system"
    defect = chat_pairing(messages)
    if defect is not None:
        return violation("glm.tool_call_unanswered" if defect[0] == "unanswered" else "glm.tool_result_orphan")
    for previous, current in itertools.pairwise(roles):
        if previous == current == "assistant":
            return violation("glm.consecutive_assistant")
    if roles and roles[-1] == "assistant":
        return violation("glm.trailing_assistant")
    return None


_MISTRAL_ID: Final = re.compile(r"[a-zA-Z0-9]{9}")
# mistral-common's MistralRequestValidator: which roles may follow which.
_MISTRAL_NEXT: Final[Mapping[str, frozenset[str]]] = {
    "system": frozenset({"user", "assistant", "system"}),
    "user": frozenset({"assistant", "system", "user"}),
    "assistant": frozenset({"assistant", "user", "tool"}),
    "tool": frozenset({"assistant", "tool"}),
}


def validate_mistral(body: JSON, model: str | None) -> Violation | None:
    if ANTHROPIC_ONLY in body:
        return violation("mistral.extra_field", name=ANTHROPIC_ONLY)
    messages = messages_of(body)
    for message in messages:
        ids = tool_call_ids(message) if message.get("role") == "assistant" else []
        if message.get("role") == "tool":
            ids = [str(message.get("tool_call_id"))]
        for call_id in ids:
            if not _MISTRAL_ID.fullmatch(call_id):
                return violation("mistral.tool_call_id", id=call_id)
    previous: str | None = None
    for message in messages:
        role = str(message.get("role"))
        if previous is not None and role not in _MISTRAL_NEXT.get(previous, frozenset()):
            return violation("mistral.role_order", role=role, previous=previous)
        previous = role
    if chat_pairing(messages) is not None:
        return violation("mistral.tool_count")
    if messages:
        last = messages[-1]
        role = str(last.get("role"))
        if role not in ("user", "tool") and not (role == "assistant" and last.get("prefix") is True):
            return violation("mistral.last_role", role=role)
    return None


def _deepseek_thinking(body: JSON, model: str | None) -> bool:
    name = model_name(body, model)
    kind = thinking_type(body)
    if kind == "enabled":
        return True
    if kind == "disabled":
        return False
    return name.startswith("deepseek-reasoner") or name.startswith("deepseek-v4")


def _missing_reasoning(messages: Sequence[JSON]) -> int | None:
    for index, message in enumerate(messages):
        if (
            message.get("role") == "assistant"
            and message.get("tool_calls")
            and not isinstance(message.get("reasoning_content"), str)
        ):
            return index
    return None


def validate_deepseek(body: JSON, model: str | None) -> Violation | None:
    messages = messages_of(body)
    defect = chat_pairing(messages)
    if defect is not None:
        if defect[0] == "unanswered":
            return violation("deepseek.tool_call_unanswered", f"messages.[{defect[1]}].role")
        return violation("deepseek.tool_result_orphan", f"messages.[{defect[1]}].role")
    if model_name(body, model).startswith("deepseek-reasoner"):
        chat = [(index, str(m.get("role"))) for index, m in enumerate(messages) if m.get("role") != "system"]
        if chat and chat[0][1] != "user":
            return violation("deepseek.reasoner_first_user")
        for (first, role_a), (second, role_b) in itertools.pairwise(chat):
            if role_a == role_b and role_a in ("user", "assistant"):
                return violation("deepseek.reasoner_successive", first=first, second=second)
        if chat:
            last = messages[chat[-1][0]]
            if chat[-1][1] == "assistant" and last.get("prefix") is not True:
                return violation("deepseek.reasoner_last_user")
    if _deepseek_thinking(body, model) and _missing_reasoning(messages) is not None:
        return violation("deepseek.reasoning_content")
    return None


_KIMI_THINKING_BY_DEFAULT: Final = ("kimi-k2.5", "kimi-k2.6", "kimi-k3")


def _moonshot_thinking(body: JSON, model: str | None) -> bool:
    name = model_name(body, model)
    kind = thinking_type(body)
    if "thinking" in name or kind == "enabled":
        return True
    return kind != "disabled" and name.startswith(_KIMI_THINKING_BY_DEFAULT)


def validate_moonshot(body: JSON, model: str | None) -> Violation | None:
    messages = messages_of(body)
    for index, message in enumerate(messages):
        if (
            message.get("role") == "assistant"
            and not message.get("tool_calls")
            and chat_is_empty(message.get("content"))
        ):
            return violation("moonshot.empty_assistant", index=index)
    defect = chat_pairing(messages)
    if defect is not None:
        kind, index, ids = defect
        if kind == "unanswered":
            return violation("moonshot.tool_call_unanswered", ids=", ".join(ids))
        return violation("moonshot.tool_result_orphan", id=ids[0])
    if _moonshot_thinking(body, model):
        missing_at = _missing_reasoning(messages)
        if missing_at is not None:
            return violation("moonshot.reasoning_content", index=missing_at)
    return None


_MISTRAL_FAMILY: Final = re.compile(r"mistral|mixtral|devstral|ministral|codestral|magistral")


def validate_vllm(body: JSON, model: str | None) -> Violation | None:
    messages = messages_of(body)
    for index, message in enumerate(messages):
        if message.get("role") == "system" and index != 0:
            return violation("vllm.system_not_first")
    if not _MISTRAL_FAMILY.search(model_name(body, model).lower()):
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
            return violation("vllm.alternation")
    return None
