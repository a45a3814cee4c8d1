"""The validator of OpenAI's ``/v1/responses`` ``input`` items, and the seals the emulated OpenAI puts
on the reasoning it sends (`seal_reasoning`) and on the compaction items it answers a
``compaction_trigger`` with (`seal_compaction`; `unseal_compaction` reads one back, as OpenAI reads
the context an item stands for)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Final

from .bodies import JSON, as_dicts
from .verdicts import Violation, violation

__all__ = ["seal_compaction", "seal_reasoning", "sealed_reasoning_intact", "unseal_compaction", "validate_responses"]

#: Prefix of the ``encrypted_content`` the emulator issues (content without it is another
#: provider's, opaque to the emulator, and accepted as it is).
SEAL_PREFIX: Final = "emu-rs:"
_SEAL_KEY: Final = b"litellm-governance-emulator-reasoning\x00"
#: Prefix of the ``encrypted_content`` of the emulator's compaction items. OpenAI decrypts a
#: compaction item to read the context it stands for: content it did not issue is refused.
COMPACTION_PREFIX: Final = "emu-cmp:"


def seal_reasoning(item_id: str) -> str:
    """The ``encrypted_content`` the emulated OpenAI gives reasoning item `item_id`: opaque, and
    rejected when it comes back altered ("The encrypted content ... could not be verified")."""
    payload = base64.urlsafe_b64encode(f"reasoning:{item_id}".encode()).decode()
    digest = hashlib.sha256(_SEAL_KEY + payload.encode()).hexdigest()[:32]
    return f"{SEAL_PREFIX}{payload}.{digest}"


def sealed_reasoning_intact(content: object) -> bool:
    """Whether `content` is the emulator's sealed reasoning, unaltered (or not the emulator's at all)."""
    if not isinstance(content, str) or not content.startswith(SEAL_PREFIX):
        return True
    payload, _, digest = content[len(SEAL_PREFIX) :].partition(".")
    return digest == hashlib.sha256(_SEAL_KEY + payload.encode()).hexdigest()[:32]


def seal_compaction(summary: str) -> str:
    """The ``encrypted_content`` of the emulated OpenAI's compaction item standing for `summary`."""
    payload = base64.urlsafe_b64encode(summary.encode()).decode()
    digest = hashlib.sha256(_SEAL_KEY + payload.encode()).hexdigest()[:32]
    return f"{COMPACTION_PREFIX}{payload}.{digest}"


def unseal_compaction(content: object) -> str | None:
    """The summary a compaction item's `content` stands for, if the emulator sealed it unaltered."""
    if not isinstance(content, str) or not content.startswith(COMPACTION_PREFIX):
        return None
    payload, _, digest = content[len(COMPACTION_PREFIX) :].partition(".")
    if digest != hashlib.sha256(_SEAL_KEY + payload.encode()).hexdigest()[:32]:
        return None
    return base64.urlsafe_b64decode(payload.encode()).decode()


def _follows_reasoning(item: JSON) -> bool:
    """Whether `item` can follow a reasoning item: the output it reasoned towards."""
    kind = item.get("type")
    if kind in (None, "message"):
        return item.get("role") == "assistant"
    return isinstance(kind, str) and (kind.endswith("_call") or kind == "reasoning")


_RESPONSES_CALLS: Final[Mapping[str, tuple[str, str]]] = {
    # call type: (output type, wording in the error)
    "function_call": ("function_call_output", "function call"),
    "custom_tool_call": ("custom_tool_call_output", "custom tool call"),
}
_RESPONSES_OUTPUTS: Final[Mapping[str, str]] = {out: words for out, words in _RESPONSES_CALLS.values()}


def validate_responses(body: JSON, model: str | None) -> Violation | None:
    management = body.get("context_management")
    if management is not None and not isinstance(management, list):
        return violation("openai.responses.context_management_shape", "context_management")
    items = as_dicts(body.get("input"))
    for index, item in enumerate(items):
        if item.get("type") == "compaction" and unseal_compaction(item.get("encrypted_content")) is None:
            return violation("openai.responses.compaction_content", id=str(item.get("id", f"input[{index}]")))
        if item.get("type") != "reasoning":
            continue
        ident = str(item.get("id", f"input[{index}]"))
        if not sealed_reasoning_intact(item.get("encrypted_content")):
            return violation("openai.responses.encrypted_content", id=ident)
        if index + 1 >= len(items) or not _follows_reasoning(items[index + 1]):
            return violation("openai.responses.reasoning_without_following", "input", id=ident)
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for item in items:
        kind = item.get("type")
        call_id = str(item.get("call_id"))
        if kind in _RESPONSES_CALLS:
            calls[call_id] = str(kind)
        elif kind in _RESPONSES_OUTPUTS:
            if call_id not in calls and not body.get("previous_response_id"):
                return violation(
                    "openai.responses.output_without_call", "input", kind=_RESPONSES_OUTPUTS[str(kind)], call_id=call_id
                )
            answered.add(call_id)
    for call_id, kind in calls.items():
        if call_id not in answered:
            return violation(
                "openai.responses.call_without_output", "input", kind=_RESPONSES_CALLS[kind][1], call_id=call_id
            )
    return None
