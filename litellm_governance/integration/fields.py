"""Where the plugin's data sits in LiteLLM's requests and settings — the one module that knows: the
format each call type carries, each format's history and metadata fields, where the report goes
(``spend_logs_metadata``, which LiteLLM's standard logging payload keeps), and the key the plugin's
options and per-request overrides sit under."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._formats import FORMATS, Format, spec_for_call_type

__all__ = [
    "HISTORY",
    "METADATA",
    "SETTINGS_KEY",
    "call_id_of",
    "client_format",
    "format_of",
    "history_chars",
    "holds_compaction",
    "metadata_key",
    "spend_logs",
]

#: The key in ``litellm.callback_settings`` (the proxy config's ``callback_settings:``) with our
#: options, and in a request's metadata with its per-request overrides.
SETTINGS_KEY: Final = "governance"
#: Where each format keeps its history (the field a pass is keyed on).
HISTORY: Final[Mapping[Format, str]] = {spec.name: spec.history for spec in FORMATS.values()}
#: Where each format keeps LiteLLM's own metadata (Anthropic's and OpenAI's ``metadata`` is the
#: provider's field on /v1/messages and /v1/responses: nothing of ours may go there).
METADATA: Final[Mapping[Format, str]] = {spec.name: spec.metadata for spec in FORMATS.values()}
# The metadata field of /v1/messages and /v1/responses requests (`METADATA`).
_CLIENT_METADATA: Final = "litellm_metadata"


def format_of(call_type: Any) -> Format | None:
    """The request format of a LiteLLM call type (a str, or a ``CallTypes`` str enum), None if ungoverned."""
    found = spec_for_call_type(call_type)
    return found.name if found is not None else None


def client_format(request: Mapping[str, Any], fmt: Format) -> Format:
    """The format the client sent `request` in: on the call LiteLLM makes of a ``/v1/messages`` or
    ``/v1/responses`` request for a deployment that takes another format, the client's (its logging
    object keeps the client's call type), else `fmt` itself."""
    logging_obj = request.get("litellm_logging_obj")
    found = format_of(getattr(logging_obj, "call_type", None)) if logging_obj is not None else None
    return found or fmt


def metadata_key(request: Mapping[str, Any], fmt: Format) -> str:
    """The field of `request` with the LiteLLM metadata the plugin reads (per-request overrides) and
    writes (its pass state and report): the format's own (`METADATA`), except on the chat call
    LiteLLM makes when it translates a ``/v1/messages`` or ``/v1/responses`` request for a chat
    deployment. That inner call has no ``metadata`` and carries the client request's
    ``litellm_metadata``, the very dict: the client's overrides are there, and a report written there
    is the one the response header and LiteLLM's logging payload show."""
    key = METADATA[fmt]
    carried = key != _CLIENT_METADATA and not isinstance(request.get(key), dict)
    return _CLIENT_METADATA if carried and isinstance(request.get(_CLIENT_METADATA), dict) else key


def spend_logs(request: dict[str, Any], fmt: Format, *, create: bool) -> dict[str, Any] | None:
    """``spend_logs_metadata`` in the request's LiteLLM metadata (made when `create` and missing):
    the part of it LiteLLM's standard logging payload keeps."""
    key = metadata_key(request, fmt)
    metadata = request.get(key)
    if metadata is None and create:
        metadata = request[key] = {}
    if not isinstance(metadata, dict):
        return None
    spend = metadata.get("spend_logs_metadata")
    if isinstance(spend, dict) or not create or spend is not None:
        return spend if isinstance(spend, dict) else None
    spend = metadata["spend_logs_metadata"] = {}
    return spend


def call_id_of(data: Mapping[str, Any]) -> str | None:
    """LiteLLM's ``litellm_call_id`` of a request or log event, if it has one."""
    call_id = data.get("litellm_call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def history_chars(history: object) -> int:
    """Roughly the text a history holds (messages' and items' text, blocks' ``text`` or ``content``):
    whether it is big enough to govern off the event loop."""
    if isinstance(history, str):
        return len(history)
    chars = 0
    for message in history if isinstance(history, list) else ():
        if not isinstance(message, Mapping):
            continue
        content = message["content"] if "content" in message else message.get("output")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for block in content:
                text = (block.get("text") or block.get("content")) if isinstance(block, Mapping) else None
                chars += len(text) if isinstance(text, (str, list, dict)) else 0
    return chars


def holds_compaction(history: object, fmt: Format) -> bool:
    """Whether a history holds a compaction block (Anthropic) or item (Responses): whether context
    editing has anything to replace for a deployment without compaction."""
    where = FORMATS[fmt].compaction
    if where is None or not isinstance(history, list):
        return False
    for message in history:
        if not isinstance(message, Mapping):
            continue
        if where == "item" and _is_compaction(message):
            return True
        content = message.get("content")
        if where == "block" and isinstance(content, list) and any(_is_compaction(b) for b in content):
            return True
    return False


def _is_compaction(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "compaction"
